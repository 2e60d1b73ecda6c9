// LLM: Generate() queues every prompt, steps the engine until all finish, and collects completions.
#include "engine/llm.h"

#include <unordered_map>

namespace parallm {

Result<std::unique_ptr<LLM>> LLM::Load(const std::string& path, const EngineConfig& config) {
  PARALLM_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::Load(path));
  return std::make_unique<LLM>(std::move(model), config);
}

LLM::LLM(std::unique_ptr<Model> model, const EngineConfig& config) : model_(std::move(model)), engine_(*model_, config) {}

Result<std::vector<Completion>> LLM::Generate(const std::vector<std::vector<int32_t>>& prompts,
                                              const std::vector<SamplingParams>& params,
                                              const std::function<void(const StreamEvent&)>& on_event) {
  if (params.size() != 1 && params.size() != prompts.size())
    return Err("{} sampling parameter sets for {} prompts (give one, or one per prompt)", params.size(), prompts.size());
  // Validate everything first so a bad prompt does not leave others half-run.
  for (size_t i = 0; i < prompts.size(); ++i) {
    const SamplingParams& p = params.size() == 1 ? params[0] : params[i];
    if (prompts[i].empty()) return Err("prompt {} is empty", i);
    if (Status st = p.Validate(model_->config().vocab); !st.ok()) return st.WithContext(fmt::format("prompt {}", i));
  }
  std::unordered_map<RequestId, size_t> index;
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto id = engine_.Add(prompts[i], params.size() == 1 ? params[0] : params[i]);
    if (!id.ok()) {
      for (const auto& [queued, _] : index) engine_.Cancel(queued);
      while (engine_.HasUnfinished()) engine_.Step();
      return id.status().WithContext(fmt::format("prompt {}", i));
    }
    index[*id] = i;
  }
  std::vector<Completion> completions(prompts.size());
  while (engine_.HasUnfinished()) {
    for (RequestOutput& out : engine_.Step()) {
      const size_t i = index.at(out.id);
      Completion& c = completions[i];
      c.ids.insert(c.ids.end(), out.new_tokens.begin(), out.new_tokens.end());
      c.samples.insert(c.samples.end(), out.new_samples.begin(), out.new_samples.end());
      if (out.finished) {
        const Request& r = *out.request;
        c.finish_reason = r.finish_reason;
        c.prompt_tokens = r.num_prompt_tokens;
        c.cached_tokens = r.num_cached_tokens;
        c.preemptions = r.num_preemptions;
        auto secs = [&](Request::Clock::time_point t) { return std::chrono::duration<double>(t - r.arrival).count(); };
        c.ttft_seconds = r.first_token ? secs(*r.first_token) : 0;
        c.total_seconds = r.finished ? secs(*r.finished) : 0;
      }
      if (on_event) on_event(StreamEvent{i, out.new_tokens, out.finished, out.finished ? &c : nullptr});
    }
  }
  return completions;
}

}  // namespace parallm
