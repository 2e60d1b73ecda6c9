// AsyncEngine: one thread runs inbox -> step -> dispatch; callers only touch the inbox, under a mutex.
#include "engine/async_engine.h"

#include <chrono>
#include <map>
#include <set>
#include <string>

#include "engine/choice_text.h"

namespace parallm {

using Clock = std::chrono::steady_clock;

struct AsyncEngine::Pending {
  uint64_t id;
  GenerationRequest request;
  RequestSink sink;
  Clock::time_point arrival;
};

// A request the engine knows, with the text state of each of its n choices.
struct AsyncEngine::Active {
  RequestSink sink;
  RequestId engine_id = 0;
  std::vector<int32_t> prompt;
  Clock::time_point arrival;
  std::vector<std::unique_ptr<ChoiceText>> texts;          // per choice, when there is a tokenizer
  std::vector<std::optional<Clock::time_point>> last_token;  // per choice, for inter-token latency
  std::vector<bool> finished;                              // per choice
  int32_t open_choices = 0;
  bool sampled = false;  // choice 0 sampled its first token (copies 1..n-1 exist from then on)
  int32_t cached_tokens = 0;
  FinishReason reason = FinishReason::kNone;  // choice 0's, for the request_success counter
};

namespace {

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// vLLM's finished_reason label values.
const char* SuccessLabel(FinishReason r) {
  switch (r) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "abort";
    case FinishReason::kNone: return "abort";
  }
  return "abort";
}

}  // namespace

AsyncEngine::AsyncEngine(std::unique_ptr<Model> model, const EngineConfig& config,
                         std::shared_ptr<const Tokenizer> tokenizer, const AsyncEngineConfig& async_config)
    : model_(std::move(model)),
      engine_(*model_, config),
      tokenizer_(std::move(tokenizer)),
      async_config_(async_config) {
  metrics_.block_size = engine_.config().block_size;
  metrics_.num_blocks = engine_.config().num_kv_blocks;
  thread_ = std::thread([this] { Loop(); });
}

AsyncEngine::~AsyncEngine() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    exit_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

Status AsyncEngine::Validate(const GenerationRequest& request) const {
  if (!request.params.stop.empty() && tokenizer_ == nullptr)
    return Err("'stop' strings need a tokenizer; this model has none (use stop_token_ids)");
  return engine_.Validate(request.prompt, request.params);
}

Submission AsyncEngine::Submit(GenerationRequest request, RequestSink sink) {
  std::unique_lock<std::mutex> lock(mu_);
  if (stopping_) return {Admission::kShuttingDown, 0};
  const int32_t limit = engine_.config().scheduler.max_num_seqs + async_config_.max_queued_requests;
  if (num_unfinished_.load() >= limit) return {Admission::kQueueFull, 0};
  const uint64_t id = next_id_++;
  submitted_.push_back(std::make_unique<Pending>(Pending{id, std::move(request), std::move(sink), Clock::now()}));
  ++num_unfinished_;
  lock.unlock();
  wake_.notify_one();
  return {Admission::kAccepted, id};
}

void AsyncEngine::Cancel(uint64_t id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_.push_back(id);
  }
  wake_.notify_one();
}

int32_t AsyncEngine::Drain(double grace_seconds) {
  std::unique_lock<std::mutex> lock(mu_);
  stopping_ = true;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(grace_seconds));
  idle_.wait_until(lock, deadline, [&] { return num_unfinished_.load() == 0; });
  const int32_t left = num_unfinished_.load();
  if (left > 0) {
    cancel_all_ = true;
    wake_.notify_one();
    idle_.wait(lock, [&] { return num_unfinished_.load() == 0; });
  }
  return left;
}

EngineMetrics AsyncEngine::Metrics() const {
  std::lock_guard<std::mutex> lock(metrics_mu_);
  return metrics_;
}

void AsyncEngine::Loop() {
  for (;;) {
    bool exiting = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] {
        return exit_ || cancel_all_ || !submitted_.empty() || !cancelled_.empty() || engine_.HasUnfinished();
      });
      exiting = exit_;
    }
    TakeInbox();
    if (exiting) {
      // Everything left is cancelled; one step hands the cancelled requests out.
      for (const auto& [id, active] : active_) engine_.Cancel(active->engine_id);
      while (engine_.HasUnfinished()) Dispatch(engine_.Step());
      return;
    }
    if (engine_.HasUnfinished()) Dispatch(engine_.Step());
  }
}

