// AsyncEngine: requests submitted from several threads get the outputs LLM::Generate gives for the same
// prompts and seeds (tokens, text, stop strings, n copies); cancellation frees blocks at once; the queue limit
// refuses; Drain finishes or cancels; the metrics add up to what the sinks saw.
#include "engine/async_engine.h"

#include <future>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "engine/llm.h"
#include "formats/llama2c.h"
#include "test_models.h"

namespace parallm {
namespace {

EngineConfig AsyncConfig(int max_seqs = 16) {
  EngineConfig c;
  c.num_kv_blocks = 256;
  c.block_size = 16;
  c.threads = 2;
  c.scheduler.max_num_seqs = max_seqs;
  c.scheduler.max_num_batched_tokens = 128;
  return c;
}

// What the sinks of one request saw, put together.
struct Collected {
  std::map<int32_t, std::vector<int32_t>> tokens;
  std::map<int32_t, std::string> text;
  std::map<int32_t, FinishReason> reason;
  int32_t prompt_tokens = 0, cached_tokens = 0, updates = 0;
  std::string error;
  bool done = false;
  int32_t updates_after_done = 0;
};

class Collector {
 public:
  RequestSink SinkFor(int key) {
    return [this, key](RequestUpdate u) {
      std::lock_guard<std::mutex> lock(mu_);
      Collected& c = got_[key];
      if (c.done) ++c.updates_after_done;
      ++c.updates;
      for (ChoiceUpdate& ch : u.choices) {
        auto& t = c.tokens[ch.index];
        t.insert(t.end(), ch.new_tokens.begin(), ch.new_tokens.end());
        c.text[ch.index] += ch.new_text;
        if (ch.finished) c.reason[ch.index] = ch.finish_reason;
      }
      c.prompt_tokens = u.prompt_tokens;
      c.cached_tokens = u.cached_tokens;
      c.error = u.error;
      if (u.done) {
        c.done = true;
        ++num_done_;
        cv_.notify_all();
      }
    };
  }
  void WaitFor(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    ASSERT_TRUE(cv_.wait_for(lock, std::chrono::seconds(120), [&] { return num_done_ >= n; })) << num_done_ << " of " << n;
  }
  std::map<int, Collected> got() {
    std::lock_guard<std::mutex> lock(mu_);
    return got_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<int, Collected> got_;
  int num_done_ = 0;
};

std::shared_ptr<const Tokenizer> Stories260KTokenizer() {
  auto tok = ReadLlama2cTokenizer(testing::FixturePath("models/stories260K/tok512.bin"));
  EXPECT_TRUE(tok.ok());
  return std::make_shared<Tokenizer>(Tokenizer::FromLlama2c(*tok));
}

std::unique_ptr<Model> Stories260K() {
  auto model = Model::Load(testing::FixturePath("models/stories260K/stories260K.bin"));
  EXPECT_TRUE(model.ok());
  return model.ok() ? std::move(*model) : nullptr;
}

TEST(AsyncEngine, ManyThreadsGetWhatTheLibraryGives) {
  auto tokenizer = Stories260KTokenizer();
  std::vector<std::string> starts = {"Once upon a time", "The cat", "Lily and Ben", "One day", "The sun was"};
  std::vector<std::vector<int32_t>> prompts;
  std::vector<SamplingParams> params;
  for (int i = 0; i < 24; ++i) {
    // A shared opening longer than a block, so the prefix cache has something to find.
    prompts.push_back(tokenizer->Encode("Once upon a time, in a small town, there lived a kind old man. " +
                                            starts[static_cast<size_t>(i) % starts.size()],
                                        true, false));
    SamplingParams p;
    p.max_tokens = 10 + i;
    if (i % 3 != 0) {
      p.temperature = 0.8f;
      p.seed = 100 + static_cast<uint64_t>(i);
      p.has_seed = true;
    }
    if (i % 4 == 1) p.stop = {"Lily", "."};
    if (i % 5 == 2) p.n = 3;
    params.push_back(p);
  }
  LLM reference(Stories260K(), AsyncConfig());
  reference.SetTokenizer(tokenizer);
  auto want = reference.Generate(prompts, params);
  ASSERT_TRUE(want.ok()) << want.status().message();

  AsyncEngine engine(Stories260K(), AsyncConfig(), tokenizer);
  Collector collector;
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&, t] {
      for (size_t i = static_cast<size_t>(t); i < prompts.size(); i += 4) {
        GenerationRequest r{prompts[i], params[i]};
        ASSERT_TRUE(engine.Validate(r).ok());
        Submission s = engine.Submit(std::move(r), collector.SinkFor(static_cast<int>(i)));
        ASSERT_EQ(s.admission, Admission::kAccepted);
      }
    });
  }
  for (auto& c : clients) c.join();
  collector.WaitFor(static_cast<int>(prompts.size()));
  auto got = collector.got();
  int64_t tokens = 0, prompt_tokens = 0;
  std::map<std::string, int64_t> reasons;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const Collected& c = got.at(static_cast<int>(i));
    ASSERT_TRUE(c.done);
    EXPECT_EQ(c.updates_after_done, 0);
    EXPECT_EQ(c.prompt_tokens, static_cast<int32_t>(prompts[i].size()));
    ASSERT_EQ(c.tokens.size(), static_cast<size_t>(params[i].n)) << i;
    for (int k = 0; k < params[i].n; ++k) {
      const Choice& w = (*want)[i].choices[static_cast<size_t>(k)];
      EXPECT_EQ(c.tokens.at(k), w.ids) << "request " << i << " choice " << k;
      EXPECT_EQ(c.text.at(k), w.text) << "request " << i << " choice " << k;
      EXPECT_EQ(c.reason.at(k), w.finish_reason) << "request " << i << " choice " << k;
      tokens += static_cast<int64_t>(w.ids.size());
    }
    prompt_tokens += static_cast<int64_t>(prompts[i].size());
    ++reasons[FinishReasonName((*want)[i].choices[0].finish_reason)];
  }
  const EngineMetrics m = engine.Metrics();  // updated before the last sink was called
  EXPECT_EQ(m.generation_tokens, tokens);
  EXPECT_EQ(m.prompt_tokens, prompt_tokens);
  EXPECT_EQ(m.request_success, reasons);
  EXPECT_EQ(m.e2e_request_latency.count(), static_cast<int64_t>(prompts.size()));
  EXPECT_EQ(m.time_to_first_token.count(), static_cast<int64_t>(prompts.size()));
  EXPECT_EQ(m.request_queue_time.count(), static_cast<int64_t>(prompts.size()));
  EXPECT_GT(m.inter_token_latency.count(), 0);
  EXPECT_EQ(m.num_requests_running, 0);
  EXPECT_EQ(m.num_requests_waiting, 0);
  EXPECT_EQ(m.kv_cache_usage, 0.0);
  EXPECT_GT(m.prefix_cache_hits, 0);  // the same starts repeat
  EXPECT_EQ(m.e2e_request_latency.CumulativeCounts().back(), m.e2e_request_latency.count());
}

