// Tests for the GGUF reader and writer: metadata and tensor round trips, the exact bytes the writer emits,
// the shared llama.cpp fixtures, and a table of malformed files that must fail with a useful message.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>

#include <gtest/gtest.h>

#include "formats/gguf.h"
#include "test_paths.h"

namespace parallm {
namespace {

using ::parallm::testing::FixturePath;
using ::parallm::testing::ScratchDir;

// Hand-assembles GGUF bytes (little-endian) so tests can build files the writer would never produce.
class Bytes {
 public:
  Bytes& U8(uint8_t v) { return Raw(&v, 1); }
  Bytes& U32(uint32_t v) { return Le(v, 4); }
  Bytes& U64(uint64_t v) { return Le(v, 8); }
  Bytes& Str(const std::string& s) {
    U64(s.size());
    return Raw(s.data(), s.size());
  }
  Bytes& Raw(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out.insert(out.end(), b, b + n);
    return *this;
  }
  Bytes& Header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    Raw("GGUF", 4);
    U32(version);
    U64(n_tensors);
    return U64(n_kv);
  }
  Bytes& KvU32(const std::string& key, uint32_t v) {
    Str(key);
    U32(static_cast<uint32_t>(GgufType::kU32));
    return U32(v);
  }
  Bytes& KvString(const std::string& key, const std::string& v) {
    Str(key);
    U32(static_cast<uint32_t>(GgufType::kString));
    return Str(v);
  }
  // ne innermost first, as in the file.
  Bytes& Tensor(const std::string& name, const std::vector<uint64_t>& ne, uint32_t ggml_type, uint64_t offset) {
    Str(name);
    U32(static_cast<uint32_t>(ne.size()));
    for (uint64_t d : ne) U64(d);
    U32(ggml_type);
    return U64(offset);
  }
  Bytes& PadTo(size_t alignment) {
    out.resize((out.size() + alignment - 1) / alignment * alignment, 0);
    return *this;
  }
  Bytes& Zeros(size_t n) {
    out.resize(out.size() + n, 0);
    return *this;
  }

  std::vector<uint8_t> out;

