// MatMul on every weight type and every kernel path this CPU supports:
// - fast == ref::MatMul bit for bit on the int8 path (both follow matmul_internal.h's formula), and to f32
//   rounding on the float path;
// - both within the int8 activation-quantization bound of an f32 dot of the dequantized weights;
// - batch invariance: each token of a 37-token batch equals that token computed alone, bit for bit;
// - ragged shapes, y_stride > rows (padding untouched), no pool vs a 2-thread pool identical.
#include "kernels/matmul.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

#include "kernels/cpu_features.h"
#include "kernels/matmul_internal.h"
#include "kernels/ops.h"
#include "tensor/mlx_affine.h"
#include "tensor/quant.h"

namespace parallm {
namespace {

// A weight type: a dense DType, or MLX affine with bits / group / scale type.
struct WType {
  WType(DType t) : dtype(t) {}
  WType(DType t, bool m, MlxAffineParams params) : dtype(t), mlx(m), p(params) {}
  DType dtype;
  bool mlx = false;
  MlxAffineParams p;
  std::string Name() const {
    if (!mlx) return std::string(parallm::Name(dtype));
    return "mlx" + std::to_string(p.bits) + "g" + std::to_string(p.group_size) + "_" + std::string(parallm::Name(dtype));
  }
  int64_t ColAlign() const {
    if (mlx) return p.group_size;
    if (dtype == DType::kQ4_K || dtype == DType::kQ6_K) return 256;
    if (dtype == DType::kQ8_0 || dtype == DType::kQ4_0) return 32;
    return 1;
  }
  bool Quantized() const { return mlx || !Info(dtype).is_float; }
};

std::vector<WType> AllTypes() {
  std::vector<WType> v;
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ6_K})
    v.push_back(WType(t));
  for (int bits : {2, 3, 4, 5, 6, 8})
    for (int g : {32, 64, 128}) v.push_back({DType::kF16, true, {bits, g}});
  v.push_back({DType::kBF16, true, {4, 64}});
  v.push_back({DType::kF32, true, {8, 32}});
  v.push_back({DType::kBF16, true, {3, 128}});
  return v;
}

// Owns a weight matrix's bytes and the view over them.
struct Weights {
  std::vector<uint8_t> data, scales, biases;
  MatrixView view;
};

Weights MakeWeights(const WType& t, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 0.5f);
  std::vector<float> row(static_cast<size_t>(cols));
  Weights w;
  MatrixView& v = w.view;
  v.rows = rows;
  v.cols = cols;
  v.dtype = t.dtype;
  if (!t.mlx) {
    v.row_bytes = RowBytes(t.dtype, cols);
    w.data.resize(v.row_bytes * rows);
    for (int64_t r = 0; r < rows; ++r) {
      for (float& x : row) x = dist(rng) * (1.0f + r % 5);
      QuantizeRow(t.dtype, row.data(), w.data.data() + r * v.row_bytes, cols);
    }
  } else {
    v.kind = MatrixView::Kind::kMlxAffine;
    v.mlx = t.p;
    v.row_bytes = static_cast<size_t>(cols * t.p.bits / 8);
    size_t sb = Info(t.dtype).block_bytes, groups = static_cast<size_t>(cols / t.p.group_size);
    w.data.resize(v.row_bytes * rows);
    w.scales.resize(sb * groups * rows);
    w.biases.resize(sb * groups * rows);
    for (int64_t r = 0; r < rows; ++r) {
      for (float& x : row) x = dist(rng) + 0.3f * (r % 3);  // biased rows exercise the bias term
      MlxQuantizeRow(t.p, row.data(), cols, t.dtype, reinterpret_cast<uint32_t*>(w.data.data() + r * v.row_bytes),
                     w.scales.data() + r * groups * sb, w.biases.data() + r * groups * sb);
    }
    v.scales = w.scales.data();
    v.biases = w.biases.data();
  }
  v.data = w.data.data();
  return w;
}

std::vector<float> MakeActs(int64_t n_tokens, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n_tokens * cols));
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int64_t c = 0; c < cols; ++c) x[t * cols + c] = dist(rng) * (1.0f + (t % 4)) + (c % 97 == 0 ? 4.0f : 0.0f);
  return x;
}

std::vector<IsaPath> FastPaths() {
  std::vector<IsaPath> v;
  for (IsaPath p : {IsaPath::kAvx2, IsaPath::kAvxVnni, IsaPath::kAvx512, IsaPath::kNeon, IsaPath::kAmx})
    if (IsIsaSupported(p)) v.push_back(p);
  return v;
}

// Restores the process's kernel path after a test forces one.
class MatMulTest : public ::testing::Test {
 protected:
  void TearDown() override { ForceIsa(BestSupportedIsa()); }
};

bool BitEqual(float a, float b) { return std::memcmp(&a, &b, 4) == 0; }

// Checks y against an f32 dot of dequantized weights and unquantized activations. Quantized weights:
// each activation block is rounded to steps of dx = amax/127, so |error| <= sum_b (dx_b / 2) * sum_{i in b} |w_i|,
// plus f32 rounding. Float weights: f32 rounding only.
void ExpectNearExact(const Weights& w, const WType& t, const float* x, int64_t n_tokens, const float* y,
                     int64_t y_stride, const std::string& what) {
  const int64_t cols = w.view.cols;
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < w.view.rows; ++r) {
    DequantizeMatrixRow(w.view, r, row.data());
    for (int64_t t_ = 0; t_ < n_tokens; ++t_) {
      const float* xt = x + t_ * cols;
      double exact = 0, mag = 0, bound = 0;
      for (int64_t c = 0; c < cols; ++c) {
        exact += static_cast<double>(row[c]) * xt[c];
        mag += std::fabs(static_cast<double>(row[c]) * xt[c]);
      }
      if (t.Quantized()) {
        for (int64_t b = 0; b < cols / 32; ++b) {
          double amax = 0, wsum = 0;
          for (int i = 0; i < 32; ++i) {
            amax = std::max(amax, std::fabs(static_cast<double>(xt[b * 32 + i])));
            wsum += std::fabs(row[b * 32 + i]);
          }
          bound += amax / 127 / 2 * wsum;
        }
      }
      bound += 1e-5 * mag + 1e-6;
      ASSERT_NEAR(y[t_ * y_stride + r], exact, bound) << what << " r " << r << " t " << t_;
    }
  }
}

