// `parallm bench serve`: an online load client for any OpenAI-compatible server, measured at the client as
// `vllm bench serve` measures: requests arrive as a Poisson process (or all at once), stream their answers,
// and each gets its TTFT, inter-token gaps (ITL), TPOT and end-to-end latency; the run gets throughputs.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <boost/json.hpp>

#include "bench/http_client.h"
#include "bench/serve_dataset.h"
#include "bench/stats.h"
#include "tokenizer/tokenizer.h"

namespace parallm::bench {

struct ServeOptions {
  BaseUrl url;
  std::string endpoint = "/v1/completions";  // or /v1/chat/completions
  std::string model;                         // sent as "model"
  double request_rate = std::numeric_limits<double>::infinity();  // requests per second; inf: all at once
  int32_t max_concurrency = 0;  // requests in flight at most; 0: no limit
  bool ignore_eos = true;
  uint64_t seed = 0;             // the Poisson arrivals
  double timeout_s = 600;        // longest silence from the server before a request fails
  const Tokenizer* tokenizer = nullptr;  // counts output tokens when the server sends no usage
  bool chat() const { return endpoint.find("chat") != std::string::npos; }
};

// What happened to one request. Times in seconds.
struct RequestResult {
  bool success = false;
  std::string error;
  double start = 0;  // when it was sent, from the start of the run
  double ttft = 0;   // sent -> first chunk with content
  double e2e = 0;    // sent -> end of the stream
  std::vector<double> itl;  // gaps between consecutive content chunks
  int32_t prompt_len = 0;   // the server's usage.prompt_tokens when it sent one, else the dataset's count
  int32_t output_tokens = 0;
  std::string output_source;  // "usage", "tokenizer" or "chunks": how output_tokens was counted
  std::string text;           // the generated text
};

struct ServeReport {
  std::vector<RequestResult> requests;
  double duration = 0;  // seconds from the first send to the last answer
  int32_t peak_in_flight = 0;
  int32_t completed = 0, failed = 0;
  int64_t total_input = 0, total_output = 0;
  Summary ttft, tpot, itl, e2e;  // seconds, over the completed requests
  std::string first_error;
  double request_throughput() const { return duration > 0 ? completed / duration : 0; }
  double output_throughput() const { return duration > 0 ? total_output / duration : 0; }
  double total_token_throughput() const { return duration > 0 ? (total_input + total_output) / duration : 0; }
  // vLLM's field names (mean_ttft_ms, p99_itl_ms, ...) plus per-request lists.
  boost::json::object ToJson() const;
  // "============ Serving Benchmark Result ============" as vLLM prints it.
  void Print() const;
};

// Seconds from the start at which each of `n` requests arrives: 0 for all when the rate is infinite, else
// cumulative exponential gaps of mean 1/rate (a Poisson process), seeded.
std::vector<double> ArrivalTimes(int32_t n, double rate, uint64_t seed);

// The JSON body of one streamed request (completions or chat, as `options.endpoint` says).
std::string RequestBody(const ServeOptions& options, const ServeRequest& request);

// Sends every request and measures it; one thread, all streams as coroutines. Fails only on set-up
// errors (the address does not resolve); failed requests are counted in the report.
Result<ServeReport> RunServeBenchmark(const ServeOptions& options, const std::vector<ServeRequest>& requests);

// Polls until the server is up: GET /v1/models answers 2xx and GET /health (where there is one) is not 503
// (still loading). Fails with the last answer after `timeout_s`.
Status WaitForServer(const BaseUrl& url, double timeout_s);

// The first id of GET /v1/models.
Result<std::string> FirstServedModel(const BaseUrl& url, double timeout_s);

}  // namespace parallm::bench
