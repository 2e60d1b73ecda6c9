// Scheduler: one step's plan (running first, then waiting), preemption by recompute, and the bookkeeping
// after the step (computed tokens, cached blocks, stop conditions).
#include "engine/scheduler.h"

#include <algorithm>

#include "util/check.h"

namespace parallm {

Scheduler::Scheduler(const SchedulerConfig& config, KVCacheManager* kv) : config_(config), kv_(kv) {
  PARALLM_CHECK(config.max_num_seqs > 0 && config.max_num_batched_tokens > 0);
  PARALLM_CHECK_MSG(config.ssd_chunk >= 0 && config.max_num_batched_tokens >= config.ssd_chunk,
                    "a step's token budget must hold a whole SSD chunk of the hybrid model");
}

void Scheduler::CacheFullBlocks(const Request& r, std::span<const int32_t> tokens) {
  kv_->CacheFullBlocks(r.id, tokens, r.num_computed_tokens, r.adapter_salt(), Int8From(r));
}

int32_t Scheduler::WholeSsdChunksEnd(const Request& r) const {
  return config_.ssd_chunk == 0 ? 0 : r.num_prompt_tokens / config_.ssd_chunk * config_.ssd_chunk;
}

int32_t Scheduler::SsdAlign(const Request& r, int32_t start, int32_t num_new) const {
  const int32_t q = config_.ssd_chunk, whole_end = WholeSsdChunksEnd(r);
  if (start >= whole_end) return num_new;
  PARALLM_CHECK_MSG(start % q == 0, "a hybrid model's prefill resumes inside an SSD chunk");
  const int32_t end = start + num_new;
  return end >= whole_end ? num_new : end / q * q - start;
}

void Scheduler::Add(std::unique_ptr<Request> request) {
  Request* r = request.get();
  PARALLM_CHECK(!requests_.contains(r->id));
  requests_[r->id] = std::move(request);
  if (r->params.max_tokens == 0) {  // nothing to generate: done before any compute
    Finish(r, FinishReason::kLength);
    return;
  }
  // Keep (priority, arrival) order; arrivals come in order, so scan from the back.
  auto it = waiting_.end();
  while (it != waiting_.begin() && (*(it - 1))->priority > r->priority) --it;
  waiting_.insert(it, r);
}

void Scheduler::Abort(RequestId id, FinishReason reason, bool with_copies) {
  std::vector<Request*> doomed;
  for (const auto& [rid, r] : requests_)
    if (rid == id || (with_copies && r->parent_id == id)) doomed.push_back(r.get());
  for (Request* r : doomed) Finish(r, reason);
}

void Scheduler::AddForked(std::unique_ptr<Request> child, const SampleResult& first, bool shares_kv) {
  Request* r = child.get();
  PARALLM_CHECK(!requests_.contains(r->id) && r->parent_id != 0);
  requests_[r->id] = std::move(child);
  if (shares_kv) {
    PARALLM_CHECK(HasRoomToRun());
    r->num_computed_tokens = r->num_tokens();
    r->status = RequestStatus::kRunning;
    running_.push_back(r);
  } else {
    waiting_.push_front(r);  // part of a request that is already running: ahead of new arrivals
  }
  AppendToken(r, first);
}

void Scheduler::Preempt(Request* r) {
  // Recompute: drop the KV blocks; the request's tokens (prompt + output so far) are recomputed when it
  // runs again, mostly from the prefix cache if its blocks are still there.
  kv_->Free(r->id);
  r->num_computed_tokens = 0;
  r->draft_tokens.clear();
  r->model_draft.clear();
  r->status = RequestStatus::kPreempted;
  r->num_preemptions++;
  num_preemptions_++;
  waiting_.push_front(r);
}

void Scheduler::Finish(Request* r, FinishReason reason) {
  kv_->Free(r->id);
  r->status = RequestStatus::kFinished;
  r->finish_reason = reason;
  r->finished = Request::Clock::now();
  std::erase(running_, r);
  std::erase(waiting_, r);
  auto it = requests_.find(r->id);
  finished_.push_back(std::move(it->second));
  requests_.erase(it);
}

SchedulerOutput Scheduler::Schedule() {
  SchedulerOutput out;
  int32_t budget = config_.max_num_batched_tokens;
  const bool drafting = Drafting();

  // Running requests first: decodes, and prompts whose prefill continues in chunks.
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Request* r = running_[i];
    const int32_t num_new =
        SsdAlign(*r, r->num_computed_tokens, std::min(r->num_tokens() - r->num_computed_tokens, budget));
    if (num_new == 0) {  // a hybrid model's prefill waits for a budget that holds its next whole SSD chunk
      ++i;
      continue;
    }
    r->draft_tokens.clear();
    if (drafting && r->num_tokens() - r->num_computed_tokens == 1) r->draft_tokens = ProposeDraft(*r, budget - 1);
    r->model_draft.clear();
    bool self_preempted = false;
    while (!kv_->AllocateSlots(r->id, r->num_computed_tokens, num_new + static_cast<int32_t>(r->draft_tokens.size()))) {
      if (!r->draft_tokens.empty()) {  // a draft never preempts anyone: the step goes without it
        r->draft_tokens.clear();
        continue;
      }
      // Out of blocks: preempt the request that started last (it has done the least work).
      Request* victim = running_.back();
      running_.pop_back();
      Preempt(victim);
      out.preempted.push_back(victim->id);
      if (victim == r) {
        self_preempted = true;
        break;
      }
    }
    if (self_preempted) break;
    const int32_t num_draft = static_cast<int32_t>(r->draft_tokens.size());
    out.scheduled.push_back({r, r->num_computed_tokens, num_new + num_draft,
                             r->num_computed_tokens + num_new == r->num_tokens(), num_draft});
    budget -= num_new + num_draft;
    ++i;
  }

