// Tests for the safetensors reader and writer: byte-exact output against the reference implementation's own
// test vectors, round trips of every plain dtype, and a table of malformed files that must fail cleanly.
#include "formats/safetensors.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <boost/json.hpp>
#include <gtest/gtest.h>

#include "test_paths.h"
#include "test_text.h"

namespace parallm {
namespace {

using testing::Contains;

std::vector<uint8_t> ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void WriteBytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// A safetensors file by hand: u64 LE length of `header`, `header`, then `data`.
std::vector<uint8_t> MakeFile(const std::string& header, const std::vector<uint8_t>& data, uint64_t length) {
  std::vector<uint8_t> out(8);
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(length >> (8 * i));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}
std::vector<uint8_t> MakeFile(const std::string& header, const std::vector<uint8_t>& data) {
  return MakeFile(header, data, header.size());
}

std::vector<uint8_t> F32Bytes(std::initializer_list<float> values) {
  std::vector<uint8_t> out(values.size() * 4);
  std::memcpy(out.data(), values.begin(), out.size());
  return out;
}

// The reference implementation's test_serialization: {"attn.0": F32 [1, 2, 3] = 0..5}. Its 64-byte header
// needs no padding, and the data follows at once.
TEST(Safetensors, WriterMatchesReferenceBytes) {
  std::string dir = testing::ScratchDir("st-reference");
  SafetensorsWriter w;
  ASSERT_TRUE(w.AddTensor("attn.0", DType::kF32, {1, 2, 3}, F32Bytes({0, 1, 2, 3, 4, 5})).ok());
  ASSERT_TRUE(w.Write(dir + "/a.safetensors").ok());
  std::vector<uint8_t> expected = {
      64,  0,  0,   0,  0,   0,  0,   0,   123, 34,  97,  116, 116, 110, 46,  48, 34, 58, 123, 34, 100, 116, 121, 112,
      101, 34, 58,  34, 70,  51, 50,  34,  44,  34,  115, 104, 97,  112, 101, 34, 58, 91, 49,  44, 50,  44,  51,  93,
      44,  34, 100, 97, 116, 97, 95,  111, 102, 102, 115, 101, 116, 115, 34,  58, 91, 48, 44,  50, 52,  93,  125, 125,
      0,   0,  0,   0,  0,   0,  128, 63,  0,   0,   0,   64,  0,   0,   64,  64, 0,  0,  128, 64, 0,   0,   160, 64};
  EXPECT_EQ(ReadBytes(dir + "/a.safetensors"), expected);
  EXPECT_FALSE(std::filesystem::exists(dir + "/a.safetensors.tmp"));
}

// The reference's test_serialization_forced_alignement: a 65-byte header is padded with 7 spaces to 72.
TEST(Safetensors, WriterPadsHeaderWithSpacesTo8Bytes) {
  std::string dir = testing::ScratchDir("st-padding");
  SafetensorsWriter w;
  ASSERT_TRUE(w.AddTensor("attn0", DType::kF32, {1, 1, 2, 3}, F32Bytes({0, 1, 2, 3, 4, 5})).ok());
  ASSERT_TRUE(w.Write(dir + "/a.safetensors").ok());
  std::vector<uint8_t> bytes = ReadBytes(dir + "/a.safetensors");
  ASSERT_EQ(bytes.size(), 8u + 72u + 24u);
  EXPECT_EQ(bytes[0], 72);
  std::string header(bytes.begin() + 8, bytes.begin() + 80);
  EXPECT_EQ(header, R"({"attn0":{"dtype":"F32","shape":[1,1,2,3],"data_offsets":[0,24]}})" + std::string(7, ' '));
}

// The reference's test_empty: no tensors gives "{}" and six spaces; metadata comes first in the header.
TEST(Safetensors, WriterEmptyAndMetadataOnly) {
  std::string dir = testing::ScratchDir("st-empty");
  SafetensorsWriter empty;
  ASSERT_TRUE(empty.Write(dir + "/e.safetensors").ok());
  EXPECT_EQ(ReadBytes(dir + "/e.safetensors"), MakeFile("{}      ", {}));

  SafetensorsWriter meta;
  meta.SetMetadata("framework", "pt");
  ASSERT_TRUE(meta.Write(dir + "/m.safetensors").ok());
  EXPECT_EQ(ReadBytes(dir + "/m.safetensors"), MakeFile(R"({"__metadata__":{"framework":"pt"}})"
                                                        "     ",
                                                        {}));

  auto r = ReadSafetensors(dir + "/m.safetensors");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->tensors.tensors.empty());
  EXPECT_EQ(r->metadata.at("framework"), "pt");
}

TEST(Safetensors, RoundTripsEveryPlainDtypeAndMetadata) {
  struct Case {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
  };
  std::vector<Case> cases = {
      {"f32", DType::kF32, {2, 3}},   {"f16", DType::kF16, {5}},   {"bf16", DType::kBF16, {3, 1}},
      {"f64", DType::kF64, {2}},      {"i8", DType::kI8, {7}},     {"u8", DType::kU8, {3, 3}},
      {"i16", DType::kI16, {1, 3}},   {"i32", DType::kI32, {4}},   {"i64", DType::kI64, {2, 1, 1}},
      {"u32", DType::kU32, {2, 2}},   {"bool", DType::kBool, {6}}, {"scalar", DType::kF32, {}},
      {"empty", DType::kF16, {0, 4}},
  };
  std::string dir = testing::ScratchDir("st-dtypes");
  SafetensorsWriter w;
  w.SetMetadata("format", "pt");
  w.SetMetadata("note", "ünïcode");
  std::vector<std::vector<uint8_t>> data;
  for (size_t i = 0; i < cases.size(); ++i) {
    int64_t n = 1;
    for (int64_t d : cases[i].shape) n *= d;
    std::vector<uint8_t> bytes(static_cast<size_t>(n) * Info(cases[i].dtype).block_bytes);
    for (size_t b = 0; b < bytes.size(); ++b) bytes[b] = static_cast<uint8_t>(i * 31 + b * 7 + 1);
    data.push_back(bytes);
    ASSERT_TRUE(w.AddTensor(cases[i].name, cases[i].dtype, cases[i].shape, bytes).ok()) << cases[i].name;
  }
  size_t total = 0;
  for (const auto& d : data) total += d.size();
  EXPECT_EQ(w.data_bytes(), total);
  const std::string path = dir + "/all.safetensors";
  ASSERT_TRUE(w.Write(path).ok());

  auto r = ReadSafetensors(path);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->metadata, (std::map<std::string, std::string>{{"format", "pt"}, {"note", "ünïcode"}}));
  ASSERT_EQ(r->tensors.tensors.size(), cases.size());
  ASSERT_EQ(r->tensors.owners.size(), 1u);  // the mmap
  const uint8_t* first = nullptr;
  for (size_t i = 0; i < cases.size(); ++i) {
    const TensorView* v = r->tensors.Find(cases[i].name);
    ASSERT_NE(v, nullptr) << cases[i].name;
    EXPECT_EQ(v->dtype, cases[i].dtype) << cases[i].name;
    EXPECT_EQ(v->shape, cases[i].shape) << cases[i].name;
    ASSERT_EQ(v->nbytes, data[i].size()) << cases[i].name;
    if (v->nbytes > 0) {
      EXPECT_EQ(std::memcmp(v->data, data[i].data(), v->nbytes), 0) << cases[i].name;
    }
    if (i == 0) first = v->data;
  }
  // Data starts 8-byte aligned in the file (and the mmap is page aligned), and tensors follow in the order added.
  EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % 8, 0u);
  std::vector<uint8_t> bytes = ReadBytes(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  auto header = boost::json::parse(std::string(bytes.begin() + 8, bytes.begin() + 8 + static_cast<long>(n)));
  std::vector<std::string> order;
  uint64_t expected_begin = 0;
  for (const auto& kv : header.as_object()) {
    order.emplace_back(kv.key());
    if (kv.key() == "__metadata__") continue;
    const auto& offsets = kv.value().at("data_offsets").as_array();
    EXPECT_EQ(offsets[0].to_number<uint64_t>(), expected_begin) << kv.key();
    expected_begin = offsets[1].to_number<uint64_t>();
  }
  ASSERT_EQ(order.size(), cases.size() + 1);
  EXPECT_EQ(order[0], "__metadata__");
  for (size_t i = 0; i < cases.size(); ++i) EXPECT_EQ(order[i + 1], cases[i].name);
}

