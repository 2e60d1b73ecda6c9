// EngineMetrics: what the engine counts for monitoring (vLLM's metric set, see docs/API.md): gauges sampled each
// step, counters, and latency histograms. Plain data; the server renders it in Prometheus text format.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace parallm {

// A cumulative-bucket histogram as Prometheus defines it: counts[i] observations <= bounds[i], plus +Inf.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void Observe(double value);
  const std::vector<double>& bounds() const { return bounds_; }
  // Observations <= bounds()[i] (cumulative); the last entry (index bounds().size()) is every observation.
  std::vector<int64_t> CumulativeCounts() const;
  int64_t count() const { return count_; }
  double sum() const { return sum_; }

 private:
  std::vector<double> bounds_;
  std::vector<int64_t> counts_;  // per bucket, not cumulative; one extra for +Inf
  int64_t count_ = 0;
  double sum_ = 0;
};

struct EngineMetrics {
  EngineMetrics();

  // Gauges.
  int32_t num_requests_running = 0;
  int32_t num_requests_waiting = 0;  // queued in the scheduler or not yet handed to it
  double kv_cache_usage = 0;         // fraction of KV blocks in use, 0..1
  int32_t block_size = 0;
  int32_t num_blocks = 0;
  // LoRA: the adapters a step may mix (the scheduler's max_loras), and the names of those the running and the
  // waiting requests use (each once, sorted; adapters loaded by path alone have no name and are not listed).
  int32_t max_loras = 0;
  std::vector<std::string> running_lora_adapters, waiting_lora_adapters;
  // Counters.
  int64_t prompt_tokens = 0;          // prompt tokens of requests that ran their prompt
  int64_t generation_tokens = 0;      // tokens sampled
  int64_t prefix_cache_queries = 0;   // prompt tokens looked up in the prefix cache
  int64_t prefix_cache_hits = 0;      // of those, tokens found cached
  int64_t num_preemptions = 0;
  int64_t spec_decode_num_drafts = 0;           // steps in which a request computed a draft
  int64_t spec_decode_num_draft_tokens = 0;     // draft tokens computed
  int64_t spec_decode_num_accepted_tokens = 0;  // of those, accepted
  std::map<std::string, int64_t> request_success;  // finished requests by finish reason: stop, length, abort
  // Histograms, in seconds.
  Histogram time_to_first_token;      // arrival -> first token
  Histogram inter_token_latency;      // between consecutive tokens of a request
  Histogram e2e_request_latency;      // arrival -> finished
  Histogram request_queue_time;       // arrival -> first scheduled
};

}  // namespace parallm
