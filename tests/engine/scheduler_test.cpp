// Scheduler decisions on a tiny cache with made-up sampled tokens (no model): token budget, decode before
// new prefill, the sequence limit, chunked prefill, preemption order and cancellation, with CheckIntegrity
// after every step.
#include <gtest/gtest.h>

#include "engine/scheduler.h"
#include "model/lora.h"

namespace parallm {
namespace {

std::unique_ptr<Request> MakeRequest(RequestId id, int prompt_len, int max_tokens) {
  std::vector<int32_t> prompt;
  for (int i = 0; i < prompt_len; ++i) prompt.push_back(static_cast<int32_t>(100 * id + i));
  SamplingParams p;
  p.max_tokens = max_tokens;
  return std::make_unique<Request>(id, std::move(prompt), p, /*eos_tokens=*/std::span<const int32_t>());
}

// Samples token 7 for every request that samples.
SchedulerConfig Limits(int32_t max_num_seqs, int32_t max_num_batched_tokens) {
  SchedulerConfig c;
  c.max_num_seqs = max_num_seqs;
  c.max_num_batched_tokens = max_num_batched_tokens;
  return c;
}

std::vector<std::vector<SampleResult>> FakeSamples(const SchedulerOutput& out) {
  std::vector<std::vector<SampleResult>> s;
  for (const auto& r : out.scheduled)
    if (r.samples) s.push_back({SampleResult{7, 0, {}}});
  return s;
}

struct Step {
  std::vector<std::pair<RequestId, int32_t>> scheduled;  // (id, num_new_tokens)
  std::vector<RequestId> preempted;
};

Step Summarize(const SchedulerOutput& out) {
  Step s;
  for (const auto& r : out.scheduled) s.scheduled.emplace_back(r.request->id, r.num_new_tokens);
  s.preempted = out.preempted;
  return s;
}

TEST(Scheduler, ChunkedPrefillWithinTheBudgetThenDecodeFirst) {
  KVCacheManager kv(64, 4, /*enable_prefix_caching=*/false);
  Scheduler sched(Limits(4, 8), &kv);
  sched.Add(MakeRequest(1, 10, 3));
  sched.Add(MakeRequest(2, 5, 3));
  // Step 1: request 1's first 8 prompt tokens (the budget), request 2 waits.
  auto out = sched.Schedule();
  EXPECT_EQ(Summarize(out).scheduled, (std::vector<std::pair<RequestId, int32_t>>{{1, 8}}));
  EXPECT_FALSE(out.scheduled[0].samples);
  sched.Update(out, FakeSamples(out));
  sched.CheckIntegrity();
  // Step 2: request 1 finishes its prompt (2 tokens, samples), request 2 takes the remaining 6 of the budget
  // but only needs 5.
  out = sched.Schedule();
  EXPECT_EQ(Summarize(out).scheduled, (std::vector<std::pair<RequestId, int32_t>>{{1, 2}, {2, 5}}));
  EXPECT_TRUE(out.scheduled[0].samples);
  EXPECT_TRUE(out.scheduled[1].samples);
  sched.Update(out, FakeSamples(out));
  sched.CheckIntegrity();
  // Steps 3-4: both decode one token each; after 3 outputs both finish with "length".
  for (int step = 0; step < 2; ++step) {
    out = sched.Schedule();
    EXPECT_EQ(Summarize(out).scheduled, (std::vector<std::pair<RequestId, int32_t>>{{1, 1}, {2, 1}}));
    auto done = sched.Update(out, FakeSamples(out));
    sched.CheckIntegrity();
    if (step == 1) {
      ASSERT_EQ(done.size(), 2u);
      EXPECT_EQ(done[0]->finish_reason, FinishReason::kLength);
      EXPECT_EQ(done[0]->num_output_tokens(), 3);
    }
  }
  EXPECT_EQ(sched.num_unfinished(), 0);
  EXPECT_EQ(kv.num_free_blocks(), 64);
}

// A hybrid model's SSD chunks (4 tokens here): a prefill step that ends inside the prompt's whole chunks ends on a
// chunk boundary, so every whole chunk is computed in one step (model/mamba_mixer.h); a request whose next whole
// chunk does not fit the rest of the budget waits for the next step.
TEST(Scheduler, HybridPrefillStepsEndOnSsdChunkBoundaries) {
  KVCacheManager kv(64, 4, /*enable_prefix_caching=*/false);
  SchedulerConfig c = Limits(4, 10);
  c.ssd_chunk = 4;
  Scheduler sched(c, &kv);
  sched.Add(MakeRequest(1, 19, 2));  // whole chunks end at 16
  sched.Add(MakeRequest(2, 6, 2));   // whole chunks end at 4
  auto step = [&](std::vector<std::pair<RequestId, int32_t>> want) {
    auto out = sched.Schedule();
    EXPECT_EQ(Summarize(out).scheduled, want);
    sched.Update(out, FakeSamples(out));
    sched.CheckIntegrity();
  };
  step({{1, 8}});           // 10 would end at 10, inside chunk [8, 12); request 2's 2 tokens would split [0, 4)
  step({{1, 10}});          // [8, 18): past the whole chunks, the tail runs token by token
  step({{1, 1}, {2, 6}});   // the prompt's last token (samples); request 2 whole (its tail [4, 6) included)
  step({{1, 1}, {2, 1}});   // decodes
  EXPECT_EQ(sched.num_unfinished(), 0);
}

TEST(Scheduler, MaxNumSeqsLimitsRunningRequests) {
  KVCacheManager kv(64, 4, false);
  Scheduler sched(Limits(2, 100), &kv);
  for (RequestId id = 1; id <= 3; ++id) sched.Add(MakeRequest(id, 3, 1));
  auto out = sched.Schedule();
  EXPECT_EQ(Summarize(out).scheduled, (std::vector<std::pair<RequestId, int32_t>>{{1, 3}, {2, 3}}));
  EXPECT_EQ(sched.num_waiting(), 1);
  auto done = sched.Update(out, FakeSamples(out));
  EXPECT_EQ(done.size(), 2u);  // max_tokens 1
  out = sched.Schedule();
  EXPECT_EQ(Summarize(out).scheduled, (std::vector<std::pair<RequestId, int32_t>>{{3, 3}}));
  sched.Update(out, FakeSamples(out));
  sched.CheckIntegrity();
}

TEST(Scheduler, PreemptsTheLatestRequestWhenBlocksRunOut) {
  // 4 blocks of 4 tokens: two requests of 7 prompt tokens take 2 blocks each; the 9th token of request 1
  // needs a third block, so request 2 (started last) is preempted and recomputed later.
  KVCacheManager kv(4, 4, false);
  Scheduler sched(Limits(4, 64), &kv);
  sched.Add(MakeRequest(1, 7, 4));
  sched.Add(MakeRequest(2, 7, 4));
  auto out = sched.Schedule();  // both prefill: 2 blocks each, the pool is full
  EXPECT_EQ(Summarize(out).scheduled, (std::vector<std::pair<RequestId, int32_t>>{{1, 7}, {2, 7}}));
  sched.Update(out, FakeSamples(out));  // 8 tokens each now
  out = sched.Schedule();               // token 8 of each fits in their second block
  sched.Update(out, FakeSamples(out));  // 9 tokens each
  out = sched.Schedule();               // token 9 needs a third block: preempt request 2
  Step s = Summarize(out);
  EXPECT_EQ(s.preempted, std::vector<RequestId>{2});
  EXPECT_EQ(s.scheduled, (std::vector<std::pair<RequestId, int32_t>>{{1, 1}}));
  sched.Update(out, FakeSamples(out));
  sched.CheckIntegrity();
  EXPECT_EQ(sched.num_waiting(), 1);
  // Request 1 finishes; request 2 comes back and recomputes its 9 tokens (prompt + outputs so far).
  while (sched.num_running() > 0 && sched.running()[0]->id == 1) {
    out = sched.Schedule();
    sched.Update(out, FakeSamples(out));
    sched.CheckIntegrity();
  }
  out = sched.Schedule();
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(Summarize(out).scheduled, (std::vector<std::pair<RequestId, int32_t>>{{2, 9}}));
  EXPECT_EQ(sched.num_preemptions(), 1);
}

TEST(Scheduler, CancelFreesBlocksAtOnce) {
  KVCacheManager kv(16, 4, false);
  Scheduler sched(Limits(4, 64), &kv);
  sched.Add(MakeRequest(1, 9, 10));
  sched.Add(MakeRequest(2, 3, 10));
  auto out = sched.Schedule();
  sched.Update(out, FakeSamples(out));
  EXPECT_EQ(kv.num_free_blocks(), 16 - 3 - 1);
  sched.Cancel(1);
  EXPECT_EQ(kv.num_free_blocks(), 16 - 1);
  sched.CheckIntegrity();
  out = sched.Schedule();
  EXPECT_EQ(Summarize(out).scheduled, (std::vector<std::pair<RequestId, int32_t>>{{2, 1}}));
  auto done = sched.Update(out, FakeSamples(out));
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0]->id, 1u);
  EXPECT_EQ(done[0]->finish_reason, FinishReason::kCancelled);
  sched.Cancel(12345);  // unknown: ignored
  sched.CheckIntegrity();
}

