// The online benchmark's run loop and its figures (see serve_client.h).
#include "bench/serve_client.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "util/progress.h"
#include "util/strings.h"

namespace parallm::bench {

namespace asio = boost::asio;
namespace json = boost::json;
using Clock = std::chrono::steady_clock;

namespace {

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// What one SSE payload of a completions or chat stream says.
struct StreamState {
  bool chat = false;
  std::string error;
  std::string text;
  int32_t content_chunks = 0;
  int32_t usage_prompt = -1, usage_completion = -1;
  Clock::time_point sent, first, last;
  std::vector<double> itl;

  void OnEvent(const std::string& data, Clock::time_point now) {
    if (data == "[DONE]") return;
    boost::system::error_code ec;
    json::value v = json::parse(data, ec);
    if (ec || !v.is_object()) {
      if (error.empty()) error = "unparsable stream chunk: " + data.substr(0, 200);
      return;
    }
    const json::object& o = v.as_object();
    if (const json::value* e = o.if_contains("error")) {
      const json::value* m = e->is_object() ? e->as_object().if_contains("message") : nullptr;
      error = "error in stream: " + (m && m->is_string() ? std::string(m->as_string()) : json::serialize(*e));
      return;
    }
    if (const json::value* u = o.if_contains("usage"); u && u->is_object()) {
      const json::object& usage = u->as_object();
      if (const json::value* c = usage.if_contains("completion_tokens"); c && c->is_int64())
        usage_completion = static_cast<int32_t>(c->as_int64());
      if (const json::value* p = usage.if_contains("prompt_tokens"); p && p->is_int64())
        usage_prompt = static_cast<int32_t>(p->as_int64());
    }
    const json::value* choices = o.if_contains("choices");
    if (!choices || !choices->is_array() || choices->as_array().empty()) return;
    const json::value& choice = choices->as_array()[0];
    if (!choice.is_object()) return;
    const json::value* piece = nullptr;
    if (chat) {
      const json::value* delta = choice.as_object().if_contains("delta");
      if (delta && delta->is_object()) {
        piece = delta->as_object().if_contains("content");
        // Reasoning models stream their thinking separately; it is generated output all the same.
        if (!piece || !piece->is_string() || piece->as_string().empty())
          piece = delta->as_object().if_contains("reasoning_content");
      }
    } else {
      piece = choice.as_object().if_contains("text");
    }
    if (!piece || !piece->is_string() || piece->as_string().empty()) return;
    // A chunk with content: the first sets TTFT, each later one adds its gap to ITL.
    if (content_chunks == 0)
      first = now;
    else
      itl.push_back(Seconds(now - last));
    last = now;
    ++content_chunks;
    text.append(piece->as_string().data(), piece->as_string().size());
  }
};

}  // namespace

std::vector<double> ArrivalTimes(int32_t n, double rate, uint64_t seed) {
  std::vector<double> at(static_cast<size_t>(std::max(n, 0)), 0.0);
  if (!std::isfinite(rate) || rate <= 0) return at;
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> gap(rate);
  // As vLLM: the first request goes at once, each next one after an exponential gap.
  for (size_t i = 1; i < at.size(); ++i) at[i] = at[i - 1] + gap(rng);
  return at;
}

std::string RequestBody(const ServeOptions& options, const ServeRequest& request) {
  json::object body{{"model", options.model}, {"stream", true}, {"temperature", 0.0}};
  body["stream_options"] = json::object{{"include_usage", true}};
  if (options.chat()) {
    body["messages"] = json::array{json::object{{"role", "user"}, {"content", request.prompt}}};
    // vLLM reads max_completion_tokens; llama.cpp's server and older ones read max_tokens.
    body["max_completion_tokens"] = request.output_len;
    body["max_tokens"] = request.output_len;
  } else {
    if (request.prompt.empty() && !request.prompt_ids.empty()) {
      json::array ids;
      for (int32_t id : request.prompt_ids) ids.push_back(id);
      body["prompt"] = std::move(ids);
    } else {
      body["prompt"] = request.prompt;
    }
    body["max_tokens"] = request.output_len;
  }
  // Only when asked: OpenAI's own API rejects parameters it does not know.
  if (options.ignore_eos) body["ignore_eos"] = true;
  return json::serialize(body);
}

Status WaitForServer(const BaseUrl& url, double timeout_s) {
  const Clock::time_point deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  const auto per_try = std::chrono::milliseconds(5000);
  std::string last;
  while (true) {
    HttpOutcome models = BlockingGet(url, "/v1/models", per_try);
    if (models.ok()) {
      HttpOutcome health = BlockingGet(url, "/health", per_try);
      if (health.status != 503 && health.error.empty()) return Status::Ok();
      last = "GET /health: " + health.Describe();
    } else {
      last = "GET /v1/models: " + models.Describe();
    }
    if (Clock::now() >= deadline) return Err("{} not ready after {:g} s; the last answer: {}", url.ToString(), timeout_s, last);
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
}

Result<std::string> FirstServedModel(const BaseUrl& url, double timeout_s) {
  HttpOutcome got = BlockingGet(url, "/v1/models", std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1e3)));
  if (!got.ok()) return Err("GET {}/v1/models: {}", url.ToString(), got.Describe());
  boost::system::error_code ec;
  json::value v = json::parse(got.body, ec);
  const json::value* data = !ec && v.is_object() ? v.as_object().if_contains("data") : nullptr;
  if (!data || !data->is_array() || data->as_array().empty() || !data->as_array()[0].is_object())
    return Err("GET {}/v1/models: no models listed (pass --model)", url.ToString());
  const json::value* id = data->as_array()[0].as_object().if_contains("id");
  if (!id || !id->is_string()) return Err("GET {}/v1/models: the first model has no id (pass --model)", url.ToString());
  return std::string(id->as_string());
}