  // Then waiting requests, while there is budget, room and memory; none after a preemption this step. A request
  // whose adapter would pass max_loras distinct adapters among the running ones is skipped (it keeps its place).
  std::vector<const LoraAdapter*> adapters;
  if (config_.max_loras > 0)
    for (const Request* r : running_)
      if (r->adapter && std::find(adapters.begin(), adapters.end(), r->adapter.get()) == adapters.end())
        adapters.push_back(r->adapter.get());
  size_t next = 0;
  while (out.preempted.empty() && next < waiting_.size() && budget > 0 &&
         static_cast<int32_t>(running_.size()) < config_.max_num_seqs) {
    Request* r = waiting_[next];
    const bool new_adapter =
        r->adapter && std::find(adapters.begin(), adapters.end(), r->adapter.get()) == adapters.end();
    if (config_.max_loras > 0 && new_adapter && static_cast<int32_t>(adapters.size()) >= config_.max_loras) {
      ++next;
      continue;
    }
    ComputedBlocks cached = kv_->GetComputedBlocks(r->tokens, r->adapter_salt(), Int8From(*r));
    const int32_t start = cached.num_tokens;
    const int32_t num_new = SsdAlign(*r, start, std::min(r->num_tokens() - start, budget));
    if (num_new == 0) break;  // not even one whole SSD chunk fits this step's budget: next step
    if (!kv_->AllocateSlots(r->id, start, num_new, cached)) break;
    waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(next));
    if (new_adapter) adapters.push_back(r->adapter.get());
    if (r->status == RequestStatus::kWaiting) r->num_cached_tokens = start;
    if (!r->first_scheduled) r->first_scheduled = Request::Clock::now();
    r->num_computed_tokens = start;
    r->status = RequestStatus::kRunning;
    running_.push_back(r);
    out.scheduled.push_back({r, start, num_new, start + num_new == r->num_tokens()});
    budget -= num_new;
  }
  out.num_tokens = config_.max_num_batched_tokens - budget;
  return out;
}

bool Scheduler::Drafting() const {
  const SpeculativeConfig& spec = config_.speculative;
  return spec.enabled() &&
         (spec.disable_by_batch_size == 0 || static_cast<int32_t>(running_.size()) <= spec.disable_by_batch_size);
}

int32_t Scheduler::DraftRoom(const Request& r, int32_t budget) const {
  // Every drafted token may be accepted and one more sampled after them: none may pass max_tokens or the context.
  return std::min({config_.speculative.num_speculative_tokens, budget, r.params.max_tokens - r.num_output_tokens() - 1,
                   config_.max_model_len - r.num_tokens() - 1});
}

std::vector<std::pair<Request*, int32_t>> Scheduler::DraftCandidates() const {
  std::vector<std::pair<Request*, int32_t>> out;
  if (!Drafting()) return out;
  for (Request* r : running_)
    if (r->num_tokens() - r->num_computed_tokens == 1)
      if (const int32_t room = DraftRoom(*r, config_.max_num_batched_tokens - 1); room > 0) out.emplace_back(r, room);
  return out;
}

std::vector<int32_t> Scheduler::ProposeDraft(const Request& r, int32_t budget) const {
  const int32_t room = DraftRoom(r, budget);
  if (config_.speculative.method == SpeculativeConfig::Method::kDraftModel) {
    const size_t n = static_cast<size_t>(std::clamp<int32_t>(room, 0, static_cast<int32_t>(r.model_draft.size())));
    return std::vector<int32_t>(r.model_draft.begin(), r.model_draft.begin() + static_cast<std::ptrdiff_t>(n));
  }
  return ProposeNgramDraft(r.tokens, config_.speculative, room);
}

bool Scheduler::StopsAfter(const Request& r) const {
  const int32_t last = r.tokens.back();
  if (!r.params.ignore_eos && std::find(r.eos_tokens.begin(), r.eos_tokens.end(), last) != r.eos_tokens.end())
    return true;
  return std::find(r.params.stop_token_ids.begin(), r.params.stop_token_ids.end(), last) !=
         r.params.stop_token_ids.end();
}