TEST(AsyncEngine, CancelFreesBlocksAtOnceAndEndsTheSink) {
  AsyncEngine engine(Stories260K(), AsyncConfig(), Stories260KTokenizer());
  Collector collector;
  std::promise<void> started;
  bool signalled = false;
  SamplingParams p;
  p.max_tokens = 100000;  // would run for long; a small context ends it at 512 otherwise
  p.ignore_eos = true;
  p.n = 2;
  RequestSink inner = collector.SinkFor(0);
  Submission s = engine.Submit({{1, 400, 401}, p}, [&](RequestUpdate u) {
    if (!signalled) {
      signalled = true;
      started.set_value();
    }
    inner(std::move(u));
  });
  ASSERT_EQ(s.admission, Admission::kAccepted);
  started.get_future().wait();
  engine.Cancel(s.id);
  engine.Cancel(s.id);      // twice: ignored
  engine.Cancel(987654);    // unknown: ignored
  collector.WaitFor(1);
  const Collected c = collector.got().at(0);
  EXPECT_EQ(c.reason.at(0), FinishReason::kCancelled);
  EXPECT_EQ(c.reason.at(1), FinishReason::kCancelled);
  EXPECT_EQ(c.updates_after_done, 0);
  EXPECT_LT(c.tokens.at(0).size(), 400u);
  const EngineMetrics m = engine.Metrics();
  EXPECT_EQ(m.kv_cache_usage, 0.0);
  EXPECT_EQ(m.request_success.at("abort"), 1);
}

