// Sampler: logit processing, then greedy or a seeded draw from the truncated distribution.
#include "engine/sampler.h"

#include <algorithm>
#include <cmath>

namespace parallm {

Status SamplingParams::Validate(int32_t vocab_size) const {
  if (max_tokens < 0) return Err("max_tokens must be >= 0, got {}", max_tokens);
  if (!(temperature >= 0.0f) || !std::isfinite(temperature)) return Err("temperature must be >= 0, got {}", temperature);
  if (top_k < 0) return Err("top_k must be >= 0, got {}", top_k);
  if (!(top_p > 0.0f && top_p <= 1.0f)) return Err("top_p must be in (0, 1], got {}", top_p);
  if (!(min_p >= 0.0f && min_p <= 1.0f)) return Err("min_p must be in [0, 1], got {}", min_p);
  if (!(repetition_penalty > 0.0f) || !std::isfinite(repetition_penalty))
    return Err("repetition_penalty must be > 0, got {}", repetition_penalty);
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f))
    return Err("frequency_penalty must be in [-2, 2], got {}", frequency_penalty);
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f))
    return Err("presence_penalty must be in [-2, 2], got {}", presence_penalty);
  if (logprobs > 20) return Err("logprobs must be at most 20, got {}", logprobs);
  if (n < 1 || n > 128) return Err("n must be between 1 and 128, got {}", n);
  for (const auto& [token, bias] : logit_bias) {
    if (token < 0 || token >= vocab_size) return Err("logit_bias token {} is outside the vocabulary", token);
    if (!(bias >= -100.0f && bias <= 100.0f)) return Err("logit_bias values must be in [-100, 100], got {}", bias);
  }
  if (stop.size() > 16) return Err("stop takes at most 16 strings, got {}", stop.size());
  for (const std::string& s : stop)
    if (s.size() > 1024) return Err("stop strings are at most 1024 bytes");
  for (int32_t t : stop_token_ids)
    if (t < 0 || t >= vocab_size) return Err("stop_token_ids entry {} is outside the vocabulary", t);
  return Status::Ok();
}

int32_t ArgMax(std::span<const float> logits) {
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[static_cast<size_t>(best)]) best = static_cast<int32_t>(i);
  return best;
}

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {}

SampleResult Sampler::Sample(std::span<float> logits, std::span<const int32_t> prompt,
                             std::span<const int32_t> output) {
  const SamplingParams& p = params_;
  for (const auto& [token, bias] : p.logit_bias) logits[static_cast<size_t>(token)] += bias;
  if (p.repetition_penalty != 1.0f) {
    // CTRL / HF: positive logits are divided, negative multiplied, once per distinct token seen.
    auto penalize = [&](int32_t t) {
      float& l = logits[static_cast<size_t>(t)];
      l = l > 0 ? l / p.repetition_penalty : l * p.repetition_penalty;
    };
    counts_.clear();
    for (int32_t t : prompt) counts_[t] = 1;
    for (int32_t t : output) counts_[t] = 1;
    for (const auto& [t, c] : counts_) penalize(t);
  }
  if (p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f) {
    counts_.clear();
    for (int32_t t : output) counts_[t]++;
    for (const auto& [t, c] : counts_)
      logits[static_cast<size_t>(t)] -= p.frequency_penalty * static_cast<float>(c) + p.presence_penalty;
  }

  SampleResult result;
  const bool want_logprobs = p.logprobs >= 0;
  if (p.temperature <= 0.0f) {
    result.token = ArgMax(logits);
  } else {
    for (float& l : logits) l /= p.temperature;
  }
  // Log-softmax over the processed logits, for logprobs (greedy: temperature 1).
  float max_logit = *std::max_element(logits.begin(), logits.end());
  double total = 0;
  if (want_logprobs || p.temperature > 0.0f)
    for (float l : logits) total += std::exp(static_cast<double>(l - max_logit));
  const float log_total = static_cast<float>(std::log(total)) + max_logit;

  if (p.temperature > 0.0f) {
    candidates_.clear();
    for (size_t i = 0; i < logits.size(); ++i) candidates_.emplace_back(logits[i], static_cast<int32_t>(i));
    auto by_logit = [](const auto& a, const auto& b) {
      return a.first > b.first || (a.first == b.first && a.second < b.second);
    };
    size_t keep = candidates_.size();
    if (p.top_k > 0 && static_cast<size_t>(p.top_k) < keep) {
      keep = static_cast<size_t>(p.top_k);
      std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(keep), candidates_.end(),
                        by_logit);
    } else {
      std::sort(candidates_.begin(), candidates_.end(), by_logit);
    }
    candidates_.resize(keep);
    double kept_total = 0;
    for (auto& c : candidates_) {
      c.first = std::exp(c.first - max_logit);
      kept_total += c.first;
    }
    if (p.top_p < 1.0f) {
      double cumulative = 0;
      size_t n = 0;
      while (n < candidates_.size()) {
        cumulative += candidates_[n].first / kept_total;
        ++n;
        if (cumulative >= p.top_p) break;
      }
      candidates_.resize(n);
    }
    if (p.min_p > 0.0f) {
      const float floor = candidates_.front().first * p.min_p;
      size_t n = 1;
      while (n < candidates_.size() && candidates_[n].first >= floor) ++n;
      candidates_.resize(n);
    }
    double sum = 0;
    for (const auto& c : candidates_) sum += c.first;
    std::uniform_real_distribution<double> uniform(0.0, sum);
    double r = uniform(rng_);
    result.token = candidates_.back().second;
    for (const auto& c : candidates_) {
      r -= c.first;
      if (r <= 0) {
        result.token = c.second;
        break;
      }
    }
  }
  if (want_logprobs) {
    result.logprob = logits[static_cast<size_t>(result.token)] - log_total;
    if (p.logprobs > 0) {
      std::vector<int32_t> ids(logits.size());
      for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
      const size_t k = std::min(ids.size(), static_cast<size_t>(p.logprobs));
      std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k), ids.end(), [&](int32_t a, int32_t b) {
        return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)] ||
               (logits[static_cast<size_t>(a)] == logits[static_cast<size_t>(b)] && a < b);
      });
      for (size_t i = 0; i < k; ++i)
        result.top.push_back({ids[i], logits[static_cast<size_t>(ids[i])] - log_total});
    }
  }
  return result;
}

}  // namespace parallm