// All checks for one type on one shape, on every supported fast path.
void CheckShape(const WType& t, int64_t rows, int64_t cols, int64_t n_tokens, uint32_t seed) {
  Weights w = MakeWeights(t, rows, cols, seed);
  std::vector<float> x = MakeActs(n_tokens, cols, seed + 1);
  const int64_t y_stride = rows + 3;
  const float kSentinel = -12345.0f;
  std::vector<float> y_ref(n_tokens * y_stride, kSentinel);
  ref::MatMul(w.view, x.data(), n_tokens, y_ref.data(), y_stride, nullptr);
  std::string shape = t.Name() + " " + std::to_string(rows) + "x" + std::to_string(cols) + " n=" + std::to_string(n_tokens);
  ExpectNearExact(w, t, x.data(), n_tokens, y_ref.data(), y_stride, "ref " + shape);

  ThreadPool pool(2);
  for (IsaPath isa : FastPaths()) {
    ForceIsa(isa);
    std::string what = std::string(IsaName(isa)) + " " + shape;
    std::vector<float> y(n_tokens * y_stride, kSentinel), y_pool(n_tokens * y_stride, kSentinel);
    MatMul(w.view, x.data(), n_tokens, y.data(), y_stride, nullptr);
    MatMul(w.view, x.data(), n_tokens, y_pool.data(), y_stride, &pool);
    for (int64_t i = 0; i < n_tokens * y_stride; ++i) {
      ASSERT_TRUE(BitEqual(y[i], y_pool[i])) << what << " pool differs at " << i;
      if (i % y_stride >= rows) {
        ASSERT_EQ(y[i], kSentinel) << what << " wrote padding at " << i;
      }
    }
    for (int64_t t_ = 0; t_ < n_tokens; ++t_) {
      for (int64_t r = 0; r < rows; ++r) {
        float a = y[t_ * y_stride + r], b = y_ref[t_ * y_stride + r];
        if (t.Quantized()) {
          ASSERT_TRUE(BitEqual(a, b)) << what << " vs ref r " << r << " t " << t_ << ": " << a << " vs " << b;
        } else {
          double mag = 0;
          std::vector<float> row(cols);
          DequantizeMatrixRow(w.view, r, row.data());
          for (int64_t c = 0; c < cols; ++c) mag += std::fabs(row[c] * x[t_ * cols + c]);
          ASSERT_NEAR(a, b, 1e-5 * mag + 1e-6) << what << " vs ref r " << r << " t " << t_;
        }
      }
    }
    ExpectNearExact(w, t, x.data(), n_tokens, y.data(), y_stride, what);
  }
}

TEST_F(MatMulTest, EveryTypeEveryPathRaggedShapes) {
  for (const WType& t : AllTypes()) {
    const int64_t a = std::max<int64_t>(t.ColAlign(), 32);
    CheckShape(t, 37, a * 2, 5, 1);
    CheckShape(t, 16, a, 1, 2);
    if (t.ColAlign() <= 64) CheckShape(t, 9, a * 3, 17, 3);  // odd block counts, rows < one group
    if (HasFailure()) return;
  }
}

TEST_F(MatMulTest, FloatColsNotMultipleOfVector) {
  for (DType dt : {DType::kF32, DType::kF16, DType::kBF16}) {
    CheckShape({dt}, 21, 37, 3, 4);
    CheckShape({dt}, 5, 7, 11, 5);
    CheckShape({dt}, 33, 1, 2, 6);
  }
}

// Token t of a 37-token batch equals token t computed alone (and inside a batch of different tokens),
// bit for bit, on every path.
TEST_F(MatMulTest, BatchInvariance) {
  const int64_t n = 37;
  ThreadPool pool(2);
  std::vector<IsaPath> paths = FastPaths();
  paths.push_back(IsaPath::kScalar);
  for (const WType& t : AllTypes()) {
    const int64_t cols = std::max<int64_t>(t.ColAlign(), 32) * (t.ColAlign() >= 256 ? 1 : 4) + (t.ColAlign() == 1 ? 5 : 0);
    const int64_t rows = 45;
    Weights w = MakeWeights(t, rows, cols, 21);
    std::vector<float> x = MakeActs(n, cols, 22);
    for (IsaPath isa : paths) {
      ForceIsa(isa);
      std::vector<float> y(n * rows), y1(rows), y_sub(n * rows);
      MatMul(w.view, x.data(), n, y.data(), rows, &pool);
      for (int64_t t_ = 0; t_ < n; ++t_) {
        MatMul(w.view, x.data() + t_ * cols, 1, y1.data(), rows, nullptr);
        for (int64_t r = 0; r < rows; ++r)
          ASSERT_TRUE(BitEqual(y[t_ * rows + r], y1[r])) << t.Name() << " " << IsaName(isa) << " t " << t_ << " r " << r;
      }
      // Tokens 3.. as their own batch of 34 (a different tile split).
      MatMul(w.view, x.data() + 3 * cols, n - 3, y_sub.data(), rows, nullptr);
      for (int64_t i = 0; i < (n - 3) * rows; ++i)
        ASSERT_TRUE(BitEqual(y[3 * rows + i], y_sub[i])) << t.Name() << " " << IsaName(isa) << " offset batch at " << i;
    }
  }
}

TEST_F(MatMulTest, LargerShapeMatchesRef) {
  // A few hundred rows and a deep reduction, as in a model, with the pool.
  for (DType dt : {DType::kQ8_0, DType::kQ4_K, DType::kQ6_K, DType::kBF16}) CheckShape({dt}, 200, 1024, 9, 7);
  CheckShape({DType::kF16, true, {4, 64}}, 200, 1024, 9, 8);
}

TEST_F(MatMulTest, ManyTokensSpanTokenBlocks) {
  // More tokens than one panel pass (256): the token-block loop and its accumulators.
  CheckShape(WType(DType::kQ8_0), 21, 64, 300, 10);
  CheckShape(WType(DType::kQ6_K), 9, 256, 260, 11);
  CheckShape(WType(DType::kF16), 5, 40, 270, 12);
}

// A copy of `bytes` that ends exactly at an inaccessible page, so any read past the end faults.
class GuardedCopy {
 public:
  explicit GuardedCopy(const std::vector<uint8_t>& bytes) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    size_ = (bytes.size() + page - 1) / page * page + page;
    void* m = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(m, MAP_FAILED);
    base_ = static_cast<uint8_t*>(m);
    EXPECT_EQ(mprotect(base_ + size_ - page, page, PROT_NONE), 0);
    data_ = base_ + size_ - page - bytes.size();
    if (!bytes.empty()) std::memcpy(data_, bytes.data(), bytes.size());
  }
  ~GuardedCopy() { munmap(base_, size_); }
  GuardedCopy(const GuardedCopy&) = delete;
  GuardedCopy& operator=(const GuardedCopy&) = delete;
  const uint8_t* data() const { return data_; }

 private:
  uint8_t* base_ = nullptr;
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// The kernels' wide loads and gathers must stay inside the weight bytes, scales and biases: each is placed
// against a guard page (a read past the last row's last block faults). The results must not change.
TEST_F(MatMulTest, NoReadsPastTheEnd) {
  for (const WType& t : AllTypes()) {
    const int64_t cols = std::max<int64_t>(t.ColAlign(), 32) + (t.ColAlign() == 1 ? 3 : 0);
    for (int64_t rows : {16, 19}) {
      Weights w = MakeWeights(t, rows, cols, 31);
      GuardedCopy data(w.data), scales(w.scales), biases(w.biases);
      MatrixView v = w.view;
      v.data = data.data();
      if (t.mlx) {
        v.scales = scales.data();
        v.biases = biases.data();
      }
      std::vector<float> x = MakeActs(3, cols, 32), y_ref(3 * rows), y(3 * rows);
      ref::MatMul(v, x.data(), 3, y_ref.data(), rows, nullptr);
      for (IsaPath isa : FastPaths()) {
        ForceIsa(isa);
        MatMul(v, x.data(), 3, y.data(), rows, nullptr);
        if (t.Quantized()) {
          for (int64_t i = 0; i < 3 * rows; ++i) ASSERT_TRUE(BitEqual(y[i], y_ref[i])) << t.Name() << " " << IsaName(isa);
        }
      }
    }
  }
}

