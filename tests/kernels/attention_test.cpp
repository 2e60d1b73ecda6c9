// PagedAttention against its scalar reference twin, on ragged shapes and scattered block tables (with sliding
// windows and soft-capping too), and the properties the engine needs: a head's result does not depend on how the KV
// heads are split, on what else is in the scratch buffer, or on the other heads' queries. Keys and values stored as
// bf16 and int8 (KvDtype) too: against the twin, and close to the f32 result. PagedAttentionTokens (a prefill chunk's
// tokens together): each token the same bits as alone, in any run of tokens.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/attention.h"
#include "kernels/cpu_features.h"
#include "kernels/kv_dtype.h"
#include "kernels/prompt_attention.h"
#include "tensor/fp16.h"

namespace parallm {
namespace {

struct Case {
  int n_heads, n_kv_heads, head_dim, block_size;
  int64_t n_ctx;
  int window = 0;      // sliding window (0: none)
  float softcap = 0;   // score soft-capping (0: none)
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.n_heads << "/" << c.n_kv_heads << " heads, dim " << c.head_dim << ", block " << c.block_size << ", n_ctx "
      << c.n_ctx << ", window " << c.window << ", softcap " << c.softcap;
}

// Random keys, values and queries for one sequence whose blocks lie scattered and out of order in the storage;
// keys and values are stored as `dtype` (converted from the f32 ones in `keys` and `values`).
struct Fixture {
  Case c;
  std::vector<float> keys, values, q;
  std::vector<char> stored_keys, stored_values;  // bf16, int8
  std::vector<float> key_scales, value_scales;   // int8
  std::vector<int32_t> table;
  AttentionShape shape;
  PagedKvView kv;

  explicit Fixture(const Case& c_in, uint32_t seed = 42, KvDtype dtype = KvDtype::kF32) : c(c_in) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal;
    const int64_t used = (c.n_ctx + c.block_size - 1) / c.block_size;
    const int64_t n_blocks = 2 * used + 3;
    const int64_t stride = static_cast<int64_t>(c.n_kv_heads) * c.head_dim;
    keys.resize(static_cast<size_t>(n_blocks * c.block_size * stride));
    values.resize(keys.size());
    // Keys scaled so scores spread over a few units: softmax weights far from uniform, as in a real model.
    for (float& x : keys) x = 2.0f * normal(rng);
    for (float& x : values) x = normal(rng);
    // Every other block, backwards: the table, not the storage order, defines the sequence.
    for (int64_t b = 0; b < used; ++b) table.push_back(static_cast<int32_t>(2 * (used - 1 - b) + 1));
    q.resize(static_cast<size_t>(c.n_heads * c.head_dim));
    for (float& x : q) x = normal(rng);
    shape = {c.n_heads, c.n_kv_heads, c.head_dim, 1.0f / std::sqrt(static_cast<float>(c.head_dim)), c.window,
             c.softcap};
    kv = {keys.data(), values.data(), stride, c.block_size};
    if (dtype != KvDtype::kF32) Store(dtype);
  }

  void Store(KvDtype dtype) {
    const size_t rows = keys.size() / static_cast<size_t>(c.head_dim), row_bytes = c.head_dim * KvElementBytes(dtype);
    stored_keys.resize(rows * row_bytes);
    stored_values.resize(rows * row_bytes);
    key_scales.resize(rows);
    value_scales.resize(rows);
    for (size_t r = 0; r < rows; ++r) {
      EncodeKvRow(dtype, keys.data() + r * c.head_dim, c.head_dim, stored_keys.data() + r * row_bytes, &key_scales[r]);
      EncodeKvRow(dtype, values.data() + r * c.head_dim, c.head_dim, stored_values.data() + r * row_bytes,
                  &value_scales[r]);
    }
    kv.keys = stored_keys.data();
    kv.values = stored_values.data();
    kv.dtype = dtype;
    kv.key_scales = key_scales.data();  // row r = slot * n_kv_heads + head, as the storage lays them out
    kv.value_scales = value_scales.data();
  }

