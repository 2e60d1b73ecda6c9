// Seeded randomized test of KVCacheManager: thousands of admissions, chunked growth, frees, forks and
// preemptions against a shadow of the KV memory, so every prefix hit (whole blocks and tails) is checked to hold the
// right tokens.
#include "cache/kv_cache_manager.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <vector>

namespace parallm {
namespace {

constexpr int32_t kNumBlocks = 48;
constexpr int32_t kStressBlockSize = 4;
constexpr int32_t kUnwritten = -1;

class Harness {
 public:
  explicit Harness(uint64_t seed)
      : m_(kNumBlocks, kStressBlockSize, true),
        rng_(seed),
        shadow_(kNumBlocks, std::vector<int32_t>(kStressBlockSize, kUnwritten)) {
    // A few shared prefixes (system prompts) of 0..13 tokens, from a small vocabulary so tails collide too.
    for (int i = 0; i < 4; ++i) prefixes_.push_back(RandomTokens(Uniform(0, 13)));
  }

  void Step() {
    const int op = Uniform(0, 99);
    if (op < 25 || live_.empty()) {
      Admit();
    } else if (op < 70) {
      Grow();
    } else if (op < 88) {
      const RequestId id = PickLive();
      m_.Free(id);
      live_.erase(id);
    } else if (op < 98) {
      Fork();
    } else {
      m_.Free(next_id_ + 1000);  // unknown
    }
    m_.CheckIntegrity();
    CheckAllLive();
  }

  void FreeAll() {
    for (const auto& [id, req] : live_) {
      m_.Free(id);
      m_.CheckIntegrity();
    }
    live_.clear();
  }

  const KVCacheManager& manager() const { return m_; }
  int64_t num_admitted() const { return num_admitted_; }
  int64_t num_forks() const { return num_forks_; }
  int64_t num_preempted() const { return num_preempted_; }

 private:
  struct Live {
    std::vector<int32_t> tokens;  // prompt + generated so far
    int32_t num_computed = 0;     // tokens whose KV is written
  };

  int Uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  std::vector<int32_t> RandomTokens(int n) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (int32_t& x : t) x = Uniform(0, 5);
    return t;
  }
  RequestId PickLive() {
    auto it = live_.begin();
    std::advance(it, Uniform(0, static_cast<int>(live_.size()) - 1));
    return it->first;
  }

  // Blocks newly added to the table are fresh (exclusively owned) unless they came from the prefix cache.
  void MarkFresh(RequestId id, size_t old_size, size_t num_shared) {
    std::span<const int32_t> table = m_.BlockTable(id);
    for (size_t i = old_size + num_shared; i < table.size(); ++i) {
      const Block& b = m_.pool().block(table[i]);
      ASSERT_EQ(b.ref_count, 1);
      ASSERT_FALSE(b.hash.has_value());
      std::fill(shadow_[static_cast<size_t>(b.id)].begin(), shadow_[static_cast<size_t>(b.id)].end(), kUnwritten);
    }
  }

  // Runs the "model": writes tokens [num_computed, num_computed + n) into the request's slots.
  void Compute(RequestId id, Live& req, int32_t n) {
    std::span<const int32_t> table = m_.BlockTable(id);
    ASSERT_LE(req.num_computed + n, static_cast<int32_t>(table.size()) * kStressBlockSize);
    for (int32_t pos = req.num_computed; pos < req.num_computed + n; ++pos) {
      const Block& b = m_.pool().block(table[static_cast<size_t>(pos / kStressBlockSize)]);
      // Writing into a shared or cached block would corrupt other requests' prefixes.
      ASSERT_EQ(b.ref_count, 1) << "write into shared block " << b.id;
      ASSERT_FALSE(b.hash.has_value()) << "write into cached block " << b.id;
      ASSERT_FALSE(b.is_child) << "write into an indexed block " << b.id;
      shadow_[static_cast<size_t>(b.id)][static_cast<size_t>(pos % kStressBlockSize)] = req.tokens[static_cast<size_t>(pos)];
    }
    req.num_computed += n;
    m_.CacheFullBlocks(id, req.tokens, req.num_computed);
  }

  void CheckAllLive() {
    for (const auto& [id, req] : live_) {
      std::span<const int32_t> table = m_.BlockTable(id);
      ASSERT_GE(static_cast<int32_t>(table.size()) * kStressBlockSize, req.num_computed);
      for (int32_t pos = 0; pos < req.num_computed; ++pos) {
        ASSERT_EQ(shadow_[static_cast<size_t>(table[static_cast<size_t>(pos / kStressBlockSize)])]
                         [static_cast<size_t>(pos % kStressBlockSize)],
                  req.tokens[static_cast<size_t>(pos)])
            << "request " << id << " position " << pos;
      }
    }
  }