 private:
  Bytes& Le(uint64_t v, int n) {
    for (int k = 0; k < n; ++k) out.push_back(static_cast<uint8_t>(v >> (8 * k)));
    return *this;
  }
};

constexpr uint32_t kGgmlF32 = 0, kGgmlF16 = 1, kGgmlQ8_0 = 8;

std::vector<uint8_t> ReadFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (uint8_t& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

GgufValue Scalar(GgufType t, uint64_t u, int64_t i, double f = 0) {
  GgufValue v;
  v.type = t;
  v.u = u;
  v.i = i;
  v.f = f;
  return v;
}

GgufValue Array(GgufType elem, std::vector<GgufValue> xs) {
  GgufValue v;
  v.type = GgufType::kArray;
  v.array_type = elem;
  v.array = std::move(xs);
  return v;
}

// Compares the fields that the value's type uses (bit-exact for floats).
void ExpectSameValue(const GgufValue& want, const GgufValue& got, const std::string& where) {
  SCOPED_TRACE(where);
  ASSERT_EQ(want.type, got.type);
  switch (want.type) {
    case GgufType::kU8: case GgufType::kU16: case GgufType::kU32: case GgufType::kU64:
      EXPECT_EQ(want.u, got.u);
      break;
    case GgufType::kI8: case GgufType::kI16: case GgufType::kI32: case GgufType::kI64:
      EXPECT_EQ(want.i, got.i);
      break;
    case GgufType::kF32:
      EXPECT_EQ(static_cast<float>(want.f), static_cast<float>(got.f));
      break;
    case GgufType::kF64:
      EXPECT_EQ(std::memcmp(&want.f, &got.f, sizeof(double)), 0) << want.f << " vs " << got.f;
      break;
    case GgufType::kBool:
      EXPECT_EQ(want.b, got.b);
      break;
    case GgufType::kString:
      EXPECT_EQ(want.str, got.str);
      break;
    case GgufType::kArray:
      EXPECT_EQ(want.array_type, got.array_type);
      ASSERT_EQ(want.array.size(), got.array.size());
      for (size_t k = 0; k < want.array.size(); ++k) ExpectSameValue(want.array[k], got.array[k], where + "[" + std::to_string(k) + "]");
      break;
  }
}

TEST(GgufValue, TypedAccessors) {
  EXPECT_EQ(GgufValue::U32(7).AsInt(), 7);
  EXPECT_EQ(GgufValue::I32(-7).AsInt(), -7);
  EXPECT_EQ(GgufValue::Bool(true).AsInt(), 1);
  EXPECT_EQ(GgufValue::U64(std::numeric_limits<uint64_t>::max()).AsInt(), std::nullopt);
  EXPECT_EQ(GgufValue::U64(1ull << 62).AsInt(), int64_t{1} << 62);
  EXPECT_EQ(GgufValue::F32(0.5f).AsInt(), std::nullopt);
  EXPECT_EQ(GgufValue::F32(0.5f).AsFloat(), 0.5);
  EXPECT_EQ(GgufValue::I32(-3).AsFloat(), -3.0);
  EXPECT_EQ(GgufValue::String("x").AsFloat(), std::nullopt);
  EXPECT_EQ(GgufValue::U32(1).AsString(), nullptr);
  ASSERT_NE(GgufValue::String("abc").AsString(), nullptr);
  EXPECT_EQ(*GgufValue::String("abc").AsString(), "abc");
  GgufValue a = GgufValue::StringArray({"a", "b"});
  EXPECT_EQ(a.type, GgufType::kArray);
  EXPECT_EQ(a.array_type, GgufType::kString);
  ASSERT_EQ(a.array.size(), 2u);
  EXPECT_EQ(a.array[1].str, "b");
  EXPECT_EQ(GgufValue::F32Array({1.5f}).array[0].f, 1.5);
  EXPECT_EQ(GgufValue::I32Array({-4}).array[0].i, -4);
}

// Every scalar type at its extremes, strings with NUL and UTF-8, arrays of every type, empty and nested arrays.
TEST(GgufRoundTrip, EveryMetadataType) {
  std::vector<std::pair<std::string, GgufValue>> kvs = {
      {"u8", Scalar(GgufType::kU8, 255, 0)},
      {"i8", Scalar(GgufType::kI8, 0, -128)},
      {"u16", Scalar(GgufType::kU16, 65535, 0)},
      {"i16", Scalar(GgufType::kI16, 0, -32768)},
      {"u32", GgufValue::U32(4294967295u)},
      {"i32", GgufValue::I32(std::numeric_limits<int32_t>::min())},
      {"f32", GgufValue::F32(-1.25e-5f)},
      {"bool.true", GgufValue::Bool(true)},
      {"bool.false", GgufValue::Bool(false)},
      {"string", GgufValue::String(std::string("h\xC3\xA9llo\0world", 12))},
      {"string.empty", GgufValue::String("")},
      {"u64", GgufValue::U64(std::numeric_limits<uint64_t>::max())},
      {"i64", Scalar(GgufType::kI64, 0, std::numeric_limits<int64_t>::min())},
      {"f64", Scalar(GgufType::kF64, 0, 0, 3.141592653589793)},
      {"array.u8", Array(GgufType::kU8, {Scalar(GgufType::kU8, 0, 0), Scalar(GgufType::kU8, 200, 0)})},
      {"array.i8", Array(GgufType::kI8, {Scalar(GgufType::kI8, 0, -1)})},
      {"array.u16", Array(GgufType::kU16, {Scalar(GgufType::kU16, 513, 0)})},
      {"array.i16", Array(GgufType::kI16, {Scalar(GgufType::kI16, 0, -513)})},
      {"array.u32", Array(GgufType::kU32, {GgufValue::U32(1), GgufValue::U32(0xdeadbeef)})},
      {"array.i32", GgufValue::I32Array({-1, 0, 1, 2147483647})},
      {"array.f32", GgufValue::F32Array({0.0f, -0.0f, 1e30f, std::numeric_limits<float>::infinity()})},
      {"array.bool", Array(GgufType::kBool, {GgufValue::Bool(true), GgufValue::Bool(false)})},
      {"array.string", GgufValue::StringArray({"<unk>", "", "\xE2\x96\x81the"})},
      {"array.u64", Array(GgufType::kU64, {GgufValue::U64(1ull << 63)})},
      {"array.i64", Array(GgufType::kI64, {Scalar(GgufType::kI64, 0, -(int64_t{1} << 40))})},
      {"array.f64", Array(GgufType::kF64, {Scalar(GgufType::kF64, 0, 0, -2.5e-300)})},
      {"array.empty", Array(GgufType::kF32, {})},
      {"array.nested", Array(GgufType::kArray, {GgufValue::I32Array({1, 2}), GgufValue::I32Array({}),
                                                  GgufValue::I32Array({3})})},
      {"array.nested.strings",
       Array(GgufType::kArray, {Array(GgufType::kArray, {GgufValue::StringArray({"deep"})})})},
  };
  GgufWriter w;
  for (const auto& [k, v] : kvs) w.Set(k, v);
  std::string path = ScratchDir("gguf-meta") + "/meta.gguf";
  ASSERT_TRUE(w.Write(path).ok());
  auto f = GgufFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_TRUE(f->tensor_infos().empty());
  ASSERT_EQ(f->metadata().size(), kvs.size());
  for (size_t k = 0; k < kvs.size(); ++k) {
    EXPECT_EQ(f->metadata()[k].first, kvs[k].first);  // file order is insertion order
    ExpectSameValue(kvs[k].second, f->metadata()[k].second, kvs[k].first);
  }
  EXPECT_EQ(f->GetInt("i16"), -32768);
  EXPECT_EQ(f->GetInt("u64"), std::nullopt);
  EXPECT_EQ(f->GetFloat("f32"), static_cast<double>(-1.25e-5f));
  EXPECT_EQ(f->GetString("string.empty"), "");
  EXPECT_EQ(f->GetString("u8"), std::nullopt);
  EXPECT_EQ(f->Find("missing"), nullptr);
}

TEST(GgufWriter, SetReplacesInPlaceAndRejectsInconsistentValues) {
  GgufWriter w;
  w.Set("a", GgufValue::U32(1));
  w.Set("b", GgufValue::U32(2));
  w.Set("a", GgufValue::String("again"));
  std::string dir = ScratchDir("gguf-set");
  ASSERT_TRUE(w.Write(dir + "/set.gguf").ok());
  auto f = GgufFile::Open(dir + "/set.gguf");
  ASSERT_TRUE(f.ok()) << f.status().message();
  ASSERT_EQ(f->metadata().size(), 2u);
  EXPECT_EQ(f->metadata()[0].first, "a");
  EXPECT_EQ(f->GetString("a"), "again");

  GgufWriter bad;
  bad.Set("mixed", Array(GgufType::kU32, {GgufValue::U32(1), GgufValue::String("x")}));
  Status st = bad.Write(dir + "/bad.gguf");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("metadata key 'mixed': array element 1 has type 8"), std::string::npos) << st.message();
  EXPECT_FALSE(std::filesystem::exists(dir + "/bad.gguf"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/bad.gguf.tmp"));
}

struct TensorCase {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;  // outermost first
  size_t nbytes;
};

// One tensor of each supported block/float type, sizes chosen so most need padding to 64.
std::vector<TensorCase> TensorCases() {
  return {
      {"f32", DType::kF32, {3, 5}, 3 * 5 * 4},
      {"f16", DType::kF16, {2, 7}, 2 * 7 * 2},
      {"bf16", DType::kBF16, {4}, 4 * 2},
      {"q8_0", DType::kQ8_0, {2, 64}, 2 * 2 * 34},
      {"q4_0", DType::kQ4_0, {1, 32}, 18},
      {"q4_k", DType::kQ4_K, {3, 1, 512}, 3 * 2 * 144},
      {"q6_k", DType::kQ6_K, {256}, 210},
  };
}

TEST(GgufRoundTrip, TensorsOfEveryTypeWithCustomAlignment) {
  const uint64_t kAlign = 64;
  std::vector<TensorCase> cases = TensorCases();
  std::vector<std::vector<uint8_t>> data;
  GgufWriter w;
  w.Set("general.architecture", GgufValue::String("test"));
  w.Set("general.alignment", GgufValue::U32(kAlign));
  for (size_t k = 0; k < cases.size(); ++k) {
    data.push_back(RandomBytes(cases[k].nbytes, static_cast<uint32_t>(k)));
    ASSERT_TRUE(w.AddTensor(cases[k].name, cases[k].dtype, cases[k].shape, data[k].data(), data[k].size()).ok());
  }
  // The owning overload keeps its bytes alive itself.
  ASSERT_TRUE(w.AddTensor("owned", DType::kI32, {2}, std::vector<uint8_t>{1, 0, 0, 0, 2, 0, 0, 0}).ok());
  std::string path = ScratchDir("gguf-tensors") + "/t.gguf";
  ASSERT_TRUE(w.Write(path).ok());
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));

  auto f = GgufFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->alignment(), kAlign);
  EXPECT_EQ(f->data_offset() % kAlign, 0u);
  ASSERT_EQ(f->tensor_infos().size(), cases.size() + 1);
  std::vector<uint8_t> raw = ReadFileBytes(path);
  uint64_t expected_offset = 0;
  for (size_t k = 0; k < cases.size(); ++k) {
    SCOPED_TRACE(cases[k].name);
    const GgufTensorInfo& info = f->tensor_infos()[k];
    EXPECT_EQ(info.name, cases[k].name);
    EXPECT_EQ(info.dtype, cases[k].dtype);
    EXPECT_EQ(info.shape, cases[k].shape);
    EXPECT_EQ(info.offset, expected_offset);  // packed in order, each at the next multiple of the alignment
    const TensorView* view = f->tensors().Find(cases[k].name);
    ASSERT_NE(view, nullptr);
    EXPECT_EQ(view->shape, cases[k].shape);
    ASSERT_EQ(view->nbytes, cases[k].nbytes);
    EXPECT_EQ(std::memcmp(view->data, data[k].data(), data[k].size()), 0);
    // The padding up to the next tensor is zero bytes.
    uint64_t end = f->data_offset() + info.offset + cases[k].nbytes;
    uint64_t padded = f->data_offset() + (info.offset + cases[k].nbytes + kAlign - 1) / kAlign * kAlign;
    for (uint64_t b = end; b < padded; ++b) ASSERT_EQ(raw[b], 0) << "padding byte " << b;
    expected_offset = padded - f->data_offset();
  }
  const TensorView* owned = f->tensors().Find("owned");
  ASSERT_NE(owned, nullptr);
  EXPECT_EQ(owned->data[4], 2);
  // The file ends with the last tensor's padding, as llama.cpp's writer does.
  EXPECT_EQ(raw.size(), f->data_offset() + f->tensor_infos().back().offset + kAlign);
  EXPECT_EQ(f->GetInt("general.alignment"), 64);
  EXPECT_FALSE(f->tensors().owners.empty());  // the mapping outlives the GgufFile's views
}