TEST(Safetensors, ViewsOutliveTheFileObjectAndTheDirectoryEntry) {
  std::string dir = testing::ScratchDir("st-owner");
  SafetensorsWriter w;
  ASSERT_TRUE(w.AddTensor("x", DType::kF32, {3}, F32Bytes({1.5f, -2, 3})).ok());
  ASSERT_TRUE(w.Write(dir + "/x.safetensors").ok());
  TensorSet set;
  {
    auto r = ReadSafetensors(dir + "/x.safetensors");
    ASSERT_TRUE(r.ok()) << r.status().message();
    set = r->tensors;
  }
  std::filesystem::remove(dir + "/x.safetensors");
  const TensorView* v = set.Find("x");
  ASSERT_NE(v, nullptr);
  float values[3];
  std::memcpy(values, v->data, sizeof(values));
  EXPECT_EQ(values[0], 1.5f);
  EXPECT_EQ(values[1], -2.0f);
  EXPECT_EQ(values[2], 3.0f);
}

TEST(Safetensors, WriterRejectsWhatTheFormatCannotHold) {
  SafetensorsWriter w;
  std::vector<uint8_t> bytes(34);
  EXPECT_TRUE(Contains(w.AddTensor("q", DType::kQ8_0, {32}, bytes).message(), "GGML block type"));
  EXPECT_TRUE(
      Contains(w.AddTensor("x", DType::kF32, {3}, std::vector<uint8_t>(8)).message(), "f32 [3] needs 12 bytes, got 8"));
  EXPECT_TRUE(Contains(w.AddTensor("x", DType::kF32, {-1}, std::vector<uint8_t>(4)).message(), "negative"));
  EXPECT_TRUE(Contains(w.AddTensor("__metadata__", DType::kU8, {1}, std::vector<uint8_t>(1)).message(),
                       "cannot store a tensor named"));
  ASSERT_TRUE(w.AddTensor("x", DType::kU8, {1}, std::vector<uint8_t>(1)).ok());
  EXPECT_TRUE(Contains(w.AddTensor("x", DType::kU8, {1}, std::vector<uint8_t>(1)).message(), "added twice"));
  EXPECT_EQ(w.data_bytes(), 1u);
}