TEST(AsyncEngine, CancelWhileQueuedEndsEveryCopy) {
  AsyncEngine engine(Stories260K(), AsyncConfig(/*max_seqs=*/1), Stories260KTokenizer());
  Collector collector;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  SamplingParams blocker;
  blocker.max_tokens = 3;
  RequestSink first = collector.SinkFor(0);
  // The first request's sink holds the engine thread until the others are queued (a test-only misuse).
  ASSERT_EQ(engine.Submit({{1, 400}, blocker}, [&](RequestUpdate u) { released.wait(); first(std::move(u)); }).admission,
            Admission::kAccepted);
  SamplingParams p;
  p.max_tokens = 5;
  p.n = 3;
  Submission queued = engine.Submit({{1, 401}, p}, collector.SinkFor(1));
  engine.Cancel(queued.id);
  release.set_value();
  collector.WaitFor(2);
  const Collected c = collector.got().at(1);
  ASSERT_EQ(c.reason.size(), 3u);
  for (const auto& [k, reason] : c.reason) EXPECT_EQ(reason, FinishReason::kCancelled) << k;
}

TEST(AsyncEngine, FullQueueRefusesAndDrainFinishes) {
  AsyncEngineConfig async;
  async.max_queued_requests = 1;
  AsyncEngine engine(Stories260K(), AsyncConfig(/*max_seqs=*/1), Stories260KTokenizer(), async);
  Collector collector;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  SamplingParams p;
  p.max_tokens = 4;
  RequestSink first = collector.SinkFor(0);
  ASSERT_EQ(engine.Submit({{1, 400}, p}, [&](RequestUpdate u) { released.wait(); first(std::move(u)); }).admission,
            Admission::kAccepted);
  EXPECT_EQ(engine.Submit({{1, 401}, p}, collector.SinkFor(1)).admission, Admission::kAccepted);
  EXPECT_EQ(engine.Submit({{1, 402}, p}, collector.SinkFor(2)).admission, Admission::kQueueFull);
  release.set_value();
  EXPECT_EQ(engine.Drain(60), 0);  // both finish within the grace period
  EXPECT_EQ(engine.Submit({{1, 403}, p}, collector.SinkFor(3)).admission, Admission::kShuttingDown);
  auto got = collector.got();
  EXPECT_TRUE(got.at(0).done);
  EXPECT_TRUE(got.at(1).done);
  EXPECT_EQ(got.at(1).reason.at(0), FinishReason::kLength);
}

TEST(AsyncEngine, DrainCancelsWhatOutlivesTheGracePeriod) {
  AsyncEngine engine(Stories260K(), AsyncConfig(), Stories260KTokenizer());
  Collector collector;
  SamplingParams p;
  p.max_tokens = 100000;
  p.ignore_eos = true;
  for (int i = 0; i < 3; ++i) ASSERT_EQ(engine.Submit({{1, 400 + i}, p}, collector.SinkFor(i)).admission, Admission::kAccepted);
  EXPECT_EQ(engine.Drain(0.05), 3);
  auto got = collector.got();
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(got.at(i).done);
    EXPECT_EQ(got.at(i).reason.at(0), FinishReason::kCancelled);
  }
}

TEST(AsyncEngine, ValidateNamesTheProblem) {
  AsyncEngine with_text(Stories260K(), AsyncConfig(), Stories260KTokenizer());
  SamplingParams p;
  EXPECT_NE(with_text.Validate({{}, p}).message().find("empty"), std::string::npos);
  EXPECT_NE(with_text.Validate({std::vector<int32_t>(600, 1), p}).message().find("context"), std::string::npos);
  p.top_p = 2;
  EXPECT_NE(with_text.Validate({{1, 2}, p}).message().find("top_p"), std::string::npos);
  AsyncEngine no_text(Stories260K(), AsyncConfig(), nullptr);
  SamplingParams stop;
  stop.stop = {"x"};
  EXPECT_NE(no_text.Validate({{1, 2}, stop}).message().find("tokenizer"), std::string::npos);
  EXPECT_TRUE(with_text.Validate({{1, 2}, stop}).ok());
}

TEST(AsyncEngine, DestroyingWithWorkLeftCancelsIt) {
  Collector collector;
  {
    AsyncEngine engine(Stories260K(), AsyncConfig(), Stories260KTokenizer());
    SamplingParams p;
    p.max_tokens = 100000;
    p.ignore_eos = true;
    for (int i = 0; i < 4; ++i) engine.Submit({{1, 400 + i}, p}, collector.SinkFor(i));
  }
  auto got = collector.got();
  ASSERT_EQ(got.size(), 4u);
  for (const auto& [i, c] : got) EXPECT_TRUE(c.done) << i;
}

}  // namespace
}  // namespace parallm