// The writer's output for a tiny file, byte for byte against the specification's layout.
TEST(GgufWriter, EmitsExactSpecificationBytes) {
  float values[3] = {1.0f, -2.0f, 0.5f};
  GgufWriter w;
  w.Set("general.architecture", GgufValue::String("llama"));
  ASSERT_TRUE(w.AddTensor("w", DType::kF32, {3}, values, sizeof values).ok());
  ASSERT_TRUE(w.AddTensor("h", DType::kF16, {1, 2}, values, 4).ok());
  std::string path = ScratchDir("gguf-exact") + "/x.gguf";
  ASSERT_TRUE(w.Write(path).ok());

  Bytes want;
  want.Header(3, 2, 1).KvString("general.architecture", "llama");
  want.Tensor("w", {3}, kGgmlF32, 0).Tensor("h", {2, 1}, kGgmlF16, 32).PadTo(32);
  want.Raw(values, 12).PadTo(32).Raw(values, 4).PadTo(32);
  EXPECT_EQ(ReadFileBytes(path), want.out);
}

TEST(GgufWriter, DefaultAlignmentIsNotWrittenAsAKey) {
  GgufWriter w;
  ASSERT_TRUE(w.AddTensor("x", DType::kF32, {1}, std::vector<uint8_t>(4, 0)).ok());
  std::string path = ScratchDir("gguf-defalign") + "/d.gguf";
  ASSERT_TRUE(w.Write(path).ok());
  auto f = GgufFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_EQ(f->Find("general.alignment"), nullptr);
  EXPECT_TRUE(f->metadata().empty());
}