TEST(Safetensors, WriteToAMissingFolderFailsWithThePath) {
  SafetensorsWriter w;
  Status s = w.Write("/nonexistent-parallm-dir/x.safetensors");
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(Contains(s.message(), "/nonexistent-parallm-dir/x.safetensors.tmp: cannot open for writing"));
}

// A small valid file cut short at every byte: each prefix must give a clean error naming the file.
TEST(Safetensors, TruncatedAtEveryByteFailsCleanly) {
  std::string dir = testing::ScratchDir("st-truncate");
  SafetensorsWriter w;
  w.SetMetadata("format", "pt");
  ASSERT_TRUE(w.AddTensor("a", DType::kF16, {2, 2}, std::vector<uint8_t>(8, 0x3c)).ok());
  ASSERT_TRUE(w.AddTensor("b", DType::kI32, {3}, std::vector<uint8_t>(12, 7)).ok());
  ASSERT_TRUE(w.Write(dir + "/t.safetensors").ok());
  std::vector<uint8_t> bytes = ReadBytes(dir + "/t.safetensors");
  ASSERT_TRUE(ParseSafetensors(bytes, "t.safetensors").ok());
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<long>(n));
    auto r = ParseSafetensors(cut, "t.safetensors");
    ASSERT_FALSE(r.ok()) << "prefix of " << n << " bytes parsed";
    EXPECT_EQ(r.status().message().rfind("t.safetensors: ", 0), 0u) << r.status().message();
  }
  // The same through the file reader, with the path in the message.
  WriteBytes(dir + "/cut.safetensors", std::vector<uint8_t>(bytes.begin(), bytes.end() - 1));
  auto r = ReadSafetensors(dir + "/cut.safetensors");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(
      Contains(r.status().message(),
               dir + "/cut.safetensors: tensor 'b': data_offsets [8, 20] run past the end of the data (19 bytes)"));
  auto missing = ReadSafetensors(dir + "/missing.safetensors");
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(Contains(missing.status().message(), dir + "/missing.safetensors: cannot open"));
}

struct MalformedSafetensors {
  std::string what;
  std::vector<uint8_t> bytes;
  std::string error;  // expected in the message, after "bad.safetensors: "
};

std::string Entry(const std::string& name, const std::string& dtype, const std::string& shape,
                  const std::string& offsets) {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":" + offsets + "}";
}