  // Computes KV heads [kv_begin, kv_end) into `out` (the other heads' rows are left as they are).
  std::vector<float> Run(int kv_begin, int kv_end, std::vector<float> out) const {
    std::vector<float> scratch(static_cast<size_t>(PagedAttentionScratchSize(shape, c.n_ctx)));
    PagedAttention(q.data(), shape, kv, table, c.n_ctx, kv_begin, kv_end, scratch, out.data());
    return out;
  }
};

// Runs `check` once per kernel width this CPU supports (AVX-512, AVX2, baseline), then restores the best one.
template <class F>
void ForEachWidth(F check) {
  int tested = 0;
  for (int lanes : {16, 8, 4}) {
    if (!SetPagedAttentionLanes(lanes)) continue;
    ASSERT_EQ(PagedAttentionLanes(), lanes);
    SCOPED_TRACE(::testing::Message() << lanes << " lanes");
    check();
    ++tested;
  }
  ASSERT_TRUE(SetPagedAttentionLanes(0));
  EXPECT_GE(tested, 1);
}

class PagedAttentionTest : public ::testing::TestWithParam<Case> {};

TEST_P(PagedAttentionTest, MatchesReference) {
  const Fixture f(GetParam());
  std::vector<float> ref(f.q.size());
  std::vector<float> scratch(static_cast<size_t>(f.c.n_ctx));
  ref::PagedAttention(f.q.data(), f.shape, f.kv, f.table, f.c.n_ctx, 0, f.c.n_kv_heads, scratch, ref.data());
  ForEachWidth([&] {
    const std::vector<float> fast = f.Run(0, f.c.n_kv_heads, std::vector<float>(f.q.size()));
    for (size_t i = 0; i < ref.size(); ++i) EXPECT_NEAR(fast[i], ref[i], 1e-5f * (1 + std::abs(ref[i]))) << i;
  });
}

// A head's bits do not depend on which KV heads are computed in the same call (the engine splits a token's KV
// heads across threads), nor on what the output and scratch buffers held before.
TEST_P(PagedAttentionTest, SplitInvariant) {
  const Fixture f(GetParam());
  ForEachWidth([&] {
    const std::vector<float> all = f.Run(0, f.c.n_kv_heads, std::vector<float>(f.q.size()));
    const size_t per_kv = f.q.size() / static_cast<size_t>(f.c.n_kv_heads);
    for (int split = 1; split < f.c.n_kv_heads; ++split) {  // [0, split) then [split, n_kv_heads)
      std::vector<float> two = f.Run(0, split, std::vector<float>(f.q.size(), NAN));
      two = f.Run(split, f.c.n_kv_heads, two);
      EXPECT_EQ(two, all) << "split at " << split;
    }
    for (int h = 0; h < f.c.n_kv_heads; ++h) {
      const std::vector<float> one = f.Run(h, h + 1, std::vector<float>(f.q.size(), NAN));
      const size_t lo = static_cast<size_t>(h) * per_kv, hi = lo + per_kv;
      for (size_t i = 0; i < one.size(); ++i) {
        if (i >= lo && i < hi)
          ASSERT_EQ(one[i], all[i]) << "kv head " << h << ", " << i;
        else
          ASSERT_TRUE(std::isnan(one[i])) << "wrote outside kv head " << h;
      }
    }
    // Scratch left dirty by a longer context changes nothing.
    std::vector<float> scratch(static_cast<size_t>(PagedAttentionScratchSize(f.shape, f.c.n_ctx + 40)), 1e30f);
    std::vector<float> out(f.q.size());
    PagedAttention(f.q.data(), f.shape, f.kv, f.table, f.c.n_ctx, 0, f.c.n_kv_heads, scratch, out.data());
    EXPECT_EQ(out, all);
  });
}

// A head's result depends on its own query only: changing another head's query (same KV head or not) leaves it
// bit-identical.
TEST_P(PagedAttentionTest, HeadsIndependent) {
  ForEachWidth([&] {
    Fixture f(GetParam());
    const std::vector<float> before = f.Run(0, f.c.n_kv_heads, std::vector<float>(f.q.size()));
    const int h_changed = f.c.n_heads - 1;
    for (int d = 0; d < f.c.head_dim; ++d) f.q[static_cast<size_t>(h_changed * f.c.head_dim + d)] *= -3.0f;
    const std::vector<float> after = f.Run(0, f.c.n_kv_heads, std::vector<float>(f.q.size()));
    for (size_t i = 0; i < static_cast<size_t>(h_changed * f.c.head_dim); ++i) ASSERT_EQ(after[i], before[i]) << i;
  });
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, PagedAttentionTest,
    ::testing::Values(
        // The 0.5B benchmark shape (14 query / 2 KV heads: groups of 7, head_dim 64), contexts around tile edges.
        Case{14, 2, 64, 16, 1}, Case{14, 2, 64, 16, 15}, Case{14, 2, 64, 16, 16}, Case{14, 2, 64, 16, 17},
        Case{14, 2, 64, 16, 300}, Case{14, 2, 64, 16, 1000}, Case{14, 2, 64, 32, 1}, Case{14, 2, 64, 32, 17},
        Case{14, 2, 64, 32, 300}, Case{14, 2, 64, 32, 1000},
        // Other group sizes, head dims not a multiple of any vector width, and odd block sizes.
        Case{1, 1, 8, 16, 1}, Case{8, 4, 8, 16, 37}, Case{16, 8, 128, 16, 129}, Case{4, 2, 20, 4, 9},
        Case{6, 3, 50, 5, 61}, Case{21, 3, 72, 7, 45}, Case{8, 1, 64, 3, 33},
        // Head dims of 4 and 8 vectors of some width (a head's query held in registers, ScoreRows) and of other counts.
        Case{8, 2, 32, 16, 300}, Case{4, 1, 16, 16, 50}, Case{4, 2, 128, 16, 70},
        // Sliding windows starting mid-block and mid-tile, shorter and longer than the context; soft-capping (a cap
        // of 1 bends every score of these keys), alone and with a window.
        Case{14, 2, 64, 16, 300, 37}, Case{14, 2, 64, 16, 1000, 512}, Case{8, 4, 8, 16, 37, 5},
        Case{6, 3, 50, 5, 61, 16}, Case{4, 2, 20, 4, 9, 100}, Case{8, 1, 64, 3, 33, 1},
        Case{14, 2, 64, 16, 300, 0, 1.0f}, Case{8, 4, 72, 16, 45, 0, 50.0f}, Case{6, 3, 50, 5, 61, 17, 2.0f}),
    [](const auto& info) {
      const Case& c = info.param;
      std::ostringstream name;
      name << "h" << c.n_heads << "kv" << c.n_kv_heads << "_d" << c.head_dim << "_b" << c.block_size << "_ctx" << c.n_ctx;
      if (c.window > 0) name << "_win" << c.window;
      if (c.softcap > 0) name << "_cap" << static_cast<int>(c.softcap);
      return name.str();
    });

// Keys and values stored as f16, bf16 or int8: the kernel matches its twin reading the same stored bits, a head's
// result still does not depend on the split, and the result stays close to attention over the f32 keys and values.
class PagedAttentionStoredTest : public ::testing::TestWithParam<std::tuple<Case, KvDtype>> {};

TEST_P(PagedAttentionStoredTest, MatchesReferenceAndF32) {
  const auto& [c, dtype] = GetParam();
  const Fixture f(c, 42, dtype), exact(c, 42);
  std::vector<float> ref(f.q.size()), scratch(static_cast<size_t>(c.n_ctx));
  ref::PagedAttention(f.q.data(), f.shape, f.kv, f.table, c.n_ctx, 0, c.n_kv_heads, scratch, ref.data());
  const std::vector<float> f32 = exact.Run(0, c.n_kv_heads, std::vector<float>(f.q.size()));
  // Values are N(0, 1): the error of a weighted mean of them is about the storage's relative rounding.
  const float tolerance = dtype == KvDtype::kF16 ? 0.004f : dtype == KvDtype::kBf16 ? 0.03f : 0.08f;
  float worst = 0;
  for (size_t i = 0; i < ref.size(); ++i) worst = std::max(worst, std::abs(ref[i] - f32[i]));
  EXPECT_LT(worst, tolerance);
  EXPECT_GT(worst, 0.0f);  // the stored type is really used
  ForEachWidth([&] {
    const std::vector<float> all = f.Run(0, c.n_kv_heads, std::vector<float>(f.q.size()));
    for (size_t i = 0; i < ref.size(); ++i) EXPECT_NEAR(all[i], ref[i], 1e-5f * (1 + std::abs(ref[i]))) << i;
    for (int split = 1; split < c.n_kv_heads; ++split) {
      std::vector<float> two = f.Run(0, split, std::vector<float>(f.q.size(), NAN));
      EXPECT_EQ(f.Run(split, c.n_kv_heads, two), all) << "split at " << split;
    }
  });
}

INSTANTIATE_TEST_SUITE_P(
    Types, PagedAttentionStoredTest,
    ::testing::Combine(::testing::Values(Case{14, 2, 64, 16, 17}, Case{14, 2, 64, 16, 300}, Case{8, 4, 8, 16, 37},
                                         Case{6, 3, 50, 5, 61, 16}, Case{21, 3, 72, 7, 45, 0, 2.0f},
                                         Case{8, 1, 64, 3, 33},
                                         // Rows decoded into a tile of 8 vectors a row; rows wider than that tile
                                         // (above 256 dims) read as stored.
                                         Case{8, 2, 128, 16, 100}, Case{4, 1, 264, 8, 40}),
                       ::testing::Values(KvDtype::kF16, KvDtype::kBf16, KvDtype::kInt8)),
    [](const auto& info) {
      const Case& c = std::get<0>(info.param);
      std::ostringstream name;
      name << KvDtypeName(std::get<1>(info.param)) << "_h" << c.n_heads << "kv" << c.n_kv_heads << "_d" << c.head_dim
           << "_b" << c.block_size << "_ctx" << c.n_ctx;
      return name.str();
    });

// The conversions: f16 and bf16 round to nearest even (f16 saturating at its largest finite value), int8 reconstructs
// within half a step of its scale.
TEST(KvDtypeTest, Conversions) {
  EXPECT_EQ(FloatToBf16(1.0f), 0x3F80);
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(1.0f + 1.0f / 256)), 1.0f);  // halfway: to even (down)
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(1.0f + 3.0f / 256)), 1.0f + 4.0f / 256);  // halfway: to even (up)
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(NAN))));
  const std::vector<float> h{1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048, 1e6f, -7e4f, NAN, 65504.0f, 3e-8f};
  uint16_t hb[7];
  EncodeKvRow(KvDtype::kF16, h.data(), 7, hb, nullptr);
  EXPECT_EQ(DecodeKvElement(KvDtype::kF16, hb, 0, 1), 1.0f);                // halfway: to even (down)
  EXPECT_EQ(DecodeKvElement(KvDtype::kF16, hb, 1, 1), 1.0f + 4.0f / 2048);  // halfway: to even (up)
  EXPECT_EQ(DecodeKvElement(KvDtype::kF16, hb, 2, 1), 65504.0f);            // saturates, not inf
  EXPECT_EQ(DecodeKvElement(KvDtype::kF16, hb, 3, 1), -65504.0f);
  EXPECT_TRUE(std::isnan(DecodeKvElement(KvDtype::kF16, hb, 4, 1)));
  EXPECT_EQ(DecodeKvElement(KvDtype::kF16, hb, 5, 1), 65504.0f);
  EXPECT_EQ(DecodeKvElement(KvDtype::kF16, hb, 6, 1), 0x1p-24f);  // just over half the smallest subnormal: up to it

  const std::vector<float> x{0.5f, -2.0f, 1.25f, 0.0f, 1.99f};
  int8_t q[5];
  float scale = -1;
  EncodeKvRow(KvDtype::kInt8, x.data(), 5, q, &scale);
  EXPECT_FLOAT_EQ(scale, 2.0f / 127);
  EXPECT_EQ(q[1], -127);
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(DecodeKvElement(KvDtype::kInt8, q, i, scale), x[i], scale / 2 + 1e-7f);
  float zeros[3] = {0, 0, 0};
  EncodeKvRow(KvDtype::kInt8, zeros, 3, q, &scale);
  EXPECT_EQ(scale, 0.0f);
  EXPECT_EQ(DecodeKvElement(KvDtype::kInt8, q, 0, scale), 0.0f);
  EXPECT_EQ(ParseKvDtype("f32"), KvDtype::kF32);
  EXPECT_EQ(ParseKvDtype("float32"), KvDtype::kF32);
  EXPECT_EQ(ParseKvDtype("auto"), std::nullopt);  // the model's type: a --kv-cache-dtype value, not a type
  EXPECT_EQ(ParseKvDtype("bfloat16"), KvDtype::kBf16);
  EXPECT_EQ(ParseKvDtype("float16"), KvDtype::kF16);
  EXPECT_EQ(ParseKvDtype("half"), KvDtype::kF16);
  EXPECT_EQ(ParseKvDtype("int8"), KvDtype::kInt8);
  EXPECT_EQ(ParseKvDtype("fp8"), std::nullopt);
  std::optional<KvDtype> choice = KvDtype::kInt8;
  EXPECT_TRUE(ParseKvCacheDtype("auto", &choice));
  EXPECT_EQ(choice, std::nullopt);
  EXPECT_TRUE(ParseKvCacheDtype("half", &choice));
  EXPECT_EQ(choice, KvDtype::kF16);
  EXPECT_FALSE(ParseKvCacheDtype("fp8_e4m3", &choice));
  EXPECT_EQ(choice, KvDtype::kF16);  // untouched
}

