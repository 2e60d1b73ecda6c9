// Scripted models: weights whose greedy output follows a fixed table "after token A comes token B", for end-to-end
// tests that need a model to write something exact (a tool call) through the real engine, sampler and detokenizer.
// Every attention and MLP output is zero, so the last token alone decides the next one: its embedding is a unit
// vector that the LM head maps to its successor's logit. `parallm make-model --script` writes them.
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.h"
#include "model/weights.h"
#include "util/status.h"

namespace parallm {

struct ScriptedStep {
  int32_t token;  // the last token so far
  int32_t next;   // the token greedy decoding picks after it
};

// Emits the tensors of a model of shape `c` (as GenerateRandomWeights names them) whose greedy successor of each
// `steps[i].token` is `steps[i].next`; after any other token every logit is 0 (token 0 wins). Needs untied
// embeddings, at most `c.hidden` distinct scripted tokens, and one successor per token.
Status GenerateScriptedWeights(const ModelConfig& c, const std::vector<ScriptedStep>& steps, const TensorSink& sink);

}  // namespace parallm