// Weights repacked at load (RepackForKernels, for the path in use): on that path MatMul reads the packed copy,
// on every other forced path it ignores it; either way every output equals ref::MatMul bit for bit, and a
// token computed alone equals it inside a batch. Each path with a packer packs its own copy, which every path
// then reads. Ragged rows (< and not a multiple of a row group), odd
// block counts, one token, a full register tile and more tokens than a panel pass; two row groups a tile (the
// AVX-512 path from 6 tokens) with an odd group left over, over several column chunks.
TEST_F(MatMulTest, RepackedEqualsRefEveryPath) {
  ThreadPool pool(2);
  std::vector<IsaPath> paths = FastPaths();
  paths.push_back(IsaPath::kScalar);
  int packed_count = 0;
  for (const WType& t : AllTypes()) {
    if (!t.Quantized()) continue;
    const int64_t a = std::max<int64_t>(t.ColAlign(), 32);
    struct Shape {
      int64_t rows, cols, n;
    };
    // The last: two-group tiles, enough token tiles for Q4_K's parameters expanded once per chunk, two chunks.
    std::vector<Shape> shapes = {{37, a * 2, 5}, {16, a, 1}, {45, a * 5, 9}, {53, a * 5, 19}};
    if (t.ColAlign() <= 64) {
      shapes.push_back({9, a * 3, 17});
      shapes.push_back({21, a * 33, 3});  // more than one 32-block panel chunk, ragged last chunk
      shapes.push_back({53, a * 33, 13});  // the same through two-group tiles (a pair, a ragged pair), ragged tokens
    }
    if (t.dtype == DType::kQ8_0 && !t.mlx) shapes.push_back({21, 64, 300});
    for (const Shape& sh : shapes) {
      Weights w = MakeWeights(t, sh.rows, sh.cols, 41);
      std::vector<float> x = MakeActs(sh.n, sh.cols, 42);
      std::vector<float> y_ref(sh.n * sh.rows), y(sh.n * sh.rows), y1(sh.rows);
      ref::MatMul(w.view, x.data(), sh.n, y_ref.data(), sh.rows, nullptr);
      for (IsaPath packer : paths) {
        ForceIsa(packer);
        MatrixView v = w.view;
        size_t bytes = 0;
        auto owner = RepackForKernels(&v, &bytes);
        if (owner) ++packed_count;
        if (!owner && packer != paths[0]) continue;  // nothing packed: the first pass ran every path unpacked
        for (IsaPath isa : paths) {
          ForceIsa(isa);
          const std::string what = t.Name() + " " + std::string(IsaName(isa)) + " " + std::to_string(sh.rows) + "x" +
                                   std::to_string(sh.cols) + " n=" + std::to_string(sh.n) + " packed for " +
                                   (owner ? std::string(IsaName(packer)) : std::string("none"));
          for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
            std::fill(y.begin(), y.end(), -1.0f);
            MatMul(v, x.data(), sh.n, y.data(), sh.rows, p);
            for (int64_t i = 0; i < sh.n * sh.rows; ++i)
              ASSERT_TRUE(BitEqual(y[i], y_ref[i])) << what << " at " << i << ": " << y[i] << " vs " << y_ref[i];
          }
          const int64_t t_ = sh.n - 1;
          MatMul(v, x.data() + t_ * sh.cols, 1, y1.data(), sh.rows, nullptr);
          for (int64_t r = 0; r < sh.rows; ++r)
            ASSERT_TRUE(BitEqual(y1[r], y_ref[t_ * sh.rows + r])) << what << " alone r " << r;
        }
      }
    }
  }
  ForceIsa(BestSupportedIsa());
  if (BestSupportedIsa() != IsaPath::kScalar) {
    EXPECT_GT(packed_count, 0);
  }
}

// MatMulArgMax (greedy decoding's LM head, a chunk of rows at a time): on every path, packed or not, on one thread and
// two, each token's pick equals ArgMax over MatMul's row, through several chunks and tasks (2,900 rows), with and
// without a soft-cap; and with the first token's winning row copied to a lower row and to the last one (GGML types),
// the tie goes to the lower row across chunks and tasks.
TEST_F(MatMulTest, ArgMaxEqualsArgMaxOfTheOutputs) {
  ThreadPool pool(2);
  std::vector<IsaPath> paths = FastPaths();
  paths.push_back(IsaPath::kScalar);
  const int64_t rows = 2900;
  for (const WType& t : AllTypes()) {
    const int64_t cols = std::max<int64_t>(t.ColAlign(), 32) * 2;
    std::vector<int64_t> token_counts = {1, 7, 64};
    if (t.dtype == DType::kQ8_0 && !t.mlx) token_counts.push_back(300);
    for (int64_t n : token_counts) {
      for (bool ties : {false, true}) {
        if (ties && (t.mlx || !t.Quantized())) continue;
        Weights w = MakeWeights(t, rows, cols, 51);
        const std::vector<float> x = MakeActs(n, cols, 52);
        std::vector<float> y(static_cast<size_t>(n * rows));
        if (ties) {
          ref::MatMul(w.view, x.data(), 1, y.data(), rows, nullptr);
          const int64_t win = ArgMax(std::span<const float>(y.data(), static_cast<size_t>(rows)));
          for (int64_t to : {win / 2, rows - 1})
            std::memcpy(w.data.data() + to * w.view.row_bytes, w.data.data() + win * w.view.row_bytes, w.view.row_bytes);
        }
        MatrixView v = w.view;
        const auto owner = RepackForKernels(&v, nullptr);
        for (IsaPath isa : paths) {
          ForceIsa(isa);
          for (float softcap : {0.0f, 3.0f}) {
            MatMul(v, x.data(), n, y.data(), rows, nullptr);
            std::vector<int32_t> want(static_cast<size_t>(n)), got(static_cast<size_t>(n), -1);
            for (int64_t i = 0; i < n; ++i) {
              float* row = y.data() + i * rows;
              if (softcap > 0) SoftCap(row, rows, softcap);
              want[static_cast<size_t>(i)] = ArgMax(std::span<const float>(row, static_cast<size_t>(rows)));
            }
            for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
              MatMulArgMax(v, x.data(), n, softcap, got.data(), p);
              EXPECT_EQ(got, want) << t.Name() << " " << IsaName(isa) << " n=" << n << " softcap " << softcap
                                   << (ties ? " ties" : "") << (p ? " 2 threads" : "");
            }
          }
        }
      }
    }
  }
}