// Rows are converted 8 values at a time where the CPU has AVX2 and F16C: the same bits as the conversions one value
// at a time, over values of every exponent from below f16's subnormals to past its largest (saturated), exact
// halfway cases of f16 and of bf16, signs, zeros, NaN (bf16), and a ragged tail.
TEST(KvDtypeTest, RowsEqualOneByOne) {
  std::mt19937 rng(7);
  std::vector<float> x(1003);
  for (size_t i = 0; i < x.size(); ++i) {
    uint32_t bits = rng();
    const uint32_t exponent = 100 + rng() % 50;  // 2^-27 .. 2^22
    bits = (bits & 0x807FFFFFu) | (exponent << 23);
    if (i % 7 == 0) bits = (bits & ~0x1FFFu) | 0x1000u;  // halfway between two f16 (normal ones)
    if (i % 11 == 0) bits = (bits & ~0xFFFFu) | 0x8000u;  // halfway between two bf16
    if (i % 101 == 0) bits &= 0x80000000u;               // +-0
    std::memcpy(&x[i], &bits, sizeof bits);
  }
  const int n = static_cast<int>(x.size());
  std::vector<uint16_t> row(x.size());
  EncodeKvRow(KvDtype::kF16, x.data(), n, row.data(), nullptr);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(row[i], F32ToF16(std::clamp(x[i], -65504.0f, 65504.0f))) << i;
  std::vector<float> with_nan = x;
  with_nan[3] = 1e8f;  // the row's largest magnitude, before a NaN in the same vector lane
  with_nan[403] = NAN;
  with_nan[n - 2] = -NAN;  // in the tail
  EncodeKvRow(KvDtype::kBf16, with_nan.data(), n, row.data(), nullptr);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(row[i], FloatToBf16(with_nan[i])) << i;
  // int8: the row's scale is its largest magnitude over 127, each code x / scale to nearest even; a NaN is ignored by
  // the scale (its own code is unspecified).
  std::vector<int8_t> codes(x.size());
  float scale = 0;
  EncodeKvRow(KvDtype::kInt8, with_nan.data(), n, codes.data(), &scale);
  float amax = 0;
  for (size_t i = 0; i < x.size(); ++i)
    if (!std::isnan(with_nan[i])) amax = std::max(amax, std::fabs(with_nan[i]));
  EXPECT_EQ(scale, amax / 127.0f);
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(with_nan[i])) continue;
    EXPECT_EQ(codes[i], static_cast<int8_t>(std::nearbyint(with_nan[i] * (1.0f / scale)))) << i;
  }
}