TEST(GgufWriter, RejectsInvalidTensorsAndAlignment) {
  std::vector<uint8_t> buf(4096);
  struct Case {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    size_t nbytes;
    std::string error;
  };
  std::vector<Case> cases = {
      {"a", DType::kF32, {2, 3}, 20, "needs 24 bytes, got 20"},
      {"b", DType::kQ8_0, {16}, 34, "not a multiple of its block size 32"},
      {"c", DType::kF32, {0, 3}, 0, "dimensions must be positive"},
      {"d", DType::kF32, {-1}, 4, "dimensions must be positive"},
      {"e", DType::kF32, {1, 1, 1, 1, 1}, 4, "5 dimensions"},
      {"f", DType::kF32, {}, 4, "0 dimensions"},
      {"g", DType::kU32, {1}, 4, "has no GGUF type"},
      {"", DType::kF32, {1}, 4, "name is empty"},
      {std::string(65, 'n'), DType::kF32, {1}, 4, "longer than 64 bytes"},
      {"dup", DType::kF32, {1}, 4, "duplicate tensor name 'dup'"},
  };
  GgufWriter w;
  ASSERT_TRUE(w.AddTensor("dup", DType::kF32, {1}, buf.data(), 4).ok());
  for (const Case& c : cases) {
    Status st = w.AddTensor(c.name, c.dtype, c.shape, buf.data(), c.nbytes);
    ASSERT_FALSE(st.ok()) << c.name;
    EXPECT_NE(st.message().find(c.error), std::string::npos) << st.message();
  }
  std::string dir = ScratchDir("gguf-badalign");
  for (GgufValue align : {GgufValue::U32(48), GgufValue::U32(0), GgufValue::U64(64)}) {
    GgufWriter a;
    a.Set("general.alignment", align);
    Status st = a.Write(dir + "/a.gguf");
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find("general.alignment"), std::string::npos) << st.message();
    EXPECT_FALSE(std::filesystem::exists(dir + "/a.gguf"));
  }
}