// MatMulGated: act(gate x) * (up x) equal bit for bit to MatMulMulti({gate, up}) and act over each token's row, for
// every type, path (packed or not), both activations, 1 and 2 threads, token counts across the chunk sizes, a ragged
// last row group and a wider y; and for a gate and an up in different formats (two activation formats).
TEST_F(MatMulTest, GatedEqualsTheActivationOfTheTwoProducts) {
  ThreadPool pool(2);
  std::vector<IsaPath> paths = FastPaths();
  paths.push_back(IsaPath::kScalar);
  const int64_t rows = 1000, stride = rows + 5;
  std::vector<std::pair<WType, WType>> pairs;
  for (const WType& t : AllTypes()) pairs.emplace_back(t, t);
  pairs.emplace_back(WType(DType::kQ8_0), WType(DType::kQ4_K));
  for (const auto& [tg, tu] : pairs) {
    const int64_t cols = std::max<int64_t>({tg.ColAlign(), tu.ColAlign(), 32}) * 2;
    std::vector<int64_t> token_counts = {1, 7, 64};
    if (tg.dtype == DType::kQ8_0 && !tg.mlx) token_counts.push_back(300);
    Weights wg = MakeWeights(tg, rows, cols, 61), wu = MakeWeights(tu, rows, cols, 62);
    MatrixView vg = wg.view, vu = wu.view;
    const auto og = RepackForKernels(&vg, nullptr), ou = RepackForKernels(&vu, nullptr);
    for (int64_t n : token_counts) {
      const std::vector<float> x = MakeActs(n, cols, 63);
      for (IsaPath isa : paths) {
        ForceIsa(isa);
        for (ActMulFn act : {&SiluMul, &GeluTanhMul}) {
          std::vector<float> want(static_cast<size_t>(n * stride), 7.0f), up(static_cast<size_t>(n * rows));
          const MatMulOut outs[] = {{&vg, want.data(), stride}, {&vu, up.data(), rows}};
          MatMulMulti(outs, x.data(), n, nullptr);
          for (int64_t i = 0; i < n; ++i) act(want.data() + i * stride, up.data() + i * rows, rows, want.data() + i * stride);
          for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
            std::vector<float> got(want.size(), 7.0f);
            MatMulGated(vg, vu, act, x.data(), n, got.data(), stride, p);
            EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
                << tg.Name() << "/" << tu.Name() << " " << IsaName(isa) << " n=" << n
                << (act == &SiluMul ? " silu" : " gelu") << (p ? " 2 threads" : "");
          }
        }
      }
    }
  }
}

// RepackAllForKernels: every matrix packed as RepackForKernels packs it alone (the same bytes), the copies under
// 1 MiB one after another in one shared mapping (64-byte aligned, in the matrices' order), a larger one in a mapping
// of its own, float matrices left alone; MatMul on each quantized one equals ref::MatMul bit for bit, on one thread
// and on two.
TEST_F(MatMulTest, RepackAllSharesOneMappingForSmallCopies) {
  ThreadPool pool(2);
  const WType q4k(DType::kQ4_K), q8(DType::kQ8_0), f32(DType::kF32);
  struct Spec {
    WType t;
    int64_t rows, cols;
  };
  // Small Q4_K and Q8_0 copies (experts, K/V projections), a float matrix, and one over 1 MiB (2048 x 1024 Q8_0).
  const std::vector<Spec> specs = {{q4k, 48, 256}, {q8, 37, 64}, {f32, 16, 64}, {q8, 2048, 1024}, {q4k, 21, 512}};
  std::vector<Weights> ws;
  std::vector<MatrixView> alone, together;
  for (size_t i = 0; i < specs.size(); ++i) {
    ws.push_back(MakeWeights(specs[i].t, specs[i].rows, specs[i].cols, 90 + static_cast<int>(i)));
    alone.push_back(ws.back().view);
    together.push_back(ws.back().view);
  }
  std::vector<std::shared_ptr<uint8_t[]>> alone_owners;
  std::vector<size_t> alone_bytes(specs.size(), 0);
  for (size_t i = 0; i < specs.size(); ++i) alone_owners.push_back(RepackForKernels(&alone[i], &alone_bytes[i]));
  std::vector<MatrixView*> mats;
  for (MatrixView& v : together) mats.push_back(&v);
  for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
    for (MatrixView& v : together) v.packed = nullptr;
    size_t bytes = 0;
    const auto owners = RepackAllForKernels(mats, p, &bytes);
    if (alone_owners[0] == nullptr) {  // this path repacks nothing: nothing to share
      EXPECT_TRUE(owners.empty());
      continue;
    }
    EXPECT_EQ(owners.size(), 2u);  // the shared mapping and the large matrix's own
    EXPECT_GT(bytes, alone_bytes[3]);
    EXPECT_EQ(together[2].packed, nullptr);  // float weights are not repacked
    const uint8_t* base = together[0].packed;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(base) % 64, 0u);
    size_t offset = 0;
    for (size_t i : {0u, 1u, 4u}) {  // the small ones, in order
      ASSERT_EQ(together[i].packed, base + offset) << i;
      const size_t n = alone_bytes[i] - 64;  // RepackForKernels allocates 64 bytes of alignment slack on the heap
      EXPECT_EQ(std::memcmp(together[i].packed, alone[i].packed, n), 0) << i;
      offset += (n + 63) & ~size_t{63};
    }
    EXPECT_TRUE(together[3].packed < base || together[3].packed >= base + offset);
    for (size_t i : {0u, 1u, 3u, 4u}) {
      const int64_t n_tok = 5, rows = specs[i].rows, cols = specs[i].cols;
      std::vector<float> x = MakeActs(n_tok, cols, 99), y_ref(n_tok * rows), y(n_tok * rows);
      ref::MatMul(ws[i].view, x.data(), n_tok, y_ref.data(), rows, nullptr);
      MatMul(together[i], x.data(), n_tok, y.data(), rows, p);
      for (int64_t j = 0; j < n_tok * rows; ++j) ASSERT_TRUE(BitEqual(y[j], y_ref[j])) << i << " at " << j;
    }
  }
}

// The AMX path (tiles of 16 tokens x 16 rows over the AVX-512 packed panels) on the shapes its loop nest splits
// on: full token tiles only, full + ragged, ragged only (under 16 tokens), 1, 2, odd and even block counts (its
// pipeline runs the tails two blocks at a time), ragged row groups, nibble-packed and biased formats; bit for bit
// against the twin, with and without the pool, and each token alone (which runs the AVX-512 kernel) equals it
// inside the batch.
TEST_F(MatMulTest, AmxTilesEqualRef) {
  if (!IsIsaSupported(IsaPath::kAmx)) GTEST_SKIP() << "no AMX on this CPU/OS";
  ThreadPool pool(2);
  const std::vector<WType> types = {WType(DType::kQ8_0), WType(DType::kQ4_0), WType(DType::kQ4_K),
                                    WType(DType::kF16, true, {8, 64}), WType(DType::kF16, true, {4, 64}),
                                    WType(DType::kBF16, true, {4, 32}), WType(DType::kQ6_K)};
  for (const WType& t : types) {
    const int64_t a = t.ColAlign();
    for (int64_t cols : {a, a * 2, a * 7, a * 8}) {
      if (cols % 32 != 0) continue;
      for (int64_t rows : {16, 45}) {
        Weights w = MakeWeights(t, rows, cols, 71);
        MatrixView v = w.view;
        auto owner = RepackForKernels(&v, nullptr);
        ASSERT_TRUE(owner != nullptr) << t.Name();
        for (int64_t n : {8, 12, 15, 16, 32, 37, 64}) {
          std::vector<float> x = MakeActs(n, cols, 72), y_ref(n * rows), y(n * rows), y1(rows);
          ref::MatMul(w.view, x.data(), n, y_ref.data(), rows, nullptr);
          ForceIsa(IsaPath::kAmx);
          const std::string what = t.Name() + " " + std::to_string(rows) + "x" + std::to_string(cols) + " n=" +
                                   std::to_string(n);
          for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
            std::fill(y.begin(), y.end(), -1.0f);
            MatMul(v, x.data(), n, y.data(), rows, p);
            for (int64_t i = 0; i < n * rows; ++i)
              ASSERT_TRUE(BitEqual(y[i], y_ref[i])) << what << " at " << i << ": " << y[i] << " vs " << y_ref[i];
          }
          MatMul(v, x.data() + (n - 1) * cols, 1, y1.data(), rows, nullptr);
          for (int64_t r = 0; r < rows; ++r) ASSERT_TRUE(BitEqual(y1[r], y_ref[(n - 1) * rows + r])) << what;
        }
      }
    }
  }
}