// PagedAttentionTokens: consecutive tokens of one sequence (a prefill chunk) computed together give every token the
// same bits as PagedAttention for that token alone, at every kernel width, whatever the chunk's length and however
// the chunk is split into calls; and they match the scalar twin token by token.
struct TokensCase {
  Case c;  // c.n_ctx: the chunk's last token's context
  int n_tokens;
  KvDtype dtype = KvDtype::kF32;
};

void PrintTo(const TokensCase& t, std::ostream* os) {
  PrintTo(t.c, os);
  *os << ", " << t.n_tokens << " tokens, " << KvDtypeName(t.dtype);
}

std::string TokensCaseName(const ::testing::TestParamInfo<TokensCase>& info) {
  const TokensCase& t = info.param;
  const Case& c = t.c;
  std::ostringstream name;
  name << KvDtypeName(t.dtype) << "_h" << c.n_heads << "kv" << c.n_kv_heads << "_d" << c.head_dim << "_b"
       << c.block_size << "_ctx" << c.n_ctx << "_n" << t.n_tokens;
  if (c.window > 0) name << "_win" << c.window;
  if (c.softcap > 0) name << "_cap" << static_cast<int>(c.softcap);
  return name.str();
}

class PagedAttentionTokensTest : public ::testing::TestWithParam<TokensCase> {
 protected:
  // Queries of the chunk's tokens, one row of n_heads * head_dim each with `pad` floats after it (the model's q rows
  // are q_dim apart, its output rows likewise).
  void SetUp() override {
    const TokensCase& t = GetParam();
    f_ = std::make_unique<Fixture>(t.c, 7, t.dtype);
    width_ = static_cast<int64_t>(t.c.n_heads) * t.c.head_dim;
    stride_ = width_ + 3;
    std::mt19937 rng(11);
    std::normal_distribution<float> normal;
    q_.resize(static_cast<size_t>(t.n_tokens * stride_));
    for (float& x : q_) x = normal(rng);
  }