TEST(Scheduler, StopTokenEndsTheRequestWithoutBeingOutput) {
  KVCacheManager kv(16, 4, false);
  Scheduler sched(Limits(4, 64), &kv);
  auto r = MakeRequest(1, 3, 10);
  r->params.stop_token_ids = {7};
  sched.Add(std::move(r));
  auto out = sched.Schedule();
  auto done = sched.Update(out, FakeSamples(out));
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0]->finish_reason, FinishReason::kStop);
  EXPECT_EQ(done[0]->num_output_tokens(), 0);
  EXPECT_EQ(kv.num_free_blocks(), 16);
}

TEST(Scheduler, PriorityOrdersTheWaitingQueue) {
  KVCacheManager kv(16, 4, false);
  Scheduler sched(Limits(1, 64), &kv);
  auto low = MakeRequest(1, 2, 1);
  low->priority = 5;
  auto high = MakeRequest(2, 2, 1);
  high->priority = 0;
  sched.Add(std::move(low));
  sched.Add(std::move(high));
  auto out = sched.Schedule();
  EXPECT_EQ(Summarize(out).scheduled, (std::vector<std::pair<RequestId, int32_t>>{{2, 2}}));
}

TEST(Scheduler, MaxLorasLimitsTheAdaptersRunningAtOnce) {
  // vLLM's max_loras = 1: the requests of adapter A run together (and with the base model's); B's waits, keeping
  // its place, until no request of A runs.
  KVCacheManager kv(64, 4, /*enable_prefix_caching=*/false);
  SchedulerConfig c = Limits(8, 64);
  c.max_loras = 1;
  Scheduler sched(c, &kv);
  auto a = std::make_shared<LoraAdapter>(), b = std::make_shared<LoraAdapter>();
  const std::shared_ptr<const LoraAdapter> adapters[] = {a, b, a, nullptr};
  for (RequestId id = 1; id <= 4; ++id) {
    auto r = MakeRequest(id, 3, id == 1 ? 2 : 1);
    r->adapter = adapters[id - 1];
    sched.Add(std::move(r));
  }
  auto out = sched.Schedule();
  EXPECT_EQ(Summarize(out).scheduled, (std::vector<std::pair<RequestId, int32_t>>{{1, 3}, {3, 3}, {4, 3}}));
  sched.Update(out, FakeSamples(out));  // 3 and 4 finish (max_tokens 1); 1 runs on
  sched.CheckIntegrity();
  EXPECT_EQ(sched.num_waiting(), 1);
  out = sched.Schedule();
  EXPECT_EQ(Summarize(out).scheduled, (std::vector<std::pair<RequestId, int32_t>>{{1, 1}}));
  sched.Update(out, FakeSamples(out));  // 1 finishes: A has no running request
  sched.CheckIntegrity();
  out = sched.Schedule();
  EXPECT_EQ(Summarize(out).scheduled, (std::vector<std::pair<RequestId, int32_t>>{{2, 3}}));
  sched.Update(out, FakeSamples(out));
  EXPECT_EQ(sched.num_unfinished(), 0);
  // Without the limit the four run in one step.
  Scheduler open(Limits(8, 64), &kv);
  for (RequestId id = 1; id <= 4; ++id) {
    auto r = MakeRequest(id, 3, 1);
    r->adapter = adapters[id - 1];
    open.Add(std::move(r));
  }
  EXPECT_EQ(open.Schedule().scheduled.size(), 4u);
}

}  // namespace
}  // namespace parallm