// /work/shared/models/llama-2-tiny-random: values from its SOURCE.md, read with an independent parser.
TEST(GgufFixture, LlamaTinyRandomHeaderAndTensors) {
  std::string path = FixturePath("models/llama-2-tiny-random/llama-2-tiny-random.gguf");
  auto f = GgufFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_EQ(f->data_offset(), 724416u);
  EXPECT_EQ(f->metadata().size(), 18u);
  EXPECT_EQ(f->GetString("general.architecture"), "llama");
  EXPECT_EQ(f->GetString("general.name"), "LLaMA v2");
  EXPECT_EQ(f->GetInt("general.file_type"), 1);
  EXPECT_EQ(f->GetInt("llama.context_length"), 4096);
  EXPECT_EQ(f->GetInt("llama.embedding_length"), 8);
  EXPECT_EQ(f->GetInt("llama.block_count"), 1);
  EXPECT_EQ(f->GetInt("llama.feed_forward_length"), 32);
  EXPECT_EQ(f->GetInt("llama.rope.dimension_count"), 4);
  EXPECT_EQ(f->GetInt("llama.attention.head_count"), 2);
  EXPECT_EQ(f->GetInt("llama.attention.head_count_kv"), 2);
  EXPECT_FLOAT_EQ(static_cast<float>(*f->GetFloat("llama.attention.layer_norm_rms_epsilon")), 1e-5f);
  EXPECT_EQ(f->GetString("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(f->GetInt("tokenizer.ggml.bos_token_id"), 1);
  EXPECT_EQ(f->GetInt("tokenizer.ggml.eos_token_id"), 2);
  EXPECT_EQ(f->GetInt("tokenizer.ggml.unknown_token_id"), 0);
  EXPECT_EQ(f->Find("tokenizer.ggml.pre"), nullptr);
  const GgufValue* tokens = f->Find("tokenizer.ggml.tokens");
  ASSERT_NE(tokens, nullptr);
  EXPECT_EQ(tokens->array_type, GgufType::kString);
  ASSERT_EQ(tokens->array.size(), 32000u);
  EXPECT_EQ(tokens->array[0].str, "<unk>");
  EXPECT_EQ(tokens->array[1].str, "<s>");
  EXPECT_EQ(tokens->array[2].str, "</s>");
  EXPECT_EQ(f->Find("tokenizer.ggml.scores")->array.size(), 32000u);
  EXPECT_EQ(f->Find("tokenizer.ggml.token_type")->array.size(), 32000u);

  struct Want {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;  // outermost first: GGUF's [ne0, ne1] reversed
    uint64_t offset;
  };
  std::vector<Want> want = {
      {"token_embd.weight", DType::kF16, {32000, 8}, 0},
      {"blk.0.attn_q.weight", DType::kF16, {8, 8}, 512000},
      {"blk.0.attn_k.weight", DType::kF16, {8, 8}, 512128},
      {"blk.0.attn_v.weight", DType::kF16, {8, 8}, 512256},
      {"blk.0.attn_output.weight", DType::kF16, {8, 8}, 512384},
      {"blk.0.ffn_gate.weight", DType::kF16, {32, 8}, 512512},
      {"blk.0.ffn_up.weight", DType::kF16, {32, 8}, 513024},
      {"blk.0.ffn_down.weight", DType::kF16, {8, 32}, 513536},
      {"blk.0.attn_norm.weight", DType::kF32, {8}, 514048},
      {"blk.0.ffn_norm.weight", DType::kF32, {8}, 514080},
      {"output_norm.weight", DType::kF32, {8}, 514112},
      {"output.weight", DType::kF16, {32000, 8}, 514144},
  };
  ASSERT_EQ(f->tensor_infos().size(), want.size());
  for (size_t k = 0; k < want.size(); ++k) {
    const GgufTensorInfo& info = f->tensor_infos()[k];
    EXPECT_EQ(info.name, want[k].name);
    EXPECT_EQ(info.dtype, want[k].dtype) << info.name;
    EXPECT_EQ(info.shape, want[k].shape) << info.name;
    EXPECT_EQ(info.offset, want[k].offset) << info.name;
  }
  // output.weight ends exactly at the end of the 1,750,560-byte file.
  const TensorView* out = f->tensors().Find("output.weight");
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(out->nbytes, 32000u * 8 * 2);
  EXPECT_EQ(f->data_offset() + 514144 + out->nbytes, 1750560u);
  EXPECT_EQ(std::filesystem::file_size(path), 1750560u);
}

// Vocab-only files: zero tensors, and the file ends right after the metadata (no padding, no data section).
TEST(GgufFixture, VocabOnlyFilesOpen) {
  struct Want {
    std::string file, model, pre;
    size_t n_tokens, n_merges;
  };
  std::vector<Want> want = {
      {"ggml-vocab-bert-bge.gguf", "bert", "bert-bge", 30522, 0},
      {"ggml-vocab-deepseek-coder.gguf", "gpt2", "deepseek-coder", 32256, 31757},
      {"ggml-vocab-deepseek-llm.gguf", "gpt2", "deepseek-llm", 102400, 99757},
      {"ggml-vocab-falcon.gguf", "gpt2", "falcon", 65024, 64784},
      {"ggml-vocab-gpt-2.gguf", "gpt2", "gpt-2", 50257, 50000},
      {"ggml-vocab-llama-spm.gguf", "llama", "default", 32000, 0},
      {"ggml-vocab-phi-3.gguf", "llama", "default", 32064, 0},
      {"ggml-vocab-starcoder.gguf", "gpt2", "starcoder", 49152, 48872},
  };
  for (const Want& w : want) {
    SCOPED_TRACE(w.file);
    std::string path = FixturePath("tokenizers/gguf-vocab/" + w.file);
    auto f = GgufFile::Open(path);
    ASSERT_TRUE(f.ok()) << f.status().message();
    EXPECT_EQ(f->version(), 3u);
    EXPECT_TRUE(f->tensor_infos().empty());
    EXPECT_TRUE(f->tensors().tensors.empty());
    EXPECT_EQ(f->data_offset(), std::filesystem::file_size(path));
    EXPECT_EQ(f->GetString("tokenizer.ggml.model"), w.model);
    EXPECT_EQ(f->GetString("tokenizer.ggml.pre").value_or("default"), w.pre);
    const GgufValue* tokens = f->Find("tokenizer.ggml.tokens");
    ASSERT_NE(tokens, nullptr);
    EXPECT_EQ(tokens->array.size(), w.n_tokens);
    const GgufValue* merges = f->Find("tokenizer.ggml.merges");
    EXPECT_EQ(merges ? merges->array.size() : 0u, w.n_merges);
  }
}

TEST(GgufReader, AcceptsVersion2AndViewsDataInPlace) {
  Bytes b;
  b.Header(2, 1, 1).KvU32("general.alignment", 16).Tensor("x", {4}, kGgmlF32, 0).PadTo(16);
  size_t data_at = b.out.size();
  float v[4] = {1, 2, 3, 4};
  b.Raw(v, sizeof v);
  auto f = GgufFile::Parse(b.out, "v2.gguf");
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->version(), 2u);
  EXPECT_EQ(f->alignment(), 16u);
  EXPECT_EQ(f->data_offset(), data_at);
  const TensorView* x = f->tensors().Find("x");
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(x->data, b.out.data() + data_at);
  EXPECT_EQ(x->nbytes, 16u);
  EXPECT_TRUE(f->tensors().owners.empty());
}

TEST(GgufReader, OpenNamesTheFile) {
  std::string dir = ScratchDir("gguf-open");
  auto missing = GgufFile::Open(dir + "/missing.gguf");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find(dir + "/missing.gguf"), std::string::npos);
  std::ofstream(dir + "/bad.gguf") << "GGML not really";
  auto bad = GgufFile::Open(dir + "/bad.gguf");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().rfind(dir + "/bad.gguf: not a GGUF file: bad magic", 0), 0u) << bad.status().message();
  std::ofstream(dir + "/empty.gguf").flush();
  EXPECT_FALSE(GgufFile::Open(dir + "/empty.gguf").ok());
}