  int64_t FirstCtx() const { return GetParam().c.n_ctx - GetParam().n_tokens + 1; }

  // Token i alone through PagedAttention.
  std::vector<float> Alone(int i) const {
    const int64_t n_ctx = FirstCtx() + i;
    std::vector<float> out(static_cast<size_t>(width_));
    std::vector<float> scratch(static_cast<size_t>(PagedAttentionScratchSize(f_->shape, n_ctx)));
    PagedAttention(q_.data() + i * stride_, f_->shape, f_->kv, f_->table, n_ctx, 0, f_->c.n_kv_heads, scratch,
                   out.data());
    return out;
  }

  // Tokens [i0, i0 + n) through one PagedAttentionTokens call over f's keys and values for KV heads
  // [kv_begin, kv_end), into `out` ([n_tokens, stride_]), with scratch left dirty.
  void Chunk(const Fixture& f, int i0, int n, int kv_begin, int kv_end, std::vector<float>& out) const {
    const int64_t first = FirstCtx() + i0;
    std::vector<float> scratch(
        static_cast<size_t>(PagedAttentionTokensScratchSize(f.shape, first + n - 1, n) + 17), 1e30f);
    PagedAttentionTokens(q_.data() + i0 * stride_, stride_, f.shape, f.kv, f.table, first, n, kv_begin, kv_end,
                         scratch, out.data() + i0 * stride_, stride_);
  }

  // Every token's output in `out` equals its PagedAttention result alone, bit for bit.
  void ExpectSameAsAlone(const std::vector<float>& out, const std::string& how) const {
    for (int i = 0; i < GetParam().n_tokens; ++i) {
      const std::vector<float> alone = Alone(i);
      for (int64_t e = 0; e < width_; ++e)
        ASSERT_EQ(out[static_cast<size_t>(i * stride_ + e)], alone[static_cast<size_t>(e)])
            << how << ": token " << i << ", element " << e;
    }
  }

  std::unique_ptr<Fixture> f_;
  std::vector<float> q_;
  int64_t width_ = 0, stride_ = 0;
};

