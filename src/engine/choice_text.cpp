// ChoiceText: the detokenizer feeds the stop-string matcher; what both let through is final.
#include "engine/choice_text.h"

namespace parallm {

ChoiceText::ChoiceText(const Tokenizer& tokenizer, std::span<const int32_t> prompt,
                       const std::vector<std::string>& stop, bool skip_special)
    : detok_(tokenizer, prompt, skip_special) {
  if (!stop.empty()) stops_ = std::make_unique<StopStringMatcher>(stop);
}

ChoiceText::Step ChoiceText::Add(std::span<const int32_t> tokens, bool finished) {
  Step step;
  if (stopped()) return step;
  std::string chunk;
  for (int32_t id : tokens) chunk += detok_.Add(id);
  if (finished) chunk += detok_.Flush();
  if (stops_ == nullptr) {
    step.text = std::move(chunk);
  } else {
    StopStringMatcher::Step s = stops_->Feed(chunk);
    step.text = std::move(s.text);
    step.stopped = s.stopped;
    if (finished && !s.stopped) step.text += stops_->Flush();
  }
  text_ += step.text;
  return step;
}

}  // namespace parallm