// A small valid file (metadata of several kinds, two tensors); the last tensor ends the file.
std::vector<uint8_t> SmallValidFile() {
  Bytes b;
  b.Header(3, 2, 4).KvString("general.architecture", "llama").KvU32("general.alignment", 32);
  b.Str("a.bool").U32(static_cast<uint32_t>(GgufType::kBool)).U8(1);
  b.Str("a.arr").U32(static_cast<uint32_t>(GgufType::kArray)).U32(static_cast<uint32_t>(GgufType::kString)).U64(2);
  b.Str("x").Str("yz");
  b.Tensor("t.f32", {2, 2}, kGgmlF32, 0).Tensor("t.q8", {32}, kGgmlQ8_0, 32).PadTo(32);
  b.Zeros(32 + 34);
  return b.out;
}

TEST(GgufMalformed, SmallValidFileParses) {
  std::vector<uint8_t> bytes = SmallValidFile();
  auto f = GgufFile::Parse(bytes, "small.gguf");
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->tensor_infos().size(), 2u);
  EXPECT_EQ(f->data_offset() + 32 + 34, bytes.size());
}

TEST(GgufMalformed, TruncatedAtEveryOffset) {
  std::vector<uint8_t> bytes = SmallValidFile();
  for (size_t n = 0; n < bytes.size(); ++n) {
    // A copy of exactly n bytes, so ASan catches any read past it.
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
    auto f = GgufFile::Parse(cut, "cut.gguf");
    ASSERT_FALSE(f.ok()) << "truncated to " << n << " bytes parsed";
    const std::string& m = f.status().message();
    EXPECT_EQ(m.rfind("cut.gguf: ", 0), 0u) << m;
    bool says_why = m.find("truncated") != std::string::npos || m.find("past the end") != std::string::npos ||
                    m.find("bad magic") != std::string::npos;
    EXPECT_TRUE(says_why) << "at " << n << ": " << m;
  }
}