TEST_P(PagedAttentionTokensTest, SameBitsAsAloneAndMatchesReference) {
  const TokensCase& t = GetParam();
  const int n = t.n_tokens;
  // The scalar twin, token by token.
  std::vector<std::vector<float>> ref(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    const int64_t n_ctx = FirstCtx() + i;
    ref[static_cast<size_t>(i)].resize(static_cast<size_t>(width_));
    std::vector<float> scratch(static_cast<size_t>(n_ctx));
    ref::PagedAttention(q_.data() + i * stride_, f_->shape, f_->kv, f_->table, n_ctx, 0, t.c.n_kv_heads, scratch,
                        ref[static_cast<size_t>(i)].data());
  }
  ForEachWidth([&] {
    // The whole chunk in one call.
    std::vector<float> whole(q_.size(), NAN);
    Chunk(*f_, 0, n, 0, t.c.n_kv_heads, whole);
    ExpectSameAsAlone(whole, "one call");
    for (int i = 0; i < n; ++i)
      for (int64_t e = 0; e < width_; ++e) {
        const float r = ref[static_cast<size_t>(i)][static_cast<size_t>(e)];
        ASSERT_NEAR(whole[static_cast<size_t>(i * stride_ + e)], r, 1e-5f * (1 + std::abs(r))) << i << ", " << e;
      }
    // Ragged runs (1, 2, 3, ... tokens) with the KV heads split in two calls: the same bits.
    std::vector<float> runs(q_.size(), NAN);
    for (int i0 = 0, len = 1; i0 < n; i0 += len, ++len) {
      const int m = std::min(len, n - i0), split = t.c.n_kv_heads / 2;
      Chunk(*f_, i0, m, 0, split, runs);
      Chunk(*f_, i0, m, split, t.c.n_kv_heads, runs);
    }
    EXPECT_EQ(std::memcmp(runs.data(), whole.data(), runs.size() * sizeof(float)), 0);  // NaN padding alike
  });
}

// A token's result does not read the keys and values of later positions, even those of its own chunk: with the
// chunk's last position's key and value rows made NaN, every earlier token keeps its bits.
TEST_P(PagedAttentionTokensTest, IgnoresLaterPositions) {
  const TokensCase& t = GetParam();
  if (t.n_tokens < 2) GTEST_SKIP();
  Fixture poisoned(t.c, 7);
  const int64_t j = t.c.n_ctx - 1;
  const int64_t block = poisoned.table[static_cast<size_t>(j / t.c.block_size)];
  const int64_t slot = block * t.c.block_size + j % t.c.block_size;
  std::fill_n(poisoned.keys.data() + slot * poisoned.kv.slot_stride, poisoned.kv.slot_stride, NAN);
  std::fill_n(poisoned.values.data() + slot * poisoned.kv.slot_stride, poisoned.kv.slot_stride, NAN);
  if (t.dtype != KvDtype::kF32) poisoned.Store(t.dtype);
  if (t.dtype == KvDtype::kInt8) {  // int8 keeps the NaN in the rows' scales (the codes of NaN are whatever)
    std::fill_n(poisoned.key_scales.data() + slot * t.c.n_kv_heads, t.c.n_kv_heads, NAN);
    std::fill_n(poisoned.value_scales.data() + slot * t.c.n_kv_heads, t.c.n_kv_heads, NAN);
  }
  ForEachWidth([&] {
    std::vector<float> before(q_.size(), 0.0f), after(q_.size(), 0.0f);
    Chunk(*f_, 0, t.n_tokens, 0, t.c.n_kv_heads, before);
    Chunk(poisoned, 0, t.n_tokens, 0, t.c.n_kv_heads, after);
    const size_t earlier = static_cast<size_t>((t.n_tokens - 1) * stride_);
    EXPECT_EQ(std::memcmp(before.data(), after.data(), earlier * sizeof(float)), 0);
    EXPECT_TRUE(std::isnan(after[earlier]));  // the last token does read it
  });
}

