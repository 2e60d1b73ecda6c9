// Request helpers.
#include "engine/request.h"

#include <algorithm>

namespace parallm {

const char* FinishReasonName(FinishReason r) {
  switch (r) {
    case FinishReason::kLength: return "length";
    case FinishReason::kStop: return "stop";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kNone: return "";
  }
  return "";
}

Request::Request(RequestId id_in, std::vector<int32_t> prompt_in, SamplingParams params_in,
                 std::span<const int32_t> eos)
    : id(id_in),
      tokens(std::move(prompt_in)),
      num_prompt_tokens(static_cast<int32_t>(tokens.size())),
      params(std::move(params_in)),
      sampler([&] {
        SamplingParams p = params;
        // Without a seed each request still gets its own stream, derived from its id: outputs never depend
        // on what else is running.
        if (!p.has_seed) p.seed = 0x9E3779B97F4A7C15ull * (id_in + 1);
        return p;
      }()),
      eos_tokens(eos),
      arrival(Clock::now()) {
  if (params.grammar) matcher = std::make_unique<structured::GrammarMatcher>(params.grammar);
}

bool Request::PicksArgMax() const {
  const SamplingParams& p = params;
  return p.temperature <= 0.0f && matcher == nullptr && p.logit_bias.empty() && p.repetition_penalty == 1.0f &&
         p.frequency_penalty == 0.0f && p.presence_penalty == 0.0f && p.logprobs < 0;
}

SampleResult Request::SampleNext(std::span<float> logits) { return SampleNext(logits, output()); }

SampleResult Request::SampleNext(std::span<float> logits, std::span<const int32_t> output) {
  if (matcher == nullptr) return sampler.Sample(logits, prompt(), output);
  allowed.resize(static_cast<size_t>(matcher->grammar().vocab().mask_words()));
  matcher->FillMask(allowed, params.ignore_eos ? std::span<const int32_t>() : eos_tokens);
  SampleResult result = sampler.Sample(logits, prompt(), output, allowed);
  const bool eos = std::find(eos_tokens.begin(), eos_tokens.end(), result.token) != eos_tokens.end();
  if (!eos) {
    // A refused token happens only when the mask left nothing (a grammar the vocabulary cannot spell).
    const bool accepted = matcher->AcceptToken(result.token);
    grammar_ended = !accepted || matcher->IsTerminated();
  }
  return result;
}

}  // namespace parallm