  void Admit() {
    if (live_.size() >= 24) return;
    Live req;
    req.tokens = prefixes_[static_cast<size_t>(Uniform(0, 3))];
    std::vector<int32_t> tail = RandomTokens(Uniform(1, 12));
    req.tokens.insert(req.tokens.end(), tail.begin(), tail.end());
    ComputedBlocks cb = m_.GetComputedBlocks(req.tokens);
    const int32_t full = static_cast<int32_t>(cb.block_ids.size()) * kStressBlockSize;
    ASSERT_EQ(cb.num_tokens, full + cb.tail_tokens);
    ASSERT_LT(cb.tail_tokens, kStressBlockSize);
    ASSERT_EQ(cb.tail_block >= 0, cb.tail_tokens > 0);
    ASSERT_LT(cb.num_tokens, static_cast<int32_t>(req.tokens.size()));
    // And token by token: the tail's first slots hold the prompt's next tokens.
    for (int32_t j = 0; j < cb.tail_tokens; ++j)
      ASSERT_EQ(shadow_[static_cast<size_t>(cb.tail_block)][static_cast<size_t>(j)],
                req.tokens[static_cast<size_t>(full + j)]);
    // The heart of prefix caching: the blocks found hold exactly the prompt's tokens.
    for (size_t i = 0; i < cb.block_ids.size(); ++i) {
      for (int32_t j = 0; j < kStressBlockSize; ++j) {
        ASSERT_EQ(shadow_[static_cast<size_t>(cb.block_ids[i])][static_cast<size_t>(j)],
                  req.tokens[i * kStressBlockSize + static_cast<size_t>(j)]);
      }
    }
    const int32_t remaining = static_cast<int32_t>(req.tokens.size()) - cb.num_tokens;
    const int32_t chunk = Uniform(1, remaining);  // chunked prefill
    const RequestId id = next_id_++;
    if (!m_.AllocateSlots(id, cb.num_tokens, chunk, cb)) {
      ASSERT_TRUE(m_.BlockTable(id).empty());
      return;
    }
    ++num_admitted_;
    MarkFresh(id, 0, cb.block_ids.size());
    // The engine copies a tail right after scheduling (every slot of the block, as PagedKvStorage::CopyBlock does).
    EXPECT_EQ(m_.has_pending_copies(), cb.tail_block >= 0);
    m_.CheckIntegrity();
    m_.RunPendingCopies([&](int32_t src, int32_t dst) {
      ASSERT_EQ(dst, m_.BlockTable(id)[cb.block_ids.size()]);
      shadow_[static_cast<size_t>(dst)] = shadow_[static_cast<size_t>(src)];
    });
    req.num_computed = cb.num_tokens;
    Compute(id, req, chunk);
    live_.emplace(id, std::move(req));
  }

  void Grow() {
    const RequestId id = PickLive();
    Live& req = live_.at(id);
    int32_t n;
    if (req.num_computed < static_cast<int32_t>(req.tokens.size())) {
      n = Uniform(1, static_cast<int32_t>(req.tokens.size()) - req.num_computed);  // rest of the prefill
    } else {
      std::vector<int32_t> generated = RandomTokens(Uniform(1, 6));  // decode (or speculative) tokens
      req.tokens.insert(req.tokens.end(), generated.begin(), generated.end());
      n = static_cast<int32_t>(generated.size());
    }
    const std::vector<int32_t> before(m_.BlockTable(id).begin(), m_.BlockTable(id).end());
    if (!m_.AllocateSlots(id, req.num_computed, n)) {
      ASSERT_EQ(std::vector<int32_t>(m_.BlockTable(id).begin(), m_.BlockTable(id).end()), before);
      m_.Free(id);  // preemption by recompute
      live_.erase(id);
      ++num_preempted_;
      return;
    }
    MarkFresh(id, before.size(), 0);
    Compute(id, req, n);
  }

  void Fork() {
    const RequestId parent = PickLive();
    const Live& from = live_.at(parent);
    if (from.num_computed == 0) return;
    std::vector<std::pair<int32_t, int32_t>> copies;
    const RequestId child = next_id_++;
    if (!m_.Fork(parent, child, from.num_computed, &copies)) {
      ASSERT_TRUE(m_.BlockTable(child).empty());
      return;
    }
    ++num_forks_;
    ASSERT_EQ(copies.size(), from.num_computed % kStressBlockSize != 0 ? 1u : 0u);
    for (auto [src, dst] : copies) shadow_[static_cast<size_t>(dst)] = shadow_[static_cast<size_t>(src)];
    Live req;
    req.tokens.assign(from.tokens.begin(), from.tokens.begin() + from.num_computed);
    req.num_computed = from.num_computed;
    live_.emplace(child, std::move(req));
  }

  KVCacheManager m_;
  std::mt19937_64 rng_;
  std::vector<std::vector<int32_t>> shadow_;  // [block][slot] -> token written there, or kUnwritten
  std::vector<std::vector<int32_t>> prefixes_;
  std::map<RequestId, Live> live_;
  RequestId next_id_ = 1;
  int64_t num_admitted_ = 0, num_forks_ = 0, num_preempted_ = 0;
};

TEST(KVCacheManagerStress, RandomOperationsKeepInvariants) {
  for (uint64_t seed : {1u, 2u, 3u}) {
    SCOPED_TRACE(seed);
    Harness h(seed);
    for (int i = 0; i < 10000; ++i) {
      h.Step();
      if (testing::Test::HasFatalFailure()) return;
    }
    h.FreeAll();
    const KVCacheManager& m = h.manager();
    EXPECT_EQ(m.num_free_blocks(), kNumBlocks);
    for (int32_t b = 0; b < kNumBlocks; ++b) EXPECT_EQ(m.pool().block(b).ref_count, 0);
    const KVCacheStats& s = m.stats();
    EXPECT_EQ(s.hits + s.partial_hits + s.misses, s.queries);
    // The run exercised what it claims to: hits, forks, preemption.
    EXPECT_GT(s.hits, 0);
    EXPECT_GT(s.partial_hits, 0);
    EXPECT_GT(s.blocks_shared, 0);
    EXPECT_GT(s.tail_hits, 0);
    EXPECT_GT(h.num_forks(), 0);
    EXPECT_GT(h.num_preempted(), 0);
    EXPECT_GT(h.num_admitted(), 1000);
  }
}

}  // namespace
}  // namespace parallm