INSTANTIATE_TEST_SUITE_P(
    Chunks, PagedAttentionTokensTest,
    ::testing::Values(
        // The 0.5B shape: a whole prompt from position 0 (past one block of 16 tokens), chunks later in a context,
        // ends on and off tile and block edges.
        TokensCase{Case{14, 2, 64, 16, 40}, 40}, TokensCase{Case{14, 2, 64, 16, 300}, 37},
        TokensCase{Case{14, 2, 64, 16, 17}, 2}, TokensCase{Case{14, 2, 64, 32, 129}, 33},
        TokensCase{Case{14, 2, 64, 16, 64}, 1},
        // Other groups, head dims not a multiple of a vector, odd block sizes; head dims of 8 vectors of some width.
        TokensCase{Case{8, 4, 8, 16, 37}, 37}, TokensCase{Case{6, 3, 50, 5, 61}, 20},
        TokensCase{Case{21, 3, 72, 7, 45}, 45}, TokensCase{Case{8, 1, 64, 3, 33}, 9},
        TokensCase{Case{4, 2, 128, 16, 70}, 19}, TokensCase{Case{1, 1, 8, 16, 23}, 23},
        // Sliding windows the chunk crosses (tokens before and after the window's start moving off position 0),
        // lies past, or never reaches; soft-capping alone and with a window.
        TokensCase{Case{14, 2, 64, 16, 80, 37}, 60}, TokensCase{Case{8, 4, 8, 16, 37, 5}, 10},
        TokensCase{Case{6, 3, 50, 5, 61, 16}, 30}, TokensCase{Case{14, 2, 64, 16, 50, 100}, 50},
        TokensCase{Case{14, 2, 64, 16, 300, 0, 1.0f}, 21}, TokensCase{Case{6, 3, 50, 5, 61, 17, 2.0f}, 25},
        // 16-bit and int8 keys and values: decoded tiles (up to 256 dims) and rows read as stored (264).
        TokensCase{Case{14, 2, 64, 16, 40}, 40, KvDtype::kBf16},
        TokensCase{Case{14, 2, 64, 16, 40}, 40, KvDtype::kF16},
        TokensCase{Case{6, 3, 50, 5, 61, 16}, 30, KvDtype::kF16},
        TokensCase{Case{4, 1, 264, 8, 40}, 18, KvDtype::kF16},
        TokensCase{Case{14, 2, 64, 16, 40}, 40, KvDtype::kInt8},
        TokensCase{Case{6, 3, 50, 5, 61, 16}, 30, KvDtype::kInt8},
        TokensCase{Case{21, 3, 72, 7, 45, 0, 2.0f}, 20, KvDtype::kBf16},
        TokensCase{Case{8, 1, 64, 3, 33}, 9, KvDtype::kInt8}, TokensCase{Case{4, 1, 264, 8, 40}, 18, KvDtype::kInt8},
        TokensCase{Case{4, 1, 264, 8, 40}, 18, KvDtype::kBf16},
        // Key tiles transposed in registers: 8 and 16 vectors of dims, a context of many tiles.
        TokensCase{Case{4, 2, 128, 16, 300}, 37, KvDtype::kF16}, TokensCase{Case{2, 1, 256, 16, 100}, 20, KvDtype::kF16}),
    TokensCaseName);

// PromptAttention: the scalar twin (its formula) against the f32 attention of every token, on every CPU; where the CPU
// runs the kernel, the kernel against the twin bit for bit, in one call and in ragged runs with the KV heads one call
// each (a token's bits do not depend on which tokens share its call).
class PromptAttentionTest : public PagedAttentionTokensTest {
 protected:
  // Tokens [i0, i0 + n) of KV head kvh through one kernel call, into `out`, with dirty scratch.
  void Kernel(int i0, int n, int kvh, std::vector<float>& out) const {
    const int64_t first = FirstCtx() + i0;
    std::vector<uint8_t> scratch(static_cast<size_t>(PromptAttentionScratchBytes(f_->shape, first + n - 1) + 13), 0xA5);
    PromptAttention(q_.data() + i0 * stride_, stride_, f_->shape, f_->kv, f_->table, first, n, kvh, scratch,
                    out.data() + i0 * stride_, stride_);
  }
};

TEST_P(PromptAttentionTest, TwinsNearF32AndKernelEqualsItsTwin) {
  const TokensCase& t = GetParam();
  const int n = t.n_tokens;
  std::vector<float> twin;
  for (PromptFormula formula : {PromptFormula::kPairs, PromptFormula::kTiles}) {
    std::vector<float> y(q_.size(), NAN);
    for (int kvh = 0; kvh < t.c.n_kv_heads; ++kvh)
      ref::PromptAttention(formula, q_.data(), stride_, f_->shape, f_->kv, f_->table, FirstCtx(), n, kvh, y.data(),
                           stride_);
    // bf16 queries, keys, values and weights: each ~3 significant digits, so a token's output is off the f32 one by
    // up to a few hundredths of its values' spread (here ~1).
    double worst = 0;
    for (int i = 0; i < n; ++i) {
      const std::vector<float> f32 = Alone(i);
      for (int64_t e = 0; e < width_; ++e)
        worst = std::max(worst, static_cast<double>(std::abs(y[static_cast<size_t>(i * stride_ + e)] -
                                                             f32[static_cast<size_t>(e)])));
    }
    EXPECT_LT(worst, 0.05) << (formula == PromptFormula::kTiles ? "tiles" : "pairs");  // seen: 0.006-0.024
    if (formula == PromptFormulaHere()) twin = y;
  }
  if (!PromptAttentionCovers(f_->shape)) GTEST_SKIP() << "no AMX-BF16 or AVX512-BF16 here: the twins alone are checked";
  std::vector<float> whole(q_.size(), NAN);
  for (int kvh = 0; kvh < t.c.n_kv_heads; ++kvh) Kernel(0, n, kvh, whole);
  for (size_t i = 0; i < whole.size(); ++i) {
    if (std::isnan(twin[i])) continue;  // the padding between rows
    ASSERT_EQ(whole[i], twin[i]) << "element " << i;
  }
  EXPECT_EQ(std::memcmp(whole.data(), twin.data(), whole.size() * sizeof(float)), 0);  // NaN padding alike
  std::vector<float> runs(q_.size(), NAN);
  for (int i0 = 0, len = 1; i0 < n; i0 += len, len += 5)
    for (int kvh = 0; kvh < t.c.n_kv_heads; ++kvh) Kernel(i0, std::min(len, n - i0), kvh, runs);
  EXPECT_EQ(std::memcmp(runs.data(), whole.data(), runs.size() * sizeof(float)), 0);
}