std::vector<MalformedSafetensors> MalformedFiles() {
  std::vector<uint8_t> d8(8, 0), d16(16, 0);
  std::string a8 = Entry("a", "F32", "[2]", "[0,8]");
  return {
      {"empty file", {}, "file is 0 bytes, too short for the 8-byte header length"},
      {"seven bytes", {2, 0, 0, 0, 0, 0, 0}, "file is 7 bytes, too short"},
      {"huge header length", MakeFile("{}", {}, uint64_t{1} << 63),
       "header length 9223372036854775808 is over the 100000000 byte limit"},
      {"header just over the limit", MakeFile("{}", {}, 100'000'001), "is over the 100000000 byte limit"},
      {"header past the end", MakeFile("{}", {}, 3), "header length 3 runs past the end of the file (10 bytes)"},
      {"bad JSON", MakeFile("{\"a\":", {}), "header is not valid JSON at byte 13"},
      {"trailing garbage", MakeFile("{} x", {}), "header is not valid JSON at byte 11"},
      {"NUL padding", MakeFile(std::string("{}\0\0", 4), {}), "header is not valid JSON at byte 10"},
      {"invalid UTF-8", MakeFile("{\"\xff\":1}", {}), "header is not valid JSON"},
      {"top level array", MakeFile("[]", {}), "header is JSON but not an object"},
      {"entry not an object", MakeFile("{\"a\":[1]}", {}), "tensor 'a': entry is not a JSON object"},
      {"missing dtype", MakeFile("{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", d8),
       "tensor 'a': missing \"dtype\""},
      {"missing shape", MakeFile("{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", d8),
       "tensor 'a': missing \"shape\""},
      {"missing offsets", MakeFile("{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", d8),
       "tensor 'a': missing \"data_offsets\""},
      {"dtype not a string", MakeFile("{\"a\":{\"dtype\":4,\"shape\":[2],\"data_offsets\":[0,8]}}", d8),
       "\"dtype\" is not a string"},
      {"fp8 dtype", MakeFile("{" + Entry("w", "F8_E4M3", "[8]", "[0,8]") + "}", d8),
       "tensor 'w' has dtype 'F8_E4M3', which parallm does not read"},
      {"lower-case dtype", MakeFile("{" + Entry("w", "f32", "[2]", "[0,8]") + "}", d8), "tensor 'w' has dtype 'f32'"},
      {"GGML dtype", MakeFile("{" + Entry("w", "Q8_0", "[32]", "[0,34]") + "}", std::vector<uint8_t>(34)),
       "has dtype 'Q8_0'"},
      {"shape not an array", MakeFile("{" + Entry("a", "F32", "2", "[0,8]") + "}", d8), "\"shape\" is not an array"},
      {"negative shape", MakeFile("{" + Entry("a", "F32", "[-2]", "[0,8]") + "}", d8),
       "tensor 'a': shape entry -2 is not a non-negative integer"},
      {"fractional shape", MakeFile("{" + Entry("a", "F32", "[2.5]", "[0,8]") + "}", d8), "shape entry 2.5 is not"},
      {"string shape", MakeFile("{" + Entry("a", "F32", "[\"2\"]", "[0,8]") + "}", d8), "not a non-negative integer"},
      {"shape entry over int64", MakeFile("{" + Entry("a", "U8", "[9223372036854775808]", "[0,8]") + "}", d8),
       "not a non-negative integer"},
      {"size overflow", MakeFile("{" + Entry("a", "F32", "[4611686018427387904,8]", "[0,8]") + "}", d8),
       "is too large (size overflows)"},
      {"element overflow", MakeFile("{" + Entry("a", "U8", "[4294967296,4294967296]", "[0,8]") + "}", d8),
       "size overflows"},
      {"shape/size mismatch", MakeFile("{" + Entry("a", "F32", "[3]", "[0,8]") + "}", d8),
       "tensor 'a': F32 [3] takes 12 bytes but data_offsets [0, 8] hold 8"},
      {"offsets not a pair", MakeFile("{" + Entry("a", "F32", "[2]", "[0,8,8]") + "}", d8), "not a [begin, end] pair"},
      {"negative offset", MakeFile("{" + Entry("a", "F32", "[2]", "[-8,0]") + "}", d8), "not non-negative integers"},
      {"offsets reversed", MakeFile("{" + Entry("a", "F32", "[0]", "[8,0]") + "}", d8),
       "data_offsets [8, 0] end before they begin"},
      {"offset out of range", MakeFile("{" + Entry("a", "F32", "[25]", "[0,100]") + "}", d8),
       "data_offsets [0, 100] run past the end of the data (8 bytes)"},
      {"huge offsets",
       MakeFile("{" + Entry("a", "F32", "[2]", "[18446744073709551608,18446744073709551615]") + "}", d8),
       "run past the end"},
      {"overlap", MakeFile("{" + a8 + "," + Entry("b", "F32", "[2]", "[4,12]") + "}", d16),
       "tensors 'a' [0, 8] and 'b' [4, 12] overlap"},
      {"same range twice", MakeFile("{" + a8 + "," + Entry("b", "F32", "[2]", "[0,8]") + "}", d8), "overlap"},
      {"gap", MakeFile("{" + Entry("b", "F32", "[2]", "[8,16]") + "}", d16), "gap of 8 bytes before tensor 'b'"},
      {"trailing bytes", MakeFile("{" + a8 + "}", d16), "the tensors cover 8 bytes of data but the file holds 16"},
      {"duplicate tensor", MakeFile("{" + a8 + "," + a8 + "}", d8), "header names 'a' twice in one object"},
      {"duplicate field",
       MakeFile("{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,8]}}", d8),
       "header names 'dtype' twice"},
      {"metadata not an object", MakeFile("{\"__metadata__\":[]}", {}), "\"__metadata__\" is not a JSON object"},
      {"metadata value not a string", MakeFile("{\"__metadata__\":{\"n\":1}}", {}),
       "\"__metadata__\" value for 'n' is not a string"},
      {"too deep", MakeFile(std::string(40, '[') + std::string(40, ']'), {}), "header is not valid JSON"},
  };
}

