// Request helpers.
#include "engine/request.h"

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
      arrival(Clock::now()) {}

}  // namespace parallm