INSTANTIATE_TEST_SUITE_P(
    Prompts, PromptAttentionTest,
    ::testing::Values(
        // The 0.5B shape: a whole prompt, chunks later in a context (a cached prefix), ends on and off tile, chunk and
        // block edges, one token alone.
        TokensCase{Case{14, 2, 64, 16, 300}, 300}, TokensCase{Case{14, 2, 64, 16, 300}, 37},
        TokensCase{Case{14, 2, 64, 16, 17}, 2}, TokensCase{Case{14, 2, 64, 32, 129}, 33},
        TokensCase{Case{14, 2, 64, 16, 64}, 1}, TokensCase{Case{14, 2, 64, 16, 33}, 33},
        // Other groups and head dims (Llama 3B / Qwen3: 128; Phi-3: 96; Gemma: 256), odd block sizes.
        TokensCase{Case{8, 1, 64, 3, 33}, 9}, TokensCase{Case{4, 2, 128, 16, 70}, 19},
        TokensCase{Case{8, 2, 96, 5, 50}, 50}, TokensCase{Case{2, 1, 256, 16, 45}, 20},
        TokensCase{Case{4, 4, 32, 16, 20}, 20},
        // 16-bit and int8 keys and values.
        TokensCase{Case{14, 2, 64, 16, 40}, 40, KvDtype::kBf16},
        TokensCase{Case{4, 2, 128, 16, 70}, 19, KvDtype::kF16},
        TokensCase{Case{14, 2, 64, 16, 40}, 40, KvDtype::kInt8},
        TokensCase{Case{4, 2, 128, 16, 70}, 19, KvDtype::kInt8},
        TokensCase{Case{8, 2, 96, 5, 50}, 31, KvDtype::kBf16}),
    TokensCaseName);

// PromptAttention runs only within the kernel path in use: a path without AVX-512 (PARALLM_ISA=avx2, or scalar under
// valgrind) takes neither bf16 formula, whatever the CPU has.
TEST(PromptFormulaTest, FollowsTheKernelPath) {
  const IsaPath best = ActiveIsa();
  for (IsaPath isa : {IsaPath::kScalar, IsaPath::kAvx2}) {
    if (!IsIsaSupported(isa)) continue;
    ForceIsa(isa);
    EXPECT_EQ(PromptFormulaHere(), PromptFormula::kNone) << IsaName(isa);
    EXPECT_FALSE(PromptAttentionCovers(AttentionShape{14, 2, 64, 0.125f}));
  }
  ForceIsa(best);
  if (best == IsaPath::kAvx512 && HasAvx512Bf16()) {
    EXPECT_EQ(PromptFormulaHere(), PromptFormula::kPairs);
  }
  if (best == IsaPath::kAmx && HasAmxBf16()) {
    EXPECT_EQ(PromptFormulaHere(), PromptFormula::kTiles);
  }
}

// A window covers exactly the last `window` positions: keys and values before it may hold anything (here NaN) without
// changing a bit of the result, and a window of at least n_ctx is the same as none.
TEST(PagedAttentionWindowTest, ReadsOnlyTheWindow) {
  const Case c{8, 2, 64, 16, 100, 30};
  Fixture f(c);
  ForEachWidth([&] {
    const std::vector<float> windowed = f.Run(0, c.n_kv_heads, std::vector<float>(f.q.size()));
    Fixture poisoned(c);
    const int64_t stride = poisoned.kv.slot_stride;
    for (int64_t j = 0; j < c.n_ctx - c.window; ++j) {
      const int64_t slot = static_cast<int64_t>(poisoned.table[static_cast<size_t>(j / c.block_size)]) * c.block_size +
                           j % c.block_size;
      std::fill_n(poisoned.keys.data() + slot * stride, stride, NAN);
      std::fill_n(poisoned.values.data() + slot * stride, stride, NAN);
    }
    EXPECT_EQ(poisoned.Run(0, c.n_kv_heads, std::vector<float>(f.q.size())), windowed);

    Fixture wide(Case{8, 2, 64, 16, 100, 100}), none(Case{8, 2, 64, 16, 100, 0});
    EXPECT_EQ(wide.Run(0, c.n_kv_heads, std::vector<float>(f.q.size())),
              none.Run(0, c.n_kv_heads, std::vector<float>(f.q.size())));
    // And the window matters: the same context without it gives other values.
    EXPECT_NE(none.Run(0, c.n_kv_heads, std::vector<float>(f.q.size())), windowed);
  });
}

}  // namespace
}  // namespace parallm