// MatMulMulti == one MatMul per matrix, bit for bit, with mixed formats (so several activation
// quantizations), packed and unpacked, strided outputs, on every path.
TEST_F(MatMulTest, MultiEqualsSeparate) {
  ThreadPool pool(2);
  const int64_t cols = 512, n = 11;
  std::vector<WType> types = {WType(DType::kQ8_0), WType(DType::kQ6_K), WType(DType::kQ4_K),
                              WType(DType::kF16), WType(DType::kF16, true, {4, 64}), WType(DType::kQ4_0)};
  std::vector<Weights> ws;
  std::vector<int64_t> rows = {37, 16, 70, 9, 33, 128};
  for (size_t i = 0; i < types.size(); ++i) ws.push_back(MakeWeights(types[i], rows[i], cols, 50 + i));
  std::vector<MatrixView> views;
  std::vector<std::shared_ptr<uint8_t[]>> owners;
  for (size_t i = 0; i < ws.size(); ++i) {
    views.push_back(ws[i].view);
    if (i % 2 == 0) owners.push_back(RepackForKernels(&views.back(), nullptr));
  }
  std::vector<float> x = MakeActs(n, cols, 60);
  std::vector<IsaPath> paths = FastPaths();
  paths.push_back(IsaPath::kScalar);
  for (IsaPath isa : paths) {
    ForceIsa(isa);
    std::vector<std::vector<float>> sep(views.size()), multi(views.size());
    std::vector<MatMulOut> outs;
    for (size_t i = 0; i < views.size(); ++i) {
      const int64_t stride = views[i].rows + 2;
      sep[i].assign(n * stride, 7.0f);
      multi[i].assign(n * stride, 7.0f);
      MatMul(views[i], x.data(), n, sep[i].data(), stride, nullptr);
      outs.push_back({&views[i], multi[i].data(), stride});
    }
    MatMulMulti(outs, x.data(), n, &pool);
    for (size_t i = 0; i < views.size(); ++i)
      for (size_t j = 0; j < sep[i].size(); ++j)
        ASSERT_TRUE(BitEqual(sep[i][j], multi[i][j])) << IsaName(isa) << " matrix " << i << " at " << j;
  }
}

// MatMulGrouped == one MatMul per product over its own rows, bit for bit: products over different row ranges
// (as a mixture-of-experts layer's experts over their token groups: one row, several, none), mixed formats, packed
// and unpacked, float weights among them, on every path.
TEST_F(MatMulTest, GroupedEqualsSeparate) {
  ThreadPool pool(2);
  const int64_t cols = 256, x_rows = 13;
  std::vector<WType> types = {WType(DType::kQ4_K), WType(DType::kQ4_K), WType(DType::kQ8_0),
                              WType(DType::kF32),  WType(DType::kQ4_0), WType(DType::kF16, true, {4, 64})};
  const std::vector<int64_t> rows = {48, 33, 16, 9, 64, 20};
  const std::vector<std::pair<int64_t, int64_t>> ranges = {{0, 1}, {1, 5}, {6, 0}, {6, 2}, {8, 5}, {0, 13}};
  std::vector<Weights> ws;
  for (size_t i = 0; i < types.size(); ++i) ws.push_back(MakeWeights(types[i], rows[i], cols, 80 + i));
  std::vector<MatrixView> views;
  std::vector<std::shared_ptr<uint8_t[]>> owners;
  for (size_t i = 0; i < ws.size(); ++i) {
    views.push_back(ws[i].view);
    if (i % 2 == 1) owners.push_back(RepackForKernels(&views.back(), nullptr));
  }
  std::vector<float> x = MakeActs(x_rows, cols, 90);
  std::vector<IsaPath> paths = FastPaths();
  paths.push_back(IsaPath::kScalar);
  for (IsaPath isa : paths) {
    ForceIsa(isa);
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
      std::vector<std::vector<float>> sep(views.size()), grouped(views.size());
      std::vector<MatMulGroupOut> outs;
      for (size_t i = 0; i < views.size(); ++i) {
        const auto [begin, n] = ranges[i];
        const int64_t stride = views[i].rows + 1;
        sep[i].assign(std::max<int64_t>(n, 1) * stride, 7.0f);
        grouped[i].assign(std::max<int64_t>(n, 1) * stride, 7.0f);
        if (n > 0) MatMul(views[i], x.data() + begin * cols, n, sep[i].data(), stride, nullptr);
        outs.push_back({&views[i], begin, n, grouped[i].data(), stride});
      }
      MatMulGrouped(outs, x.data(), x_rows, p);
      for (size_t i = 0; i < views.size(); ++i)
        for (size_t j = 0; j < sep[i].size(); ++j)
          ASSERT_TRUE(BitEqual(sep[i][j], grouped[i][j])) << IsaName(isa) << " product " << i << " at " << j;
    }
  }
}