TEST(Safetensors, MalformedFilesFailWithClearErrors) {
  for (const MalformedSafetensors& m : MalformedFiles()) {
    auto r = ParseSafetensors(m.bytes, "bad.safetensors");
    ASSERT_FALSE(r.ok()) << m.what << " parsed";
    const std::string& msg = r.status().message();
    EXPECT_EQ(msg.rfind("bad.safetensors: ", 0), 0u) << m.what << ": " << msg;
    EXPECT_TRUE(Contains(msg, m.error)) << m.what;
  }
}

TEST(Safetensors, HandMadeFilesInAnyKeyOrderParse) {
  // Offsets need not follow header order; zero-size tensors may sit anywhere, even sharing an offset.
  std::vector<uint8_t> data = F32Bytes({1, 2, 3});
  std::string header = "{" + Entry("late", "F32", "[2]", "[4,12]") + "," + Entry("none", "F32", "[0,5]", "[4,4]") +
                       "," + Entry("early", "F32", "[]", "[0,4]") + "}  ";
  std::vector<uint8_t> file = MakeFile(header, data);  // the views point into it
  auto r = ParseSafetensors(file, "h.safetensors");
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->tensors.tensors.size(), 3u);
  EXPECT_EQ(r->tensors.Find("early")->NumElements(), 1);
  EXPECT_EQ(r->tensors.Find("none")->nbytes, 0u);
  float late[2];
  std::memcpy(late, r->tensors.Find("late")->data, 8);
  EXPECT_EQ(late[0], 2.0f);
  EXPECT_EQ(late[1], 3.0f);
  EXPECT_TRUE(r->tensors.owners.empty());  // no owner given: the caller keeps the bytes alive
}

// The regression corpus names say what each input is: valid-* must parse and bad-* must fail (the
// fuzz_regression_test only checks that nothing crashes).
TEST(Safetensors, CorpusFilesParseAsTheirNamesSay) {
  const std::filesystem::path dir = std::filesystem::path(PARALLM_FUZZ_CORPUS) / "safetensors";
  int valid = 0, bad = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    std::vector<uint8_t> bytes = ReadBytes(entry.path().string());
    auto r = ParseSafetensors(bytes, name);
    if (name.rfind("valid-", 0) == 0) {
      EXPECT_TRUE(r.ok()) << r.status().message();
      ++valid;
    } else if (name.rfind("bad-", 0) == 0) {
      EXPECT_FALSE(r.ok()) << name << " parsed";
      ++bad;
    }
  }
  EXPECT_GE(valid, 5);
  EXPECT_GE(bad, 20);
}

}  // namespace
}  // namespace parallm
