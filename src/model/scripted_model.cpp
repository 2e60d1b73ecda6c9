// Scripted models: the random model's tensors, rewritten into a next-token table (zero layers, one-hot embeddings).
#include "model/scripted_model.h"

#include <map>

#include "model/synthetic.h"

namespace parallm {

Status GenerateScriptedWeights(const ModelConfig& c, const std::vector<ScriptedStep>& steps, const TensorSink& sink) {
  if (c.tied_embeddings) return Err("a scripted model needs an LM head of its own (untied embeddings)");
  std::map<int32_t, int32_t> next;     // token -> successor
  std::map<int32_t, int64_t> channel;  // token -> the hidden channel its embedding is the unit vector of
  for (const ScriptedStep& s : steps) {
    if (s.token < 0 || s.token >= c.vocab || s.next < 0 || s.next >= c.vocab)
      return Err("scripted step {} -> {} is outside the vocabulary ({})", s.token, s.next, c.vocab);
    auto [it, inserted] = next.emplace(s.token, s.next);
    if (!inserted && it->second != s.next)
      return Err("token {} is followed by both {} and {}: a scripted model's next token depends on the last one only",
                 s.token, it->second, s.next);
    if (inserted) channel.emplace(s.token, static_cast<int64_t>(channel.size()));
  }
  if (static_cast<int64_t>(channel.size()) > c.hidden)
    return Err("{} scripted tokens need a hidden size of at least {} (it is {})", channel.size(), channel.size(),
               c.hidden);
  const int64_t H = c.hidden;
  // The random model's names and shapes, with scripted values: embeddings and LM head from the table, norms 1
  // (RMSNorm then scales a unit vector to sqrt(H)), RoPE tables kept, every other tensor 0.
  return GenerateRandomWeights(c, 0, [&](const std::string& name, std::vector<int64_t> shape,
                                         std::vector<float> values) {
    if (name == "token_embd.weight" || name == "output.weight") {
      std::fill(values.begin(), values.end(), 0.0f);
      for (const auto& [token, successor] : next) {
        const int64_t row = name == "output.weight" ? successor : token;
        values[static_cast<size_t>(row * H + channel.at(token))] = 1.0f;
      }
    } else if (name.find("norm") != std::string::npos) {
      std::fill(values.begin(), values.end(), 1.0f);
    } else if (name.find("rope") == std::string::npos) {
      std::fill(values.begin(), values.end(), 0.0f);
    }
    return sink(name, std::move(shape), std::move(values));
  });
}

}  // namespace parallm