Result<ServeReport> RunServeBenchmark(const ServeOptions& options, const std::vector<ServeRequest>& requests) {
  // One socket per request in flight: 1,000 at once passes the usual soft limit of 1,024 descriptors.
  struct rlimit files {};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }
  asio::io_context io;
  boost::system::error_code ec;
  asio::ip::tcp::resolver resolver(io);
  const auto endpoints = resolver.resolve(options.url.host, options.url.port, ec);
  if (ec) return Err("cannot resolve {}: {}", options.url.host, ec.message());

  ServeReport report;
  report.requests.resize(requests.size());
  const std::vector<double> arrivals = ArrivalTimes(static_cast<int32_t>(requests.size()), options.request_rate, options.seed);
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(options.timeout_s * 1e3));
  ProgressBar progress("requests", static_cast<double>(requests.size()), "req");
  int32_t in_flight = 0;
  asio::steady_timer slot_freed(io);  // the launcher sleeps on it while max_concurrency requests are in flight
  const Clock::time_point start = Clock::now();
  Clock::time_point last_done = start;

  auto run_one = [&](size_t i) -> asio::awaitable<void> {
    const ServeRequest& req = requests[i];
    RequestResult& r = report.requests[i];
    StreamState state;
    state.chat = options.chat();
    SseParser sse;
    HttpRequest http;
    http.method = "POST";
    http.target = options.url.prefix + options.endpoint;
    http.body = RequestBody(options, req);
    http.idle_timeout = timeout;
    state.sent = Clock::now();
    r.start = Seconds(state.sent - start);
    HttpOutcome out = co_await Fetch(endpoints, options.url, http, [&](std::string_view bytes) {
      const Clock::time_point now = Clock::now();  // one read's events share its arrival time
      for (const std::string& event : sse.Feed(bytes)) state.OnEvent(event, now);
    });
    const Clock::time_point end = Clock::now();
    r.e2e = Seconds(end - state.sent);
    r.prompt_len = state.usage_prompt >= 0 ? state.usage_prompt : req.prompt_len;
    r.text = std::move(state.text);
    if (!out.ok()) {
      r.error = out.Describe();
    } else if (!state.error.empty()) {
      r.error = state.error;
    } else if (state.content_chunks == 0) {
      r.error = "the stream carried no generated text";
    } else {
      r.success = true;
      r.ttft = Seconds(state.first - state.sent);
      r.itl = std::move(state.itl);
      if (state.usage_completion >= 0) {
        r.output_tokens = state.usage_completion;
        r.output_source = "usage";
      } else if (options.tokenizer) {
        r.output_tokens = static_cast<int32_t>(options.tokenizer->Encode(r.text, false, false).size());
        r.output_source = "tokenizer";
      } else {
        r.output_tokens = state.content_chunks;
        r.output_source = "chunks";
      }
    }
    last_done = std::max(last_done, end);
    --in_flight;
    slot_freed.cancel();
    progress.Add(1);
  };

  auto launch = [&]() -> asio::awaitable<void> {
    asio::steady_timer arrival(io);
    for (size_t i = 0; i < requests.size(); ++i) {
      arrival.expires_at(start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(arrivals[i])));
      boost::system::error_code wait_ec;
      co_await arrival.async_wait(asio::redirect_error(asio::use_awaitable, wait_ec));
      while (options.max_concurrency > 0 && in_flight >= options.max_concurrency) {
        slot_freed.expires_at(Clock::time_point::max());
        co_await slot_freed.async_wait(asio::redirect_error(asio::use_awaitable, wait_ec));
      }
      ++in_flight;
      report.peak_in_flight = std::max(report.peak_in_flight, in_flight);
      asio::co_spawn(io, run_one(i), asio::detached);
    }
  };
  asio::co_spawn(io, launch(), asio::detached);
  io.run();
  progress.Finish();

  report.duration = Seconds(last_done - start);
  std::vector<double> ttfts, tpots, itls, e2es;
  for (const RequestResult& r : report.requests) {
    if (!r.success) {
      ++report.failed;
      if (report.first_error.empty()) report.first_error = r.error;
      continue;
    }
    ++report.completed;
    report.total_input += r.prompt_len;
    report.total_output += r.output_tokens;
    ttfts.push_back(r.ttft);
    e2es.push_back(r.e2e);
    if (r.output_tokens > 1) tpots.push_back((r.e2e - r.ttft) / (r.output_tokens - 1));
    itls.insert(itls.end(), r.itl.begin(), r.itl.end());
  }
  report.ttft = Summarize(ttfts);
  report.tpot = Summarize(tpots);
  report.itl = Summarize(itls);
  report.e2e = Summarize(e2es);
  return report;
}