// MatMulGroupedGather == MatMulGrouped over the gathered f32 rows, bit for bit: rows gathered several times, some
// never, in any order (a mixture-of-experts layer's tokens in expert order); mixed formats (several activation
// quantizations: Q6_K's two sums per block, MLX's bias), packed and unpacked; with float weights among them (the
// f32 fallback) and without, on every path.
TEST_F(MatMulTest, GroupedGatherEqualsGroupedOverCopies) {
  ThreadPool pool(2);
  const int64_t cols = 256, x_rows = 7;
  const std::vector<int32_t> gather = {3, 0, 3, 6, 1, 3, 0, 5, 6, 6, 2, 1, 4, 3, 0, 1, 5, 2};  // 18 rows
  const int64_t n_rows = static_cast<int64_t>(gather.size());
  std::vector<WType> types = {WType(DType::kQ4_K), WType(DType::kQ6_K), WType(DType::kQ4_0),
                              WType(DType::kF16, true, {4, 64}), WType(DType::kQ8_0), WType(DType::kF16)};
  const std::vector<int64_t> rows = {48, 33, 16, 20, 9, 17};
  const std::vector<std::pair<int64_t, int64_t>> ranges = {{0, 1}, {1, 5}, {6, 0}, {6, 9}, {0, 18}, {15, 3}};
  std::vector<Weights> ws;
  for (size_t i = 0; i < types.size(); ++i) ws.push_back(MakeWeights(types[i], rows[i], cols, 120 + i));
  std::vector<MatrixView> views;
  std::vector<std::shared_ptr<uint8_t[]>> owners;
  for (size_t i = 0; i < ws.size(); ++i) {
    views.push_back(ws[i].view);
    if (i % 2 == 0) owners.push_back(RepackForKernels(&views.back(), nullptr));
  }
  std::vector<float> x = MakeActs(x_rows, cols, 130), copies(static_cast<size_t>(n_rows * cols));
  for (int64_t i = 0; i < n_rows; ++i) std::copy_n(x.data() + gather[i] * cols, cols, copies.data() + i * cols);
  std::vector<IsaPath> paths = FastPaths();
  paths.push_back(IsaPath::kScalar);
  for (IsaPath isa : paths) {
    ForceIsa(isa);
    for (size_t n_products : {types.size() - 1, types.size()}) {  // without, then with the float matrix
      for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
        std::vector<std::vector<float>> want(n_products), got(n_products);
        std::vector<MatMulGroupOut> want_outs, got_outs;
        for (size_t i = 0; i < n_products; ++i) {
          const auto [begin, n] = ranges[i];
          const int64_t stride = views[i].rows + 1;
          want[i].assign(std::max<int64_t>(n, 1) * stride, 7.0f);
          got[i].assign(want[i].size(), 7.0f);
          want_outs.push_back({&views[i], begin, n, want[i].data(), stride});
          got_outs.push_back({&views[i], begin, n, got[i].data(), stride});
        }
        MatMulGrouped(want_outs, copies.data(), n_rows, nullptr);
        MatMulGroupedGather(got_outs, x.data(), x_rows, gather.data(), n_rows, p);
        for (size_t i = 0; i < n_products; ++i)
          for (size_t j = 0; j < want[i].size(); ++j)
            ASSERT_TRUE(BitEqual(want[i][j], got[i][j])) << IsaName(isa) << " product " << i << " at " << j;
      }
    }
  }
}

// Each path's activation quantizer equals the shared QuantizeActs bit for bit (codes, scales, d * sums and
// corrections), for row lengths around the AVX-512 quantizer's groups of 16 blocks, Q6_K's half-block corrections,
// a token range that starts past the first row and ends at a guard page, and blocks of zeros, of one value, tiny, huge
// and denormal values.
TEST_F(MatMulTest, QuantizedActsEqualTheSharedQuantizerEveryPath) {
  std::vector<std::pair<IsaPath, const mm::IsaKernels*>> paths;
#if defined(__x86_64__)
  for (IsaPath p : {IsaPath::kAvx2, IsaPath::kAvxVnni, IsaPath::kAvx512, IsaPath::kAmx}) {
    if (!IsIsaSupported(p)) continue;
    paths.push_back({p, p == IsaPath::kAvx2      ? mm::Avx2Kernels()
                        : p == IsaPath::kAvxVnni ? mm::AvxVnniKernels()
                        : p == IsaPath::kAvx512  ? mm::Avx512Kernels()
                                                 : mm::AmxKernels()});
  }
#elif defined(__aarch64__)
  if (IsIsaSupported(IsaPath::kNeon)) paths.push_back({IsaPath::kNeon, mm::NeonKernels()});
#endif
  if (paths.empty()) GTEST_SKIP() << "no SIMD path on this CPU";
  constexpr int64_t kTokens = 4;
  for (int64_t cols : {32, 64, 480, 512, 544, 896, 1024, 4864}) {
    std::vector<float> x = MakeActs(kTokens, cols, 7);
    const int64_t nb = cols / 32;
    for (int i = 0; i < 32; ++i) {
      x[static_cast<size_t>(cols + i)] = 0.0f;                                       // token 1, block 0: zeros
      if (nb > 2) x[static_cast<size_t>(cols + 64 + i)] = i == 5 ? -3.5f : 0.0f;    // block 2: one value
      if (nb > 3) x[static_cast<size_t>(cols + 96 + i)] = 1e-30f * (i - 16);       // block 3: tiny
      if (nb > 4) x[static_cast<size_t>(2 * cols + 128 + i)] = 1e30f * (i % 3 - 1);  // token 2, block 4: huge
      if (nb > 16) x[static_cast<size_t>(2 * cols + 512 + i)] = 1e-40f * (i - 7);   // block 16: denormal
    }
    for (int subs : {1, 2}) {
      for (int offset : {0, 32, 128}) {
        std::vector<uint8_t> want_buf(mm::ActsBytes(kTokens, cols, subs)), got_buf(want_buf.size());
        mm::QuantizedActs want = mm::CarveActs(want_buf.data(), kTokens, cols, subs);
        mm::QuantizeActs(x.data(), 1, kTokens, offset, &want);
        // The paths read x from a copy that ends against a guard page: a load past the last row faults.
        std::vector<uint8_t> x_bytes(x.size() * 4);
        std::memcpy(x_bytes.data(), x.data(), x_bytes.size());
        const GuardedCopy guarded(x_bytes);
        const float* x_guarded = reinterpret_cast<const float*>(guarded.data());
        for (const auto& [path, kernels] : paths) {
          std::fill(got_buf.begin(), got_buf.end(), uint8_t{0});
          mm::QuantizedActs got = mm::CarveActs(got_buf.data(), kTokens, cols, subs);
          kernels->quantize_acts(x_guarded, 1, kTokens, offset, &got);
          const std::string what = std::string(IsaName(path)) + " cols " + std::to_string(cols) + " subs " +
                                   std::to_string(subs) + " offset " + std::to_string(offset);
          const size_t t1 = static_cast<size_t>(kTokens);
          for (size_t t = 1; t < t1; ++t) {
            const size_t c = static_cast<size_t>(cols), n = static_cast<size_t>(nb);
            ASSERT_EQ(0, std::memcmp(want.q + t * c, got.q + t * c, c)) << what << " token " << t;
            ASSERT_EQ(0, std::memcmp(want.d + t * n, got.d + t * n, n * 4)) << what << " token " << t;
            ASSERT_EQ(0, std::memcmp(want.ds + t * n, got.ds + t * n, n * 4)) << what << " token " << t;
            const size_t nc = n * static_cast<size_t>(subs);
            ASSERT_EQ(0, std::memcmp(want.corr + t * nc, got.corr + t * nc, nc * 4)) << what << " token " << t;
          }
          // Token 0 lies outside [1, kTokens): left as it was.
          for (size_t i = 0; i < static_cast<size_t>(cols); ++i) ASSERT_EQ(got.q[i], 0) << what;
        }
      }
    }
  }
}

TEST_F(MatMulTest, ZeroActivationsGiveZero) {
  for (const WType& t : AllTypes()) {
    const int64_t cols = std::max<int64_t>(t.ColAlign(), 32);
    Weights w = MakeWeights(t, 20, cols, 5);
    std::vector<float> x(2 * cols, 0.0f), y(2 * 20, 1.0f);
    MatMul(w.view, x.data(), 2, y.data(), 20, nullptr);
    for (float v : y) ASSERT_EQ(v, 0.0f) << t.Name();
  }
}

// ---- The bf16 formula (MatMul's bf16_rows; matmul_internal.h) ------------------------------------------------------

