// Vocab: reading GGUF and tokenizer.json vocabularies, and decoding ids back to text.
#include <gtest/gtest.h>

#include "formats/gguf.h"
#include "formats/llama2c.h"
#include "test_paths.h"
#include "tokenizer/vocab.h"

namespace parallm {
namespace {

Vocab FromGgufFixture(const std::string& name) {
  std::string path = testing::FixturePath("tokenizers/gguf-vocab/" + name);
  auto file = GgufFile::Open(path);
  EXPECT_TRUE(file.ok()) << file.status().message();
  auto v = Vocab::FromGguf(*file, path);
  EXPECT_TRUE(v.ok()) << v.status().message();
  return *v;
}

TEST(Vocab, LlamaSentencePieceFromGguf) {
  Vocab v = FromGgufFixture("ggml-vocab-llama-spm.gguf");
  EXPECT_EQ(v.model, "llama");
  EXPECT_EQ(v.size(), 32000);
  EXPECT_EQ(v.bos, 1);
  EXPECT_EQ(v.eos, 2);
  EXPECT_TRUE(v.add_bos);
  // <s> ▁Hello ▁world <0x21>: control tokens skipped, the leading space dropped, byte tokens as bytes.
  EXPECT_EQ(v.Decode(std::vector<int32_t>{1, 15043, 3186, 36}), "Hello world!");
}

TEST(Vocab, Gpt2ByteLevelFromGguf) {
  Vocab v = FromGgufFixture("ggml-vocab-gpt-2.gguf");
  EXPECT_EQ(v.model, "gpt2");
  EXPECT_EQ(v.size(), 50257);
  EXPECT_FALSE(v.merges.empty());
  EXPECT_EQ(v.Decode(std::vector<int32_t>{15496, 995}), "Hello world");  // "Hello", "Ġworld"
}

TEST(Vocab, Llama2cTokenizer) {
  auto tok = ReadLlama2cTokenizer(testing::FixturePath("models/stories260K/tok512.bin"));
  ASSERT_TRUE(tok.ok());
  Vocab v = Vocab::FromLlama2c(*tok);
  EXPECT_EQ(v.size(), 512);
  EXPECT_EQ(v.tokens[1], "<s>");
  EXPECT_EQ(v.types[3], static_cast<int32_t>(TokenType::kByte));
  EXPECT_EQ(v.Decode(std::vector<int32_t>{1, 13}), "\n");  // <0x0A>
}

TEST(Vocab, ByteLevelBuiltInRoundTripsEveryByte) {
  Vocab v = Vocab::ByteLevel(300);
  EXPECT_EQ(v.size(), 300);
  std::vector<int32_t> all(256);
  std::string expected;
  for (int b = 0; b < 256; ++b) {
    all[static_cast<size_t>(b)] = b;
    expected.push_back(static_cast<char>(b));
  }
  EXPECT_EQ(v.Decode(all), expected);
  EXPECT_EQ(v.Decode(std::vector<int32_t>{v.bos, 'h', 'i', v.eos, 299}), "hi");
}

TEST(Vocab, ByteLevelTokenizerJson) {
  auto qwen = Vocab::FromTokenizerJson(testing::FixturePath("tokenizers/qwen3/tokenizer.json"));
  ASSERT_TRUE(qwen.ok()) << qwen.status().message();
  EXPECT_EQ(qwen->model, "gpt2");
  EXPECT_EQ(qwen->size(), 151669);
  EXPECT_EQ(qwen->merges.size(), 151387u);  // merges stored as ["a", "b"] pairs
  EXPECT_EQ(qwen->tokens[static_cast<size_t>(qwen->eos)], "<|im_end|>");
  EXPECT_EQ(qwen->types[151643], static_cast<int32_t>(TokenType::kControl));  // <|endoftext|>
  auto llama3 = Vocab::FromTokenizerJson(testing::FixturePath("tokenizers/llama3/tokenizer.json"));
  ASSERT_TRUE(llama3.ok()) << llama3.status().message();
  EXPECT_EQ(llama3->merges.size(), 280147u);  // merges stored as "a b" strings
  EXPECT_EQ(llama3->tokens[static_cast<size_t>(llama3->bos)], "<|begin_of_text|>");
  EXPECT_TRUE(llama3->WritableToGguf());
}

TEST(Vocab, SentencePieceTokenizerJsonIsNotWritableToGguf) {
  auto v = Vocab::FromTokenizerJson(testing::FixturePath("tokenizers/llama2/tokenizer.json"));
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_EQ(v->size(), 32000);
  EXPECT_FALSE(v->WritableToGguf());
  EXPECT_EQ(v->Decode(std::vector<int32_t>{1, 15043, 3186}), "Hello world");
}

TEST(Vocab, BadTokenizerJson) {
  std::string dir = testing::ScratchDir("vocab-bad");
  auto missing = Vocab::FromTokenizerJson(dir + "/tokenizer.json");
  EXPECT_FALSE(missing.ok());
  std::FILE* f = std::fopen((dir + "/tokenizer.json").c_str(), "w");
  std::fputs(R"({"model": {"type": "Unigram", "vocab": []}})", f);
  std::fclose(f);
  auto unigram = Vocab::FromTokenizerJson(dir + "/tokenizer.json");
  ASSERT_FALSE(unigram.ok());
  EXPECT_NE(unigram.status().message().find("only BPE"), std::string::npos);
}

}  // namespace
}  // namespace parallm
