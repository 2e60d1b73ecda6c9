// Engine: the continuous-batching loop, schedule -> execute -> update, plus request admission.
#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "cache/cache_budget.h"
#include "model/mamba_mixer.h"
#include "util/check.h"
#include "util/strings.h"

namespace parallm {

EngineConfig Engine::Resolve(const Model& model, EngineConfig c) {
  if (!c.kv_cache_dtype) c.kv_cache_dtype = model.AutoKvDtype();
  if (c.num_kv_blocks <= 0) {
    // One budget for the KV blocks and a hybrid model's state slots (cache/cache_budget.h).
    const int64_t per_block =
        static_cast<int64_t>(PagedKvStorage::BytesPerBlock(model.KvShape(1, c.block_size, *c.kv_cache_dtype)));
    const int64_t per_slot = model.has_state() ? static_cast<int64_t>(model.StateShape(1).BytesPerSlot()) : 0;
    const double budget = c.kv_cache_gb * (1ull << 30);
    const CacheBudget split = SplitCacheBudget(budget, per_slot, per_block, c.scheduler.max_num_seqs, c.num_state_slots);
    c.num_kv_blocks = std::max(1, split.kv_blocks);
    if (model.has_state()) {
      c.num_state_slots = split.state_slots;
      std::fprintf(stderr, "cache: %s\n",
                   DescribeCacheBudget(split, budget, per_slot, per_block, c.scheduler.max_num_seqs).c_str());
    }
  } else if (model.has_state() && c.num_state_slots <= 0) {
    c.num_state_slots = c.scheduler.max_num_seqs;  // blocks given by count: the slots are not in a budget
  }
  c.scheduler.max_model_len = std::min(c.scheduler.max_model_len, model.config().context_length);
  c.scheduler.bf16_prompts = model.PromptsTakeBf16();
  if (model.has_state()) {
    // A cached prefix holds KV blocks, not the recurrent state after it: a hit would skip tokens the Mamba layers
    // never saw. Checkpointing states at block boundaries would allow it; until then hybrid models run without.
    if (c.enable_prefix_caching)
      std::fprintf(stderr, "prefix caching is off: this hybrid model's recurrent state is not cached with its KV blocks\n");
    c.enable_prefix_caching = false;
    // A rejected draft token would have advanced the state already (it cannot be rolled back like KV slots).
    if (c.scheduler.speculative.enabled())
      std::fprintf(stderr, "speculative decoding is off: a hybrid model's recurrent state cannot drop rejected drafts\n");
    c.scheduler.speculative = SpeculativeConfig{};
    c.draft_model = nullptr;
    // Prefill steps hold whole SSD chunks (model/mamba_mixer.h): a budget below one could never start a long prompt.
    c.scheduler.ssd_chunk = SsdChunk(model.config());
    if (c.scheduler.max_num_batched_tokens < c.scheduler.ssd_chunk) {
      std::fprintf(stderr, "max_num_batched_tokens raised from %d to %d: this hybrid model's prefill runs in chunks of "
                   "%d\n", c.scheduler.max_num_batched_tokens, c.scheduler.ssd_chunk, c.scheduler.ssd_chunk);
      c.scheduler.max_num_batched_tokens = c.scheduler.ssd_chunk;
    }
  } else {
    c.num_state_slots = 0;
  }
  return c;
}

Engine::Engine(Model& model, const EngineConfig& config)
    : model_(model),
      config_(Resolve(model, config)),
      pool_(config_.threads),
      kv_storage_(model.KvShape(config_.num_kv_blocks, config_.block_size, kv_dtype())),
      state_storage_(model.has_state() ? std::make_unique<SsmStateStorage>(model.StateShape(config_.num_state_slots))
                                       : nullptr),
      kv_manager_(config_.num_kv_blocks, config_.block_size, config_.enable_prefix_caching,
                  model.config().UniformSlidingWindow(), config_.num_state_slots),
      scheduler_(config_.scheduler, &kv_manager_),
      runner_(model, kv_storage_, kv_manager_, &pool_, state_storage_.get()) {
  eos_tokens_ = model.loaded().eos_ids;
  if (config_.scheduler.speculative.uses_draft_model()) {
    PARALLM_CHECK_MSG(config_.draft_model != nullptr, "a draft-model speculative config needs its model loaded "
                      "(LoadDraftModelFor) before the engine starts");
    const Status ok = CheckDraftModel(*config_.draft_model, model);
    PARALLM_CHECK_MSG(ok.ok(), ok.message().c_str());
    drafter_ = std::make_unique<DraftModel>(config_.draft_model, config_.num_kv_blocks, config_.block_size,
                                            kv_dtype(), config_.scheduler.max_num_batched_tokens, &pool_);
  }
}

Status LoadDraftModelFor(const Model& target, EngineConfig* config) {
  if (!config->scheduler.speculative.uses_draft_model() || config->draft_model != nullptr) return Status::Ok();
  PARALLM_ASSIGN_OR_RETURN(config->draft_model, LoadDraftModel(config->scheduler.speculative, target));
  return Status::Ok();
}

void Engine::ProposeWithDraftModel() {
  std::vector<std::pair<Request*, int32_t>> candidates = scheduler_.DraftCandidates();
  if (candidates.empty()) return;
  std::vector<DraftModel::Task> tasks;
  tasks.reserve(candidates.size());
  for (auto& [r, room] : candidates) tasks.push_back({r->id, r->tokens, room, &r->model_draft});
  drafter_->Propose(tasks);
}

Status Engine::Validate(std::span<const int32_t> prompt, const SamplingParams& params) const {
  const int32_t vocab = model_.config().vocab;
  if (prompt.empty()) return Err("the prompt is empty");
  for (int32_t t : prompt)
    if (t < 0 || t >= vocab) return Err("prompt token {} is outside the vocabulary of {}", t, vocab);
  PARALLM_RETURN_IF_ERROR(params.Validate(vocab));
  if (model_.has_state() && config_.num_state_slots < 1)
    return Err("the cache cannot hold one request's recurrent state ({}) beside a KV block: raise --kv-cache-gb",
               HumanBytes(static_cast<double>(model_.StateShape(1).BytesPerSlot())));
  const int32_t max_len = config_.scheduler.max_model_len;
  if (static_cast<int32_t>(prompt.size()) >= max_len)
    return Err("the prompt has {} tokens; this model's context is {} (prompt + output)", prompt.size(), max_len);
  // A request must fit in the cache on its own, or it could never run. Behind a sliding window on every layer it
  // holds at most the window plus one step's tokens (blocks behind the window are released as it advances).
  const int64_t bs = config_.block_size;
  int64_t needed = (static_cast<int64_t>(prompt.size()) + params.max_tokens + bs - 1) / bs;
  if (const int64_t window = model_.config().UniformSlidingWindow(); window > 0)
    needed = std::min(needed, (window + config_.scheduler.max_num_batched_tokens + bs - 1) / bs + 1);
  if (std::min<int64_t>(needed, (max_len + config_.block_size - 1) / config_.block_size) > config_.num_kv_blocks)
    return Err("the request needs up to {} KV blocks but the cache has {}; raise --kv-cache-gb or lower max_tokens",
               needed, config_.num_kv_blocks);
  return Status::Ok();
}

Result<RequestId> Engine::Add(std::vector<int32_t> prompt, const SamplingParams& params, int32_t priority,
                              std::shared_ptr<const LoraAdapter> adapter) {
  PARALLM_RETURN_IF_ERROR(Validate(prompt, params));
  if (adapter != nullptr && model_.has_state())
    return Err("LoRA adapter {}: adapters are not supported for hybrid (Mamba) models yet", adapter->path);
  if (adapter != nullptr && static_cast<int>(adapter->layers.size()) != model_.config().n_layers)
    return Err("LoRA adapter {} was loaded for a model with {} layers, not this one", adapter->path,
               adapter->layers.size());
  const RequestId id = next_id_++;
  auto request = std::make_unique<Request>(id, std::move(prompt), params, eos_tokens_);
  request->priority = priority;
  request->adapter = std::move(adapter);
  scheduler_.Add(std::move(request));
  return id;
}

void Engine::Cancel(RequestId id) { scheduler_.Cancel(id); }

void Engine::ForkCopies(const ScheduledRequest& s, std::span<const float> logits, std::vector<RequestOutput>* outputs) {
  const Request& parent = *s.request;
  std::vector<float> row(logits.size());
  for (int32_t k = 1; k < parent.params.n; ++k) {
    SamplingParams params = parent.params;
    params.n = 1;
    if (params.has_seed) params.seed = parent.params.seed + static_cast<uint64_t>(k);
    auto child = std::make_unique<Request>(next_id_++, std::vector<int32_t>(parent.prompt().begin(), parent.prompt().end()),
                                           params, eos_tokens_);
    child->parent_id = parent.id;
    child->choice_index = k;
    child->priority = parent.priority;
    child->adapter = parent.adapter;
    std::copy(logits.begin(), logits.end(), row.begin());
    const SampleResult first = child->SampleNext(row);
    // Share the prompt's KV blocks when the copy can run now; the partly filled last block is copied.
    // A hybrid model's copy also starts from the parent's recurrent state after the prompt.
    std::vector<std::pair<int32_t, int32_t>> copies;
    std::pair<int32_t, int32_t> state_copy{-1, -1};
    const bool shares = scheduler_.HasRoomToRun() &&
                        kv_manager_.Fork(parent.id, child->id, s.num_computed_tokens + s.num_new_tokens, &copies,
                                         &state_copy);
    for (const auto& [src, dst] : copies) kv_storage_.CopyBlock(src, dst);
    if (shares && state_storage_ != nullptr) state_storage_->CopySlot(state_copy.first, state_copy.second);
    RequestOutput out{child->id, parent.id, k, {first.token}, {}, false, nullptr};
    if (params.logprobs >= 0) out.new_samples.push_back(first);
    const Request* copy = child.get();  // alive until the next Update hands it out, if it finishes at once
    scheduler_.AddForked(std::move(child), first, shares);
    if (copy->num_output_tokens() == 0) {
      out.new_tokens.clear();  // its first token was a stop token: not part of the output (a grammar's last is)
      out.new_samples.clear();
    }
    outputs->push_back(std::move(out));
  }
}

std::vector<SampleResult> Engine::SampleWithDraft(Request& r, std::span<float> rows, int32_t num_draft) {
  const size_t vocab = static_cast<size_t>(model_.config().vocab);
  if (num_draft == 0) return {r.SampleNext(rows)};
  // Speculative decoding with a draft of single tokens (a point mass per position): rejection sampling accepts
  // draft token d with probability p(d) and otherwise draws from p without d. Drawing t ~ p and accepting d iff
  // t == d is that same procedure, and it draws exactly as decoding without a draft would: the output, greedy or
  // seeded, is the same with speculation on or off.
  std::vector<SampleResult> results;
  std::vector<int32_t> output(r.output().begin(), r.output().end());
  for (int32_t j = 0; j <= num_draft; ++j) {
    // With a grammar each draw advances its matcher: every token drawn here is emitted (accepted ones and the
    // last), so the matcher stays where the output is.
    results.push_back(r.SampleNext(rows.subspan(static_cast<size_t>(j) * vocab, vocab), output));
    if (j == num_draft || results.back().token != r.draft_tokens[static_cast<size_t>(j)]) break;
    output.push_back(results.back().token);
  }
  return results;
}

std::vector<SampleResult> Engine::ArgMaxWithDraft(const Request& r, std::span<const int32_t> picks, int32_t num_draft) {
  // SampleWithDraft where every SampleNext is its row's argmax (Request::PicksArgMax).
  std::vector<SampleResult> results;
  for (int32_t j = 0; j <= num_draft; ++j) {
    results.push_back(SampleResult{picks[static_cast<size_t>(j)], 0.0f, {}});
    if (j == num_draft || results.back().token != r.draft_tokens[static_cast<size_t>(j)]) break;
  }
  return results;
}

std::vector<RequestOutput> Engine::Step() {
  if (drafter_ != nullptr) ProposeWithDraftModel();
  const auto step_start = std::chrono::steady_clock::now();
  const SchedulerOutput out = scheduler_.Schedule();
  // Prompts that go on as a block seen before did start from a copy of that block's computed slots.
  kv_manager_.RunPendingCopies([&](int32_t src, int32_t dst) { kv_storage_.CopyBlock(src, dst); });
  const bool decode_only =
      !out.empty() && std::all_of(out.scheduled.begin(), out.scheduled.end(), [](const ScheduledRequest& s) {
        return s.num_computed_tokens >= s.request->num_prompt_tokens;
      });
  std::vector<std::vector<SampleResult>> sampled;
  std::vector<RequestOutput> outputs;
  struct Gain {
    const Request* request;
    int32_t tokens_before;  // its token count before Update
    size_t output;          // its entry in `outputs`
  };
  std::vector<Gain> gains;  // one per sampling request
  if (!out.empty()) {
    const size_t vocab = static_cast<size_t>(model_.config().vocab);
    std::vector<const ScheduledRequest*> sampling;
    std::vector<size_t> first_row;  // each sampling request's first logits row: one, plus one per draft token
    for (size_t row = 0; const ScheduledRequest& s : out.scheduled)
      if (s.samples) {
        sampling.push_back(&s);
        first_row.push_back(row);
        row += 1 + static_cast<size_t>(s.num_draft_tokens);
      }
    // A request about to fork its n - 1 copies needs its row as the model gave it: samplers work in place.
    auto forks = [](const Request& r) { return r.params.n > 1 && r.parent_id == 0 && r.num_output_tokens() == 0; };
    std::vector<std::vector<float>> fork_rows(sampling.size());
    sampled.resize(sampling.size());
    if (std::all_of(sampling.begin(), sampling.end(), [&](const ScheduledRequest* s) {
          return s->request->PicksArgMax() && !forks(*s->request);
        })) {
      // Every pick is the argmax of a raw row: the model hands those over, and the logits are never stored.
      const std::vector<int32_t>& picks = runner_.ExecuteArgMax(out);
      for (size_t i = 0; i < sampling.size(); ++i)
        sampled[i] = ArgMaxWithDraft(*sampling[i]->request, std::span<const int32_t>(picks).subspan(first_row[i]),
                                     sampling[i]->num_draft_tokens);
    } else {
      std::vector<float>& logits = runner_.Execute(out);
      for (size_t i = 0; i < sampling.size(); ++i)
        if (forks(*sampling[i]->request))
          fork_rows[i].assign(logits.begin() + static_cast<std::ptrdiff_t>(first_row[i] * vocab),
                              logits.begin() + static_cast<std::ptrdiff_t>((first_row[i] + 1) * vocab));
      // Each request samples from its own rows with its own RNG: in parallel, and the same on any thread.
      pool_.ParallelFor(static_cast<int64_t>(sampling.size()), [&](int64_t i, int) {
        const ScheduledRequest& s = *sampling[static_cast<size_t>(i)];
        std::span<float> rows(logits.data() + first_row[static_cast<size_t>(i)] * vocab,
                              (1 + static_cast<size_t>(s.num_draft_tokens)) * vocab);
        sampled[static_cast<size_t>(i)] = SampleWithDraft(*s.request, rows, s.num_draft_tokens);
      });
    }
    for (size_t i = 0; i < sampling.size(); ++i) {
      const Request& r = *sampling[i]->request;
      RequestOutput o{r.id, r.parent_id, r.choice_index, {}, {}, false, nullptr};
      for (const SampleResult& result : sampled[i]) o.new_tokens.push_back(result.token);
      if (r.params.logprobs >= 0) o.new_samples = sampled[i];
      gains.push_back({&r, r.num_tokens(), outputs.size()});
      outputs.push_back(std::move(o));
      if (!fork_rows[i].empty()) ForkCopies(*sampling[i], fork_rows[i], &outputs);
    }
  }
  std::vector<std::unique_ptr<Request>> finished = scheduler_.Update(out, sampled);
  if (decode_only) {
    ++decode_steps_.steps;
    decode_steps_.tokens += out.num_tokens;
    decode_steps_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - step_start).count();
  }
  if (drafter_ != nullptr) {  // the draft's cache holds running requests only
    for (RequestId id : out.preempted) drafter_->Free(id);
    for (const auto& r : finished) drafter_->Free(r->id);
  }
  // The output is what the requests gained: a stop token is not part of it (OpenAI and vLLM leave it out), nor
  // are tokens sampled after it in the same step. Requests that finished are still alive in `finished`.
  for (const Gain& g : gains) {
    RequestOutput& o = outputs[g.output];
    const size_t gained = static_cast<size_t>(std::max(0, g.request->num_tokens() - g.tokens_before));
    o.new_tokens.resize(std::min(o.new_tokens.size(), gained));
    o.new_samples.resize(std::min(o.new_samples.size(), gained));
  }
  for (auto& r : finished) {
    auto it = std::find_if(outputs.begin(), outputs.end(), [&](const RequestOutput& o) { return o.id == r->id; });
    if (it == outputs.end()) {
      outputs.push_back(RequestOutput{r->id, r->parent_id, r->choice_index, {}, {}, true, nullptr});
      it = outputs.end() - 1;
    }
    it->finished = true;
    it->request = std::move(r);
  }
  return outputs;
}

}  // namespace parallm
