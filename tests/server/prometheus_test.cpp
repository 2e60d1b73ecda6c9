// Prometheus rendering of EngineMetrics: vLLM's names, model_name on every sample, cumulative buckets, label
// escaping, and the engine's "cancelled" reported as vLLM's "abort".
#include "server/prometheus.h"

#include <string>

#include <gtest/gtest.h>

namespace parallm::server {
namespace {

bool Has(const std::string& page, const std::string& line) { return page.find(line + "\n") != std::string::npos; }

// With adapters: how many a step may mix, and the names the running and the waiting requests use, comma-separated,
// each label value escaped.
TEST(PrometheusTest, LoraGaugeNamesTheAdaptersInUse) {
  EngineMetrics m;
  m.max_loras = 8;
  m.running_lora_adapters = {"math", "sql"};
  m.waiting_lora_adapters = {"say \"hi\""};
  const std::string page = RenderPrometheus(m, "tiny");
  EXPECT_NE(page.find(R"(vllm:lora_requests_info{max_lora="8",running_lora_adapters="math,sql",)"
                      R"(waiting_lora_adapters="say \"hi\"",model_name="tiny"} )"),
            std::string::npos)
      << page;
}

TEST(PrometheusTest, RendersVllmNames) {
  EngineMetrics m;
  m.num_requests_running = 3;
  m.num_requests_waiting = 1;
  m.kv_cache_usage = 0.25;
  m.block_size = 16;
  m.num_blocks = 512;
  m.prompt_tokens = 100;
  m.generation_tokens = 40;
  m.prefix_cache_queries = 64;
  m.prefix_cache_hits = 32;
  m.request_success["length"] = 2;
  m.request_success["cancelled"] = 1;
  m.time_to_first_token.Observe(0.25);  // on a bucket bound: counted in it (le)
  m.time_to_first_token.Observe(0.5);
  const std::string page = RenderPrometheus(m, "tiny");
  EXPECT_TRUE(Has(page, "# TYPE vllm:num_requests_running gauge"));
  EXPECT_TRUE(Has(page, R"(vllm:num_requests_running{model_name="tiny"} 3)"));
  EXPECT_TRUE(Has(page, R"(vllm:num_requests_waiting{model_name="tiny"} 1)"));
  EXPECT_TRUE(Has(page, R"(vllm:kv_cache_usage_perc{model_name="tiny"} 0.25)"));
  EXPECT_TRUE(Has(page, R"(vllm:cache_config_info{block_size="16",num_gpu_blocks="512",model_name="tiny"} 1)"));
  // The LoRA gauge the inference gateway's endpoint picker reads: no adapters, the value a Unix time.
  EXPECT_TRUE(Has(page, "# TYPE vllm:lora_requests_info gauge"));
  const std::string lora =
      R"(vllm:lora_requests_info{max_lora="0",running_lora_adapters="",waiting_lora_adapters="",model_name="tiny"} )";
  ASSERT_NE(page.find(lora), std::string::npos);
  const double when = std::stod(page.substr(page.find(lora) + lora.size()));
  EXPECT_GT(when, 1.7e9);
  EXPECT_TRUE(Has(page, "# TYPE vllm:prompt_tokens_total counter"));
  EXPECT_TRUE(Has(page, R"(vllm:prompt_tokens_total{model_name="tiny"} 100)"));
  EXPECT_TRUE(Has(page, R"(vllm:generation_tokens_total{model_name="tiny"} 40)"));
  EXPECT_TRUE(Has(page, R"(vllm:prefix_cache_queries_total{model_name="tiny"} 64)"));
  EXPECT_TRUE(Has(page, R"(vllm:prefix_cache_hits_total{model_name="tiny"} 32)"));
  EXPECT_TRUE(Has(page, R"(vllm:num_preemptions_total{model_name="tiny"} 0)"));
  EXPECT_TRUE(Has(page, R"(vllm:request_success_total{finished_reason="abort",model_name="tiny"} 1)"));
  EXPECT_TRUE(Has(page, R"(vllm:request_success_total{finished_reason="length",model_name="tiny"} 2)"));
  EXPECT_TRUE(Has(page, R"(vllm:request_success_total{finished_reason="stop",model_name="tiny"} 0)"));
  EXPECT_TRUE(Has(page, "# TYPE vllm:time_to_first_token_seconds histogram"));
  EXPECT_TRUE(Has(page, R"(vllm:time_to_first_token_seconds_bucket{le="0.001",model_name="tiny"} 0)"));
  EXPECT_TRUE(Has(page, R"(vllm:time_to_first_token_seconds_bucket{le="0.1",model_name="tiny"} 0)"));
  EXPECT_TRUE(Has(page, R"(vllm:time_to_first_token_seconds_bucket{le="0.25",model_name="tiny"} 1)"));
  EXPECT_TRUE(Has(page, R"(vllm:time_to_first_token_seconds_bucket{le="0.5",model_name="tiny"} 2)"));
  EXPECT_TRUE(Has(page, R"(vllm:time_to_first_token_seconds_bucket{le="2560",model_name="tiny"} 2)"));
  EXPECT_TRUE(Has(page, R"(vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="tiny"} 2)"));
  EXPECT_TRUE(Has(page, R"(vllm:time_to_first_token_seconds_count{model_name="tiny"} 2)"));
  EXPECT_TRUE(Has(page, R"(vllm:time_to_first_token_seconds_sum{model_name="tiny"} 0.75)"));
  for (const char* h : {"vllm:inter_token_latency_seconds", "vllm:e2e_request_latency_seconds",
                        "vllm:request_queue_time_seconds"})
    EXPECT_TRUE(Has(page, std::string(h) + R"(_count{model_name="tiny"} 0)")) << h;
  // Every sample line carries the model name.
  size_t start = 0;
  while (start < page.size()) {
    const size_t end = page.find('\n', start);
    const std::string line = page.substr(start, end - start);
    if (!line.empty() && line[0] != '#') {
      EXPECT_NE(line.find("model_name=\"tiny\""), std::string::npos) << line;
    }
    start = end + 1;
  }
}

TEST(PrometheusTest, EscapesLabels) {
  EXPECT_EQ(EscapeLabelValue("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  EXPECT_TRUE(Has(RenderPrometheus(EngineMetrics(), "m\"x"), R"(vllm:num_requests_running{model_name="m\"x"} 0)"));
}

}  // namespace
}  // namespace parallm::server