void AsyncEngine::TakeInbox() {
  std::vector<std::unique_ptr<Pending>> submitted;
  std::vector<uint64_t> cancelled;
  bool cancel_all = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    submitted.swap(submitted_);
    cancelled.swap(cancelled_);
    cancel_all = cancel_all_ || exit_;
    cancel_all_ = false;
  }
  // Submissions first, so a cancel that raced its own submission finds the request.
  for (std::unique_ptr<Pending>& p : submitted) {
    const int32_t n = p->request.params.n;
    Result<RequestId> engine_id = engine_.Add(p->request.prompt, p->request.params, p->request.priority,
                                                 p->request.adapter);
    if (!engine_id.ok()) {
      RequestUpdate update;
      update.prompt_tokens = static_cast<int32_t>(p->request.prompt.size());
      update.done = true;
      update.error = engine_id.status().message();
      p->sink(std::move(update));
      Finished();
      continue;
    }
    auto a = std::make_unique<Active>();
    a->sink = std::move(p->sink);
    a->engine_id = *engine_id;
    a->prompt = std::move(p->request.prompt);
    a->arrival = p->arrival;
    a->texts.resize(static_cast<size_t>(n));
    if (tokenizer_)
      for (auto& t : a->texts)
        t = std::make_unique<ChoiceText>(*tokenizer_, a->prompt, p->request.params.stop,
                                         p->request.params.skip_special_tokens);
    a->last_token.resize(static_cast<size_t>(n));
    a->finished.assign(static_cast<size_t>(n), false);
    a->open_choices = n;
    by_engine_id_[*engine_id] = p->id;
    active_[p->id] = std::move(a);
  }
  for (uint64_t id : cancelled)
    if (auto it = active_.find(id); it != active_.end()) engine_.Cancel(it->second->engine_id);
  if (cancel_all)
    for (const auto& [id, active] : active_) engine_.Cancel(active->engine_id);
}

void AsyncEngine::Finished() {
  std::lock_guard<std::mutex> lock(mu_);
  if (--num_unfinished_ == 0) idle_.notify_all();
}

