// LLM: Generate() queues every prompt, steps the engine until all finish, and collects completions.
#include "engine/llm.h"

#include <map>
#include <unordered_map>

#include "model/synthetic_model.h"
#include "engine/choice_text.h"

namespace parallm {

Result<std::unique_ptr<LLM>> LLM::Load(const std::string& path, EngineConfig config) {
  PARALLM_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, LoadModelSpec(path));
  PARALLM_RETURN_IF_ERROR(LoadDraftModelFor(*model, &config));
  return std::make_unique<LLM>(std::move(model), config);
}

LLM::LLM(std::unique_ptr<Model> model, const EngineConfig& config) : model_(std::move(model)), engine_(*model_, config) {}

Result<std::vector<Completion>> LLM::Generate(const std::vector<std::vector<int32_t>>& prompts,
                                              const std::vector<SamplingParams>& params,
                                              const std::function<void(const StreamEvent&)>& on_event,
                                              const std::vector<std::shared_ptr<const LoraAdapter>>& adapters) {
  if (params.size() != 1 && params.size() != prompts.size())
    return Err("{} sampling parameter sets for {} prompts (give one, or one per prompt)", params.size(), prompts.size());
  if (adapters.size() > 1 && adapters.size() != prompts.size())
    return Err("{} adapters for {} prompts (give none, one, or one per prompt)", adapters.size(), prompts.size());
  // Validate everything first so a bad prompt does not leave others half-run.
  for (size_t i = 0; i < prompts.size(); ++i) {
    const SamplingParams& p = params.size() == 1 ? params[0] : params[i];
    if (prompts[i].empty()) return Err("prompt {} is empty", i);
    if (Status st = p.Validate(model_->config().vocab); !st.ok()) return st.WithContext(fmt::format("prompt {}", i));
  }
  std::unordered_map<RequestId, size_t> index;
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto id = engine_.Add(prompts[i], params.size() == 1 ? params[0] : params[i], 0,
                          adapters.empty() ? nullptr : adapters[adapters.size() == 1 ? 0 : i]);
    if (!id.ok()) {
      for (const auto& [queued, _] : index) engine_.Cancel(queued);
      while (engine_.HasUnfinished()) engine_.Step();
      return id.status().WithContext(fmt::format("prompt {}", i));
    }
    index[*id] = i;
  }
  std::vector<Completion> completions(prompts.size());
  std::vector<int32_t> open_choices(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    const int32_t n = (params.size() == 1 ? params[0] : params[i]).n;
    completions[i].choices.resize(static_cast<size_t>(n));
    completions[i].prompt_tokens = static_cast<int32_t>(prompts[i].size());
    open_choices[i] = n;
  }
  // Text per choice: incremental detokenization and stop strings.
  std::map<std::pair<size_t, int32_t>, std::unique_ptr<ChoiceText>> text;
  const std::string no_text;
  while (engine_.HasUnfinished()) {
    for (RequestOutput& out : engine_.Step()) {
      const size_t i = index.at(out.parent_id != 0 ? out.parent_id : out.id);
      const SamplingParams& p = params.size() == 1 ? params[0] : params[i];
      Completion& c = completions[i];
      Choice& choice = c.choices.at(static_cast<size_t>(out.choice_index));
      choice.ids.insert(choice.ids.end(), out.new_tokens.begin(), out.new_tokens.end());
      choice.samples.insert(choice.samples.end(), out.new_samples.begin(), out.new_samples.end());
      std::string new_text;
      bool stopped = false;
      if (tokenizer_) {
        std::unique_ptr<ChoiceText>& t = text[{i, out.choice_index}];
        if (!t) t = std::make_unique<ChoiceText>(*tokenizer_, prompts[i], p.stop, p.skip_special_tokens);
        ChoiceText::Step step = t->Add(out.new_tokens, out.finished);
        if (step.stopped && !out.finished) engine_.Stop(out.id);  // its final output arrives next step
        new_text = std::move(step.text);
        stopped = t->stopped();
        choice.text += new_text;
      }
      if (out.finished) {
        const Request& r = *out.request;
        choice.finish_reason = r.finish_reason;
        if (stopped) choice.finish_reason = FinishReason::kStop;
        choice.preemptions = r.num_preemptions;
        auto secs = [&](Request::Clock::time_point t) { return std::chrono::duration<double>(t - r.arrival).count(); };
        choice.ttft_seconds = r.first_token ? secs(*r.first_token) : 0;
        choice.total_seconds = r.finished ? secs(*r.finished) : 0;
        if (out.choice_index == 0) c.cached_tokens = r.num_cached_tokens;
        --open_choices[i];
      }
      if (on_event)
        on_event(StreamEvent{i, out.choice_index, out.new_tokens, tokenizer_ ? new_text : no_text, out.finished,
                             open_choices[i] == 0 ? &c : nullptr});
    }
  }
  return completions;
}

}  // namespace parallm