// Forces the AMX path with the bf16 formula on, and restores both.
class MatMulBf16Test : public MatMulTest {
 protected:
  void SetUp() override {
    if (!IsIsaSupported(IsaPath::kAmx) || !HasAmxBf16()) GTEST_SKIP() << "no AMX-BF16 on this CPU/OS";
    ForceIsa(IsaPath::kAmx);
    SetBf16RowsEnabled(true);
    ASSERT_TRUE(Bf16RowsEnabled());
  }
  void TearDown() override {
    SetBf16RowsEnabled(true);
    MatMulTest::TearDown();
  }
};

std::vector<WType> Bf16Types() {
  return {WType(DType::kQ8_0),
          WType(DType::kQ4_0),
          WType(DType::kQ4_K),
          WType(DType::kQ6_K),
          WType(DType::kF16, true, {8, 64}),
          WType(DType::kF16, true, {4, 64}),
          WType(DType::kBF16, true, {4, 32}),
          WType(DType::kF16, true, {4, 128}),
          WType(DType::kBF16, true, {3, 128}),
          WType(DType::kF32, true, {8, 32})};
}

// Every bf16 row equals the twin bit for bit, whatever the batch, the pool, the ragged token tiles and row groups,
// and lies within bf16 rounding of the exact product.
TEST_F(MatMulBf16Test, Bf16RowsEqualTheirTwin) {
  ThreadPool pool(2);
  for (const WType& t : Bf16Types()) {
    const int64_t a = t.ColAlign();
    for (int64_t cols : {a, a * 3, a * 8}) {
      if (cols % 32 != 0) continue;
      for (int64_t rows : {16, 45, 64}) {
        Weights w = MakeWeights(t, rows, cols, 81);
        MatrixView v = w.view;
        auto owner = RepackForKernels(&v, nullptr);
        ASSERT_TRUE(owner != nullptr) << t.Name();
        for (int64_t n : {1, 5, 16, 17, 40}) {
          const std::string what = t.Name() + " " + std::to_string(rows) + "x" + std::to_string(cols) + " n=" +
                                   std::to_string(n);
          std::vector<float> x = MakeActs(n, cols, 82), y_ref(n * rows), y(n * (rows + 3));
          ref::MatMulBf16(w.view, x.data(), n, y_ref.data(), rows);
          const RowRange all[] = {{0, n}};
          for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
            std::fill(y.begin(), y.end(), -1.0f);
            MatMul(v, x.data(), n, y.data(), rows + 3, p, all);
            for (int64_t i = 0; i < n; ++i) {
              for (int64_t r = 0; r < rows; ++r)
                ASSERT_TRUE(BitEqual(y[i * (rows + 3) + r], y_ref[i * rows + r]))
                    << what << " t " << i << " r " << r << ": " << y[i * (rows + 3) + r] << " vs " << y_ref[i * rows + r];
              for (int64_t r = rows; r < rows + 3; ++r) ASSERT_EQ(y[i * (rows + 3) + r], -1.0f) << what;
            }
          }
          // Within bf16 rounding of each operand (2^-9 relative each, so ~2^-8 a product) plus f32 sums.
          std::vector<float> row(static_cast<size_t>(cols));
          for (int64_t r = 0; r < rows; ++r) {
            DequantizeMatrixRow(w.view, r, row.data());
            for (int64_t i = 0; i < n; ++i) {
              double exact = 0, mag = 0;
              for (int64_t c = 0; c < cols; ++c) {
                exact += static_cast<double>(row[c]) * x[i * cols + c];
                mag += std::fabs(static_cast<double>(row[c]) * x[i * cols + c]);
              }
              ASSERT_NEAR(y_ref[i * rows + r], exact, mag / 128 + 1e-6) << what;
            }
          }
        }
      }
    }
  }
}

// A wide matrix over several token blocks (512 tokens at most) and column chunks (the token block's bf16 rows over
// one fit 1.5 MiB: 3 at 352 tokens), the sums stored between chunks; row group pairs split over tasks; the listed rows
// as one run and as several (the kernel's row map, through which ragged tiles store and load), a run of one among them.
TEST_F(MatMulBf16Test, ManyTokensSpanTokenBlocksAndColumnChunks) {
  ThreadPool pool(2);
  const WType t(DType::kQ8_0);
  const int64_t rows = 80, cols = 4864, n = 700;
  Weights w = MakeWeights(t, rows, cols, 83);
  MatrixView v = w.view;
  auto owner = RepackForKernels(&v, nullptr);
  std::vector<float> x = MakeActs(n, cols, 84), y_ref(n * rows), y(n * rows);
  ref::MatMulBf16(w.view, x.data(), n, y_ref.data(), rows);
  const std::vector<RowRange> all = {{0, n}}, runs = {{3, 250}, {260, 261}, {300, 700}};
  for (const auto& listed : {all, runs}) {
    MatMul(v, x.data(), n, y.data(), rows, &pool, listed);
    for (const RowRange& run : listed)
      for (int64_t i = run.begin * rows; i < run.end * rows; ++i)
        ASSERT_TRUE(BitEqual(y[i], y_ref[i])) << "runs " << listed.size() << " at " << i;
  }
}

// GatedMlpBf16 equals its parts' twins bit for bit: ref::MatMulBf16 of gate and up, the activation over the f32 sums,
// ref::MatMulBf16 of down (which rounds h to bf16 as the fused kernel does from the tiles); for one run of rows and for
// several (the rows between them left alone), SiluMul and GeluTanhMul, ragged token tiles and more row groups than
// tasks. MatMulMultiExcept makes exactly the rest: the unlisted rows, on the int8 formula.
TEST_F(MatMulBf16Test, GatedMlpEqualsItsPartsAndTheExceptPartTheRest) {
  ThreadPool pool(2);
  const int64_t H = 256, F = 512, n = 75;
  for (const WType& t : Bf16Types()) {
    ASSERT_EQ(F % t.ColAlign(), 0) << t.Name();  // every format runs
    Weights gate = MakeWeights(t, F, H, 91), up = MakeWeights(t, F, H, 92), down = MakeWeights(t, H, F, 93);
    MatrixView vg = gate.view, vu = up.view, vd = down.view;
    auto og = RepackForKernels(&vg, nullptr), ou = RepackForKernels(&vu, nullptr), od = RepackForKernels(&vd, nullptr);
    ASSERT_TRUE(GatedMlpBf16Covers(vg, vu, vd)) << t.Name();
    std::vector<float> x = MakeActs(n, H, 94);
    std::vector<float> g_ref(n * F), u_ref(n * F), y_ref(n * H);
    ref::MatMulBf16(gate.view, x.data(), n, g_ref.data(), F);
    ref::MatMulBf16(up.view, x.data(), n, u_ref.data(), F);
    for (ActMulFn act : {static_cast<ActMulFn>(&SiluMul), static_cast<ActMulFn>(&GeluTanhMul)}) {
      std::vector<float> h(n * F);
      act(g_ref.data(), u_ref.data(), n * F, h.data());
      ref::MatMulBf16(down.view, h.data(), n, y_ref.data(), H);
      const std::vector<RowRange> all = {{0, n}}, runs = {{2, 20}, {21, 22}, {40, 75}};
      for (const auto& listed : {all, runs}) {
        for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
          std::vector<float> y(n * (H + 5), -1.0f);
          GatedMlpBf16(vg, vu, vd, act, x.data(), listed, y.data(), H + 5, p);
          std::vector<bool> in_run(n, false);
          for (const RowRange& r : listed)
            for (int64_t i = r.begin; i < r.end; ++i) in_run[i] = true;
          for (int64_t i = 0; i < n; ++i)
            for (int64_t c = 0; c < H + 5; ++c) {
              const float got = y[i * (H + 5) + c];
              if (in_run[i] && c < H) {
                ASSERT_TRUE(BitEqual(got, y_ref[i * H + c])) << t.Name() << " runs " << listed.size() << " t " << i;
              } else {
                ASSERT_EQ(got, -1.0f) << t.Name() << " t " << i << " c " << c;
              }
            }
        }
      }
    }
    // The rest: unlisted rows as MatMulMulti without bf16 rows gives them; listed rows untouched.
    const std::vector<RowRange> runs = {{2, 20}, {40, 75}};
    std::vector<float> gi(n * F, -1.0f), ui(n * F, -1.0f), g8(n * F), u8(n * F);
    const MatMulOut except[] = {{&vg, gi.data(), F}, {&vu, ui.data(), F}}, all8[] = {{&vg, g8.data(), F}, {&vu, u8.data(), F}};
    MatMulMultiExcept(except, x.data(), n, &pool, runs);
    MatMulMulti(all8, x.data(), n, &pool);
    for (int64_t i = 0; i < n; ++i) {
      const bool listed = (i >= 2 && i < 20) || i >= 40;
      for (int64_t r = 0; r < F; ++r) {
        if (listed) {
          ASSERT_EQ(gi[i * F + r], -1.0f);
          ASSERT_EQ(ui[i * F + r], -1.0f);
        } else {
          ASSERT_TRUE(BitEqual(gi[i * F + r], g8[i * F + r])) << t.Name() << " t " << i;
          ASSERT_TRUE(BitEqual(ui[i * F + r], u8[i * F + r])) << t.Name() << " t " << i;
        }
      }
    }
  }
}

