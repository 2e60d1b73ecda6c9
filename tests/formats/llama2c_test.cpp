// llama2.c readers: the real stories260K checkpoint and tokenizer, and damaged copies of them.
#include <cstring>
#include <fstream>
#include <iterator>

#include <gtest/gtest.h>

#include "formats/llama2c.h"
#include "test_paths.h"

namespace parallm {
namespace {

std::vector<uint8_t> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(Llama2c, ReadsStories260K) {
  auto ckpt = ReadLlama2cCheckpoint(testing::FixturePath("models/stories260K/stories260K.bin"));
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().message();
  const Llama2cConfig& c = ckpt->config;
  EXPECT_EQ(c.dim, 64);
  EXPECT_EQ(c.hidden_dim, 172);
  EXPECT_EQ(c.n_layers, 5);
  EXPECT_EQ(c.n_heads, 8);
  EXPECT_EQ(c.n_kv_heads, 4);
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.seq_len, 512);
  EXPECT_TRUE(c.shared_classifier);
  const TensorView* wk = ckpt->tensors.Find("blk.4.attn_k.weight");
  ASSERT_NE(wk, nullptr);
  EXPECT_EQ(wk->shape, (std::vector<int64_t>{32, 64}));
  EXPECT_EQ(ckpt->tensors.Find("output.weight"), nullptr);
  EXPECT_EQ(ckpt->tensors.tensors.size(), 1u + 9u * 5u + 1u);
}

TEST(Llama2c, RejectsTruncatedAndPaddedCheckpoints) {
  std::vector<uint8_t> bytes = ReadAll(testing::FixturePath("models/stories260K/stories260K.bin"));
  for (size_t size : {size_t{0}, size_t{27}, size_t{28}, bytes.size() / 2, bytes.size() - 4}) {
    auto r = ParseLlama2cCheckpoint(std::span<const uint8_t>(bytes.data(), size), "cut.bin");
    ASSERT_FALSE(r.ok()) << size;
    EXPECT_NE(r.status().message().find("cut.bin"), std::string::npos);
  }
  bytes.push_back(0);
  auto r = ParseLlama2cCheckpoint(bytes, "long.bin");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("does not match its llama2.c header"), std::string::npos) << r.status().message();
}

TEST(Llama2c, RejectsAbsurdHeaders) {
  std::vector<uint8_t> bytes = ReadAll(testing::FixturePath("models/stories260K/stories260K.bin"));
  for (int field = 0; field < 7; ++field) {
    std::vector<uint8_t> bad = bytes;
    int32_t huge = 0x7fffffff;
    std::memcpy(bad.data() + field * 4, &huge, 4);
    auto r = ParseLlama2cCheckpoint(bad, "huge.bin");
    EXPECT_FALSE(r.ok()) << field;
  }
}

TEST(Llama2c, ReadsTok512) {
  auto tok = ReadLlama2cTokenizer(testing::FixturePath("models/stories260K/tok512.bin"));
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  EXPECT_EQ(tok->max_token_length, 7);
  ASSERT_EQ(tok->pieces.size(), 512u);
  EXPECT_EQ(tok->pieces[1], "\n<s>\n");
  EXPECT_EQ(tok->pieces[3], "<0x00>");
}

TEST(Llama2c, RejectsTruncatedTokenizer) {
  std::vector<uint8_t> bytes = ReadAll(testing::FixturePath("models/stories260K/tok512.bin"));
  for (size_t size : {size_t{0}, size_t{3}, size_t{4}, size_t{10}, bytes.size() - 1}) {
    auto r = ParseLlama2cTokenizer(std::span<const uint8_t>(bytes.data(), size), "tok.bin");
    EXPECT_FALSE(r.ok()) << size;
  }
}

}  // namespace
}  // namespace parallm