json::object ServeReport::ToJson() const {
  json::object o{{"duration", duration},
                 {"completed", completed},
                 {"failed", failed},
                 {"total_input_tokens", total_input},
                 {"total_output_tokens", total_output},
                 {"request_throughput", request_throughput()},
                 {"output_throughput", output_throughput()},
                 {"total_token_throughput", total_token_throughput()},
                 {"max_concurrent_requests", peak_in_flight}};
  AddMillisecondFields(o, "ttft", ttft);
  AddMillisecondFields(o, "tpot", tpot);
  AddMillisecondFields(o, "itl", itl);
  AddMillisecondFields(o, "e2el", e2e);
  json::array input_lens, output_lens, ttfts, itls, e2els, starts, errors, sources, texts;
  for (const RequestResult& r : requests) {
    input_lens.push_back(r.prompt_len);
    output_lens.push_back(r.output_tokens);
    ttfts.push_back(r.ttft);
    json::array gaps;
    for (double g : r.itl) gaps.push_back(g);
    itls.push_back(std::move(gaps));
    e2els.push_back(r.e2e);
    starts.push_back(r.start);
    errors.push_back(json::string(r.error));
    sources.push_back(json::string(r.output_source));
    texts.push_back(json::string(ToValidUtf8(r.text)));
  }
  // Per request, in dataset order; seconds, as vLLM's lists.
  o["input_lens"] = std::move(input_lens);
  o["output_lens"] = std::move(output_lens);
  o["ttfts"] = std::move(ttfts);
  o["itls"] = std::move(itls);
  o["e2els"] = std::move(e2els);
  o["start_times"] = std::move(starts);
  o["errors"] = std::move(errors);
  o["output_token_sources"] = std::move(sources);
  o["generated_texts"] = std::move(texts);
  return o;
}

void ServeReport::Print() const {
  auto line = [](const char* label, const std::string& value) { std::printf("%-40s %s\n", label, value.c_str()); };
  auto num = [](double v, int digits) { return fmt::format("{:.{}f}", v, digits); };
  auto section = [](const char* title) { std::printf("%s\n", fmt::format("{:-^50}", title).c_str()); };
  std::printf("%s\n", fmt::format("{:=^50}", " Serving Benchmark Result ").c_str());
  line("Successful requests:", std::to_string(completed));
  line("Failed requests:", std::to_string(failed));
  line("Benchmark duration (s):", num(duration, 2));
  line("Total input tokens:", std::to_string(total_input));
  line("Total generated tokens:", std::to_string(total_output));
  line("Request throughput (req/s):", num(request_throughput(), 2));
  line("Output token throughput (tok/s):", num(output_throughput(), 2));
  line("Total Token throughput (tok/s):", num(total_token_throughput(), 2));
  line("Peak concurrent requests:", std::to_string(peak_in_flight));
  auto metric = [&](const char* title, const char* name, const Summary& s) {
    section(title);
    line(fmt::format("Mean {} (ms):", name).c_str(), num(s.mean * 1e3, 2));
    line(fmt::format("Median {} (ms):", name).c_str(), num(s.median * 1e3, 2));
    line(fmt::format("P99 {} (ms):", name).c_str(), num(s.p99 * 1e3, 2));
  };
  metric("Time to First Token", "TTFT", ttft);
  metric("Time per Output Token (excl. 1st token)", "TPOT", tpot);
  metric("Inter-token Latency", "ITL", itl);
  metric("End-to-end Latency", "E2EL", e2e);
  std::printf("%s\n", std::string(50, '=').c_str());
  if (failed > 0) std::printf("%d of %d requests failed; the first: %s\n", failed, completed + failed, first_error.c_str());
  std::fflush(stdout);
}

}  // namespace parallm::bench
