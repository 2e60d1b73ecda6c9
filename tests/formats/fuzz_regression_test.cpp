// Replays the fuzzing regression corpus (tests/fuzz/corpus/<parser>/*) through each parser in the normal
// build: every input must give a value or a clean error, never a crash (the sanitizer build catches
// out-of-bounds reads on the same inputs).
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include <gtest/gtest.h>

#include "formats/gguf.h"
#include "formats/llama2c.h"
#include "formats/safetensors.h"

namespace parallm {
namespace {

std::vector<std::filesystem::path> CorpusFiles(const std::string& parser) {
  std::vector<std::filesystem::path> files;
  std::filesystem::path dir = std::filesystem::path(PARALLM_FUZZ_CORPUS) / parser;
  if (!std::filesystem::exists(dir)) return files;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.is_regular_file()) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<uint8_t> ReadBytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(FuzzRegression, GgufCorpusParsesOrFailsCleanly) {
  auto files = CorpusFiles("gguf");
  ASSERT_FALSE(files.empty()) << "the gguf corpus is missing";
  for (const auto& f : files) {
    std::vector<uint8_t> bytes = ReadBytes(f);
    auto r = GgufFile::Parse(bytes, f.filename().string());
    if (!r.ok()) {
      EXPECT_FALSE(r.status().message().empty()) << f;
    }
  }
}

TEST(FuzzRegression, SafetensorsCorpusParsesOrFailsCleanly) {
  auto files = CorpusFiles("safetensors");
  ASSERT_FALSE(files.empty()) << "the safetensors corpus is missing";
  for (const auto& f : files) {
    std::vector<uint8_t> bytes = ReadBytes(f);
    auto r = ParseSafetensors(bytes, f.filename().string());
    if (!r.ok()) {
      EXPECT_FALSE(r.status().message().empty()) << f;
    }
  }
}

TEST(FuzzRegression, Llama2cCorpusParsesOrFailsCleanly) {
  auto files = CorpusFiles("llama2c");
  ASSERT_FALSE(files.empty()) << "the llama2c corpus is missing";
  int parsed = 0;
  for (const auto& f : files) {
    std::vector<uint8_t> bytes = ReadBytes(f);
    auto ckpt = ParseLlama2cCheckpoint(bytes, f.filename().string());
    auto tok = ParseLlama2cTokenizer(bytes, f.filename().string());
    parsed += ckpt.ok() + tok.ok();
  }
  EXPECT_GE(parsed, 3);  // the seeds include valid checkpoints and a valid tokenizer
}

}  // namespace
}  // namespace parallm
