// Prometheus rendering: HELP/TYPE lines, gauges, counters and cumulative histograms.
#include "server/prometheus.h"

#include <chrono>
#include <limits>
#include <map>

#include <fmt/format.h>

namespace parallm::server {
namespace {

// A number as Prometheus reads it (Go's ParseFloat): shortest round-trip form, +Inf for infinity.
std::string Num(double v) {
  if (v == std::numeric_limits<double>::infinity()) return "+Inf";
  return fmt::format("{}", v);
}

class Page {
 public:
  explicit Page(const std::string& model) : model_label_("model_name=\"" + EscapeLabelValue(model) + "\"") {}

  void Header(const char* name, const char* type, const char* help) {
    out_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  }
  // `labels`: extra labels already rendered ("finished_reason=\"stop\""), or empty.
  void Sample(const std::string& name, const std::string& labels, double value) {
    out_ += fmt::format("{}{{{}{}{}}} {}\n", name, labels, labels.empty() ? "" : ",", model_label_, Num(value));
  }
  void Gauge(const char* name, const char* help, double value) {
    Header(name, "gauge", help);
    Sample(name, "", value);
  }
  void Counter(const char* name, const char* help, double value) {
    Header(name, "counter", help);
    Sample(name, "", value);
  }
  void Hist(const char* name, const char* help, const Histogram& h) {
    Header(name, "histogram", help);
    const std::vector<int64_t> counts = h.CumulativeCounts();
    for (size_t i = 0; i < h.bounds().size(); ++i)
      Sample(std::string(name) + "_bucket", "le=\"" + Num(h.bounds()[i]) + "\"", static_cast<double>(counts[i]));
    Sample(std::string(name) + "_bucket", "le=\"+Inf\"", static_cast<double>(h.count()));
    Sample(std::string(name) + "_sum", "", h.sum());
    Sample(std::string(name) + "_count", "", static_cast<double>(h.count()));
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string model_label_;
  std::string out_;
};

}  // namespace

std::string EscapeLabelValue(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string RenderPrometheus(const EngineMetrics& m, const std::string& model_name) {
  Page page(model_name);
  page.Gauge("vllm:num_requests_running", "Number of requests in model execution batches.", m.num_requests_running);
  page.Gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", m.num_requests_waiting);
  page.Gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", m.kv_cache_usage);
  page.Header("vllm:cache_config_info", "gauge", "Information of the LLMEngine CacheConfig.");
  page.Sample("vllm:cache_config_info",
              fmt::format("block_size=\"{}\",num_gpu_blocks=\"{}\"", m.block_size, m.num_blocks), 1);
  // vLLM's LoRA gauge, which the Gateway API Inference Extension's endpoint picker reads to send a request where its
  // adapter is already in use: the adapters a step may mix, and the names the running and the waiting requests use,
  // comma-separated; the value is when the figures were taken, as vLLM's.
  auto names = [](const std::vector<std::string>& v) {
    std::string out;
    for (const std::string& n : v) out += (out.empty() ? "" : ",") + EscapeLabelValue(n);
    return out;
  };
  page.Header("vllm:lora_requests_info", "gauge", "Running stats on lora requests.");
  page.Sample("vllm:lora_requests_info",
              fmt::format("max_lora=\"{}\",running_lora_adapters=\"{}\",waiting_lora_adapters=\"{}\"", m.max_loras,
                          names(m.running_lora_adapters), names(m.waiting_lora_adapters)),
              std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
  page.Counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.", static_cast<double>(m.prompt_tokens));
  page.Counter("vllm:generation_tokens_total", "Number of generation tokens processed.",
               static_cast<double>(m.generation_tokens));
  page.Counter("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.",
               static_cast<double>(m.prefix_cache_queries));
  page.Counter("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.",
               static_cast<double>(m.prefix_cache_hits));
  page.Counter("vllm:num_preemptions_total", "Cumulative number of preemptions from the engine.",
               static_cast<double>(m.num_preemptions));
  page.Counter("vllm:spec_decode_num_drafts_total", "Number of spec decoding drafts.",
               static_cast<double>(m.spec_decode_num_drafts));
  page.Counter("vllm:spec_decode_num_draft_tokens_total", "Number of draft tokens.",
               static_cast<double>(m.spec_decode_num_draft_tokens));
  page.Counter("vllm:spec_decode_num_accepted_tokens_total", "Number of accepted tokens.",
               static_cast<double>(m.spec_decode_num_accepted_tokens));
  std::map<std::string, int64_t> success{{"stop", 0}, {"length", 0}, {"abort", 0}};
  for (const auto& [reason, count] : m.request_success) success[reason == "cancelled" ? "abort" : reason] += count;
  page.Header("vllm:request_success_total", "counter", "Count of successfully processed requests.");
  for (const auto& [reason, count] : success)
    page.Sample("vllm:request_success_total", "finished_reason=\"" + EscapeLabelValue(reason) + "\"",
                static_cast<double>(count));
  page.Hist("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", m.time_to_first_token);
  page.Hist("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", m.inter_token_latency);
  page.Hist("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", m.e2e_request_latency);
  page.Hist("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.",
            m.request_queue_time);
  return page.Take();
}

}  // namespace parallm::server