struct Malformed {
  std::string what;
  std::vector<uint8_t> bytes;
  std::string error;  // a substring of the message
};

std::vector<Malformed> MalformedCases() {
  const uint32_t kArray = static_cast<uint32_t>(GgufType::kArray);
  const uint32_t kI32 = static_cast<uint32_t>(GgufType::kI32);
  std::vector<Malformed> c;
  auto add = [&](std::string what, const Bytes& b, std::string error) { c.push_back({what, b.out, error}); };

  add("bad magic", Bytes().Raw("GGML", 4).U32(3).U64(0).U64(0), "bad magic");
  add("version 1", Bytes().Header(1, 0, 0), "version 1 is not supported");
  add("version 4", Bytes().Header(4, 0, 0), "unsupported GGUF version 4");
  add("big-endian", Bytes().Raw("GGUF", 4).Raw("\0\0\0\3", 4).U64(0).U64(0), "big-endian");
  add("huge tensor count", Bytes().Header(3, 1ull << 60, 0), "tensor count 1152921504606846976");
  add("huge metadata count", Bytes().Header(3, 0, ~0ull), "metadata count 18446744073709551615");
  add("huge key length", Bytes().Header(3, 0, 1).U64(1ull << 60).Zeros(16), "metadata key 0 of 1152921504606846976 bytes");
  add("huge string value", Bytes().Header(3, 0, 1).Str("k").U32(8).U64(1ull << 60).Zeros(8),
      "metadata key 'k': truncated or corrupt: string value of 1152921504606846976 bytes");
  add("huge array length", Bytes().Header(3, 0, 1).Str("k").U32(kArray).U32(kI32).U64(1ull << 62).Zeros(64),
      "array of 4611686018427387904 i32 values");
  add("huge string array", Bytes().Header(3, 0, 1).Str("k").U32(kArray).U32(8).U64(1000).Zeros(64),
      "array of 1000 string values");
  add("unknown value type", Bytes().Header(3, 0, 1).Str("k").U32(13).U32(0), "metadata key 'k' has unknown value type 13");
  add("unknown array element type", Bytes().Header(3, 0, 1).Str("k").U32(kArray).U32(99).U64(0),
      "unknown element type 99");
  add("bool not 0 or 1", Bytes().Header(3, 0, 1).Str("k").U32(7).U8(2), "bool value 2");
  {
    Bytes b;
    b.Header(3, 0, 1).Str("deep").U32(kArray);
    for (int d = 0; d < 9; ++d) b.U32(kArray).U64(1);
    b.U32(kI32).U64(0);
    add("arrays nested too deep", b, "nested more than 8 deep");
  }
  add("duplicate key", Bytes().Header(3, 0, 2).KvU32("a", 1).KvU32("a", 2), "duplicate metadata key 'a'");
  add("alignment zero", Bytes().Header(3, 0, 1).KvU32("general.alignment", 0), "nonzero power of two");
  add("alignment not a power of two", Bytes().Header(3, 0, 1).KvU32("general.alignment", 48), "general.alignment is 48");
  add("alignment is a string", Bytes().Header(3, 0, 1).KvString("general.alignment", "32"), "has type string");
  add("misaligned offset", Bytes().Header(3, 1, 0).Tensor("t", {4}, kGgmlF32, 4).PadTo(32).Zeros(64),
      "tensor 't' data offset 4 is not a multiple of the alignment 32");
  add("overlapping tensors",
      Bytes().Header(3, 2, 0).Tensor("a", {16}, kGgmlF32, 0).Tensor("b", {8}, kGgmlF32, 32).PadTo(32).Zeros(64),
      "tensors 'a'");
  {
    Bytes b;
    b.Header(3, 1, 0).Tensor("blk.0.attn_q.weight", {8, 8}, kGgmlF32, 0).PadTo(32);
    size_t data = b.out.size();
    b.Zeros(100);
    add("tensor past end of file", b,
        "tensor 'blk.0.attn_q.weight' data [" + std::to_string(data) + ", " + std::to_string(data + 256) +
            ") extends past the end of the file (" + std::to_string(data + 100) + " bytes)");
  }
  add("tensor offset past end of file",
      Bytes().Header(3, 1, 0).Tensor("t", {1}, kGgmlF32, 1ull << 63).PadTo(32).Zeros(32), "past the end of the file");
  add("unknown tensor type", Bytes().Header(3, 1, 0).Tensor("t.w", {32}, 99, 0).PadTo(32).Zeros(128),
      "tensor 't.w' has unknown or unsupported ggml type 99");
  add("unsupported tensor type q4_1", Bytes().Header(3, 1, 0).Tensor("t.w", {32}, 3, 0).PadTo(32).Zeros(128),
      "unsupported ggml type 3");
  add("zero dimension", Bytes().Header(3, 1, 0).Tensor("t", {4, 0}, kGgmlF32, 0).PadTo(32),
      "tensor 't' has dimension 1 of size 0");
  add("negative dimension", Bytes().Header(3, 1, 0).Tensor("t", {~0ull}, kGgmlF32, 0).PadTo(32),
      "dimension 0 of size -1");
  add("too many dimensions", Bytes().Header(3, 1, 0).Tensor("t", {1, 1, 1, 1, 1}, kGgmlF32, 0).PadTo(32).Zeros(32),
      "tensor 't' has 5 dimensions");
  add("row not a multiple of the block", Bytes().Header(3, 1, 0).Tensor("q", {16}, kGgmlQ8_0, 0).PadTo(32).Zeros(64),
      "not a multiple of its block size 32");
  add("element count overflows",
      Bytes().Header(3, 1, 0).Tensor("big", {1ull << 40, 1ull << 40, 1ull << 40}, kGgmlF32, 0).PadTo(32).Zeros(32),
      "tensor 'big' of type f32 and shape [1099511627776, 1099511627776, 1099511627776] is too large");
  add("duplicate tensor names",
      Bytes().Header(3, 2, 0).Tensor("w", {8}, kGgmlF32, 0).Tensor("w", {8}, kGgmlF32, 32).PadTo(32).Zeros(64),
      "duplicate tensor name 'w'");
  return c;
}

TEST(GgufMalformed, EachFailsWithAUsefulMessage) {
  for (const Malformed& m : MalformedCases()) {
    SCOPED_TRACE(m.what);
    auto f = GgufFile::Parse(m.bytes, "bad.gguf");
    ASSERT_FALSE(f.ok()) << "parsed";
    const std::string& msg = f.status().message();
    EXPECT_EQ(msg.rfind("bad.gguf: ", 0), 0u) << msg;
    EXPECT_NE(msg.find(m.error), std::string::npos) << "message: " << msg << "\nexpected to contain: " << m.error;
  }
}

// The same inputs through Open(): the message starts with the path.
TEST(GgufMalformed, OpenPrefixesThePath) {
  std::string dir = ScratchDir("gguf-malformed");
  Malformed m = MalformedCases()[1];  // version 1
  std::string path = dir + "/v1.gguf";
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(m.bytes.data()),
                                              static_cast<std::streamsize>(m.bytes.size()));
  auto f = GgufFile::Open(path);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().message().rfind(path + ": GGUF version 1 is not supported", 0), 0u) << f.status().message();
}

}  // namespace
}  // namespace parallm