bool Scheduler::AppendToken(Request* r, const SampleResult& result) {
  if (!r->first_token) r->first_token = Request::Clock::now();
  r->tokens.push_back(result.token);
  if (r->params.logprobs >= 0) r->samples.push_back(result);
  if (StopsAfter(*r)) {
    // The stop token ends the text but is not part of it (OpenAI and vLLM leave it out).
    r->tokens.pop_back();
    if (r->params.logprobs >= 0) r->samples.pop_back();
    Finish(r, FinishReason::kStop);
    return true;
  }
  if (r->grammar_ended) {  // the grammar is complete and allows nothing more: done, its last token kept
    Finish(r, FinishReason::kStop);
    return true;
  }
  if (r->num_output_tokens() >= r->params.max_tokens || r->num_tokens() >= config_.max_model_len) {
    Finish(r, FinishReason::kLength);
    return true;
  }
  return false;
}

std::vector<std::unique_ptr<Request>> Scheduler::Update(const SchedulerOutput& out,
                                                        const std::vector<std::vector<SampleResult>>& sampled) {
  size_t next_sample = 0;
  for (const ScheduledRequest& s : out.scheduled) {
    Request* r = s.request;
    const std::vector<SampleResult>* results = nullptr;
    if (s.samples) {
      PARALLM_CHECK(next_sample < sampled.size());
      results = &sampled[next_sample++];
    }
    if (r->is_finished()) continue;  // cancelled during the step
    if (results == nullptr) {
      r->num_computed_tokens = s.num_computed_tokens + s.num_new_tokens;
      CacheFullBlocks(*r, r->tokens);
      continue;
    }
    // The results are the accepted draft tokens, then the token sampled after them: the K/V of the accepted
    // ones is valid, a rejected draft's is not (its slots are overwritten when the sequence gets there).
    const int32_t accepted = static_cast<int32_t>(results->size()) - 1;
    PARALLM_CHECK(accepted >= 0 && accepted <= s.num_draft_tokens);
    for (int32_t j = 0; j < accepted; ++j) PARALLM_CHECK((*results)[static_cast<size_t>(j)].token == r->draft_tokens[static_cast<size_t>(j)]);
    r->num_computed_tokens = s.num_computed_tokens + s.num_new_tokens - s.num_draft_tokens + accepted;
    r->num_draft_tokens += s.num_draft_tokens;
    r->num_accepted_tokens += accepted;
    if (s.num_draft_tokens > 0) ++spec_stats_.num_drafts;
    spec_stats_.num_draft_tokens += s.num_draft_tokens;
    spec_stats_.num_accepted_tokens += accepted;
    if (accepted == 0) {
      CacheFullBlocks(*r, r->tokens);
    } else {
      std::vector<int32_t> tokens = r->tokens;  // the blocks' tokens include the accepted draft
      tokens.insert(tokens.end(), r->draft_tokens.begin(), r->draft_tokens.begin() + accepted);
      CacheFullBlocks(*r, tokens);
    }
    r->draft_tokens.clear();
    for (const SampleResult& result : *results)
      if (AppendToken(r, result)) break;
  }
  PARALLM_CHECK(next_sample == sampled.size());
  std::vector<std::unique_ptr<Request>> done = std::move(finished_);
  finished_.clear();
  return done;
}

void Scheduler::CheckIntegrity() const {
  kv_->CheckIntegrity();
  PARALLM_CHECK(running_.size() + waiting_.size() == requests_.size());
  for (const Request* r : running_) {
    PARALLM_CHECK(r->status == RequestStatus::kRunning);
    PARALLM_CHECK(requests_.contains(r->id));
    PARALLM_CHECK(std::find(waiting_.begin(), waiting_.end(), r) == waiting_.end());
    const int64_t capacity = static_cast<int64_t>(kv_->BlockTable(r->id).size()) * kv_->block_size();
    PARALLM_CHECK_MSG(capacity >= r->num_computed_tokens, "a running request lacks blocks for its computed tokens");
    PARALLM_CHECK(r->num_computed_tokens <= r->num_tokens());
    PARALLM_CHECK_MSG(r->num_computed_tokens >= WholeSsdChunksEnd(*r) ||
                          r->num_computed_tokens % config_.ssd_chunk == 0,
                      "a hybrid model's prefill stopped inside one of its prompt's whole SSD chunks");
  }
  for (const Request* r : waiting_) {
    PARALLM_CHECK(r->status == RequestStatus::kWaiting || r->status == RequestStatus::kPreempted);
    PARALLM_CHECK(r->num_computed_tokens == 0);
    PARALLM_CHECK_MSG(kv_->BlockTable(r->id).empty(), "a waiting request holds blocks");
  }
  PARALLM_CHECK(static_cast<int32_t>(running_.size()) <= config_.max_num_seqs);
}

}  // namespace parallm