void AsyncEngine::Dispatch(std::vector<RequestOutput> outputs) {
  const Clock::time_point now = Clock::now();
  // Updates per submission, in the order the engine reported them.
  std::vector<std::pair<uint64_t, RequestUpdate>> updates;
  std::map<uint64_t, size_t> slot;
  int64_t generated = 0, prompt_tokens = 0;
  std::vector<double> ttft, itl, e2e, queue;
  std::vector<const char*> successes;

  for (RequestOutput& out : outputs) {
    const RequestId root = out.parent_id != 0 ? out.parent_id : out.id;
    auto by_id = by_engine_id_.find(root);
    if (by_id == by_engine_id_.end()) continue;  // cannot happen: every engine request came through TakeInbox
    const uint64_t sid = by_id->second;
    Active& a = *active_.at(sid);
    auto [it, inserted] = slot.try_emplace(sid, updates.size());
    if (inserted) updates.emplace_back(sid, RequestUpdate{});
    RequestUpdate& update = updates[it->second].second;

    const size_t k = static_cast<size_t>(out.choice_index);
    ChoiceUpdate c;
    c.index = out.choice_index;
    c.new_tokens = std::move(out.new_tokens);
    c.new_samples = std::move(out.new_samples);
    c.finished = out.finished;
    generated += static_cast<int64_t>(c.new_tokens.size());
    if (!c.new_tokens.empty()) {
      if (k == 0 && !a.sampled) {
        a.sampled = true;
        prompt_tokens += static_cast<int64_t>(a.prompt.size());
        ttft.push_back(Seconds(now - a.arrival));
      }
      if (a.last_token[k]) itl.push_back(Seconds(now - *a.last_token[k]));
      a.last_token[k] = now;
    }
    if (a.texts[k]) {
      ChoiceText::Step step = a.texts[k]->Add(c.new_tokens, c.finished);
      if (step.stopped && !c.finished) engine_.Stop(out.id);  // its final output arrives next step
      c.new_text = std::move(step.text);
    }
    if (c.finished) {
      const Request& r = *out.request;
      c.finish_reason = r.finish_reason;
      if (a.texts[k] && a.texts[k]->stopped()) c.finish_reason = FinishReason::kStop;
      if (k == 0) {
        a.cached_tokens = r.num_cached_tokens;
        a.reason = c.finish_reason;
        if (r.first_scheduled) queue.push_back(Seconds(*r.first_scheduled - a.arrival));
      }
      a.finished[k] = true;
      --a.open_choices;
    }
    const bool copies_never_made = k == 0 && c.finished && !a.sampled;
    const FinishReason reason = c.finish_reason;
    update.choices.push_back(std::move(c));
    // Choice 0 ended before its first token (cancelled while queued): copies 1..n-1 were never forked.
    if (copies_never_made) {
      for (size_t j = 1; j < a.finished.size(); ++j) {
        if (a.finished[j]) continue;
        a.finished[j] = true;
        --a.open_choices;
        update.choices.push_back(ChoiceUpdate{static_cast<int32_t>(j), {}, {}, {}, true, reason});
      }
    }
    if (a.open_choices == 0) {
      e2e.push_back(Seconds(now - a.arrival));
      successes.push_back(SuccessLabel(a.reason));
    }
  }
  // The request-level fields, then the sinks, then forget finished requests.
  for (auto& [sid, update] : updates) {
    Active& a = *active_.at(sid);
    update.prompt_tokens = static_cast<int32_t>(a.prompt.size());
    update.cached_tokens = a.cached_tokens;
    update.done = a.open_choices == 0;
  }
  {
    std::lock_guard<std::mutex> lock(metrics_mu_);
    metrics_.generation_tokens += generated;
    metrics_.prompt_tokens += prompt_tokens;
    for (double v : ttft) metrics_.time_to_first_token.Observe(v);
    for (double v : itl) metrics_.inter_token_latency.Observe(v);
    for (double v : e2e) metrics_.e2e_request_latency.Observe(v);
    for (double v : queue) metrics_.request_queue_time.Observe(v);
    for (const char* label : successes) ++metrics_.request_success[label];
  }
  UpdateGauges();  // before the sinks: a client that saw its last update sees metrics that include it
  for (auto& [sid, update] : updates) {
    auto it = active_.find(sid);
    const bool done = update.done;
    it->second->sink(std::move(update));
    if (done) {
      by_engine_id_.erase(it->second->engine_id);
      active_.erase(it);
      Finished();
    }
  }
}

void AsyncEngine::UpdateGauges() {
  // The adapters' names, each once and sorted (vLLM's lora_requests_info labels).
  std::set<std::string> running_loras, waiting_loras;
  auto add = [](std::set<std::string>* names, const std::shared_ptr<const LoraAdapter>& a) {
    if (a != nullptr && !a->name.empty()) names->insert(a->name);
  };
  size_t inbox = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    inbox = submitted_.size();
    for (const auto& p : submitted_) add(&waiting_loras, p->request.adapter);
  }
  const Scheduler& s = engine_.scheduler();
  for (const Request* r : s.running()) add(&running_loras, r->adapter);
  for (const Request* r : s.waiting()) add(&waiting_loras, r->adapter);
  const KVCacheManager& kv = engine_.kv_manager();
  std::lock_guard<std::mutex> lock(metrics_mu_);
  metrics_.max_loras = engine_.config().scheduler.max_loras;
  metrics_.running_lora_adapters.assign(running_loras.begin(), running_loras.end());
  metrics_.waiting_lora_adapters.assign(waiting_loras.begin(), waiting_loras.end());
  metrics_.num_requests_running = s.num_running();
  metrics_.num_requests_waiting = s.num_waiting() + static_cast<int32_t>(inbox);
  metrics_.kv_cache_usage = metrics_.num_blocks > 0 ? 1.0 - static_cast<double>(kv.num_free_blocks()) / metrics_.num_blocks : 0;
  metrics_.num_preemptions = s.num_preemptions();
  metrics_.spec_decode_num_drafts = s.spec_stats().num_drafts;
  metrics_.spec_decode_num_draft_tokens = s.spec_stats().num_draft_tokens;
  metrics_.spec_decode_num_accepted_tokens = s.spec_stats().num_accepted_tokens;
  metrics_.prefix_cache_queries = kv.stats().query_tokens;
  metrics_.prefix_cache_hits = kv.stats().hit_tokens;
}

}  // namespace parallm
