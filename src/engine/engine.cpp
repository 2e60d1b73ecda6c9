// Engine: the continuous-batching loop, schedule -> execute -> update, plus request admission.
#include "engine/engine.h"

#include <algorithm>

#include "util/check.h"

namespace parallm {

EngineConfig Engine::Resolve(const Model& model, EngineConfig c) {
  if (c.num_kv_blocks <= 0) {
    const double per_block = static_cast<double>(PagedKvStorage::BytesPerBlock(model.KvShape(1, c.block_size)));
    c.num_kv_blocks = std::max(1, static_cast<int32_t>(c.kv_cache_gb * (1ull << 30) / per_block));
  }
  c.scheduler.max_model_len = std::min(c.scheduler.max_model_len, model.config().context_length);
  return c;
}

Engine::Engine(Model& model, const EngineConfig& config)
    : model_(model),
      config_(Resolve(model, config)),
      pool_(config_.threads),
      kv_storage_(model.KvShape(config_.num_kv_blocks, config_.block_size)),
      kv_manager_(config_.num_kv_blocks, config_.block_size, config_.enable_prefix_caching),
      scheduler_(config_.scheduler, &kv_manager_),
      runner_(model, kv_storage_, kv_manager_, &pool_) {
  if (model.loaded().vocab) eos_token_ = model.loaded().vocab->eos;
}

Result<RequestId> Engine::Add(std::vector<int32_t> prompt, const SamplingParams& params, int32_t priority) {
  const int32_t vocab = model_.config().vocab;
  if (prompt.empty()) return Err("the prompt is empty");
  for (int32_t t : prompt)
    if (t < 0 || t >= vocab) return Err("prompt token {} is outside the vocabulary of {}", t, vocab);
  PARALLM_RETURN_IF_ERROR(params.Validate(vocab));
  const int32_t max_len = config_.scheduler.max_model_len;
  if (static_cast<int32_t>(prompt.size()) >= max_len)
    return Err("the prompt has {} tokens; this model's context is {} (prompt + output)", prompt.size(), max_len);
  // A request must fit in the cache on its own, or it could never run.
  const int64_t needed = (static_cast<int64_t>(prompt.size()) + params.max_tokens + config_.block_size - 1) / config_.block_size;
  if (std::min<int64_t>(needed, (max_len + config_.block_size - 1) / config_.block_size) > config_.num_kv_blocks)
    return Err("the request needs up to {} KV blocks but the cache has {}; raise --kv-cache-gb or lower max_tokens",
               needed, config_.num_kv_blocks);
  const RequestId id = next_id_++;
  auto request = std::make_unique<Request>(id, std::move(prompt), params, eos_token_);
  request->priority = priority;
  scheduler_.Add(std::move(request));
  return id;
}

void Engine::Cancel(RequestId id) { scheduler_.Cancel(id); }

std::vector<RequestOutput> Engine::Step() {
  const SchedulerOutput out = scheduler_.Schedule();
  std::vector<SampleResult> sampled;
  if (!out.empty()) {
    const std::vector<float>& logits = runner_.Execute(out);
    const size_t vocab = static_cast<size_t>(model_.config().vocab);
    std::vector<float> row(vocab);
    size_t i = 0;
    for (const ScheduledRequest& s : out.scheduled) {
      if (!s.samples) continue;
      Request& r = *s.request;
      std::copy_n(logits.begin() + static_cast<std::ptrdiff_t>(i * vocab), vocab, row.begin());
      sampled.push_back(r.sampler.Sample(row, r.prompt(), r.output()));
      ++i;
    }
  }
  // Which requests gain a token this step, before Update moves finished ones out.
  std::vector<RequestOutput> outputs;
  for (const ScheduledRequest& s : out.scheduled)
    if (s.samples) outputs.push_back(RequestOutput{s.request->id, {}, {}, false, nullptr});
  size_t k = 0;
  for (const ScheduledRequest& s : out.scheduled) {
    if (!s.samples) continue;
    outputs[k].new_tokens.push_back(sampled[k].token);
    if (s.request->params.logprobs >= 0) outputs[k].new_samples.push_back(sampled[k]);
    ++k;
  }
  std::vector<std::unique_ptr<Request>> finished = scheduler_.Update(out, sampled);
  for (auto& r : finished) {
    auto it = std::find_if(outputs.begin(), outputs.end(), [&](const RequestOutput& o) { return o.id == r->id; });
    if (it == outputs.end()) {
      outputs.push_back(RequestOutput{r->id, {}, {}, true, nullptr});
      it = outputs.end() - 1;
    } else if (r->finish_reason == FinishReason::kStop) {
      it->new_tokens.clear();  // the stop token is not part of the output
      it->new_samples.clear();
    }
    it->finished = true;
    it->request = std::move(r);
  }
  return outputs;
}

}  // namespace parallm