// Rows outside bf16_rows, and every row of float weights (which the formula does not cover), take their own formula
// exactly as a batch of their own would; the listed rows equal the twin, in MatMul and MatMulMulti.
TEST_F(MatMulBf16Test, OnlyTheListedRowsChange) {
  ThreadPool pool(2);
  const int64_t cols = 256, n = 37;
  const int64_t rows[] = {48, 40, 24, 16};
  const WType types[] = {WType(DType::kQ8_0), WType(DType::kQ4_K), WType(DType::kQ6_K), WType(DType::kF32)};
  std::vector<Weights> ws;
  std::vector<MatrixView> vs;
  std::vector<std::shared_ptr<uint8_t[]>> owners;
  for (int i = 0; i < 4; ++i) {
    ws.push_back(MakeWeights(types[i], rows[i], cols, 90 + i));
    vs.push_back(ws.back().view);
  }
  for (MatrixView& v : vs) owners.push_back(RepackForKernels(&v, nullptr));
  const std::vector<float> x = MakeActs(n, cols, 95);
  // Runs whose tiles straddle them (stored row by row), lie whole inside one (stored in place) or are ragged.
  const std::vector<std::vector<RowRange>> layouts = {
      {{2, 9}, {20, 37}}, {{0, 16}, {20, 37}}, {{0, 3}, {5, 22}, {23, 36}}, {{4, 33}}};
  for (const std::vector<RowRange>& listed : layouts) {
  auto is_listed = [&](int64_t i) {
    return std::any_of(listed.begin(), listed.end(), [&](const RowRange& r) { return i >= r.begin && i < r.end; });
  };
  std::vector<std::vector<float>> y(4), y_multi(4);
  for (int i = 0; i < 4; ++i) {
    y[i].assign(n * rows[i], -1.0f);
    y_multi[i].assign(n * rows[i], -1.0f);
    MatMul(vs[i], x.data(), n, y[i].data(), rows[i], &pool, listed);
  }
  const MatMulOut outs[] = {{&vs[0], y_multi[0].data(), rows[0]},
                            {&vs[1], y_multi[1].data(), rows[1]},
                            {&vs[2], y_multi[2].data(), rows[2]},
                            {&vs[3], y_multi[3].data(), rows[3]}};
  MatMulMulti(outs, x.data(), n, &pool, listed);
  for (int i = 0; i < 4; ++i) {
    const bool covered = i < 3;
    std::vector<float> bf(n * rows[i]), int8(n * rows[i]);
    if (covered) ref::MatMulBf16(ws[i].view, x.data(), n, bf.data(), rows[i]);
    for (int64_t t = 0; t < n; ++t) {
      std::vector<float> alone(rows[i]);
      ForceIsa(IsaPath::kAmx);
      MatMul(vs[i], x.data() + t * cols, 1, alone.data(), rows[i], nullptr);
      for (int64_t r = 0; r < rows[i]; ++r) {
        const float want = covered && is_listed(t) ? bf[t * rows[i] + r] : alone[r];
        ASSERT_TRUE(BitEqual(y[i][t * rows[i] + r], want)) << types[i].Name() << " t " << t << " r " << r;
        ASSERT_TRUE(BitEqual(y_multi[i][t * rows[i] + r], want)) << types[i].Name() << " t " << t << " r " << r;
      }
    }
  }
  }
  // Turned off, the listed rows take the int8 formula too.
  SetBf16RowsEnabled(false);
  std::vector<float> off(n * rows[0]), plain(n * rows[0]);
  MatMul(vs[0], x.data(), n, off.data(), rows[0], &pool, layouts[0]);
  MatMul(vs[0], x.data(), n, plain.data(), rows[0], &pool);
  for (int64_t i = 0; i < n * rows[0]; ++i) ASSERT_TRUE(BitEqual(off[i], plain[i])) << i;
}

// The kernel's conversion (VCVTNEPS2BF16) equals ToBf16 on ties, denormals, infinities, NaN and overflow.
TEST_F(MatMulBf16Test, ConversionEqualsToBf16) {
#if defined(__x86_64__)
  std::vector<float> x;
  std::mt19937 rng(7);
  for (int i = 0; i < 4096; ++i) {
    uint32_t u = rng();
    if (i % 4 == 0) u = (u & 0xFFFF0000u) | 0x8000u;  // ties
    if (i % 8 == 1) u &= 0x807FFFFFu;                  // denormals
    float f;
    std::memcpy(&f, &u, 4);
    x.push_back(f);
  }
  for (float f : {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 3.4e38f, -3.4e38f, 1e-45f, 1.17549435e-38f})
    x.push_back(f);
  while (x.size() % 32 != 0) x.push_back(1.0f);
  const int64_t cols = static_cast<int64_t>(x.size());
  // As row 5 of the token tiles.
  std::vector<uint16_t> out(static_cast<size_t>(mm::Bf16TilesElems(1, cols)));
  mm::AmxBf16Kernels()->to_bf16(x.data(), cols, 1, out.data(), 5);
  for (int64_t c = 0; c < cols; ++c)
    ASSERT_EQ(out[static_cast<size_t>(mm::Bf16TileOffset(5, c, cols))], mm::ToBf16(x[c])) << c << " " << x[c];
#endif
}

}  // namespace
}  // namespace parallm
