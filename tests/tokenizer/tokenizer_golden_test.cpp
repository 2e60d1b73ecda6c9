// Tokenizer::Encode/Decode against tokenizers.js goldens (tests/tokenizer/golden/<name>.jsonl) for every corpus
// string: identical ids with and without special tokens, identical decoded text with and without skipping.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "golden_util.h"
#include "test_paths.h"
#include "tokenizer/tokenizer.h"

namespace parallm {
namespace {

std::string SourceDir() { return PARALLM_TOKENIZER_TEST_DIR; }

std::string Ids(const std::vector<int32_t>& ids) { return fmt::format("[{}]", fmt::join(ids, ",")); }

class GoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenTest, MatchesTokenizersJs) {
  const std::string name = GetParam();
  auto tok = Tokenizer::FromTokenizerJson(testing::FixturePath("tokenizers/" + name + "/tokenizer.json"));
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  const auto cases = testing::ReadGolden(SourceDir() + "/corpus.jsonl", SourceDir() + "/golden/" + name + ".jsonl");
  ASSERT_GE(cases.size(), 2000u) << "corpus and golden file disagree; regenerate with node/reference.mjs";
  size_t passed = 0, reported = 0;
  for (const auto& c : cases) {
    const auto ids = tok->Encode(c.text, false, true);
    const auto ids_special = tok->Encode(c.text, true, true);
    const std::string decoded = tok->Decode(c.ids_special, false);
    const std::string decoded_skip = tok->Decode(c.ids_special, true);
    const bool ok = ids == c.ids && ids_special == c.ids_special && decoded == c.decoded && decoded_skip == c.decoded_skip;
    passed += ok;
    if (!ok && reported++ < 8) {
      ADD_FAILURE() << name << " corpus id " << c.id << " text " << boost::json::serialize(boost::json::string(c.text))
                    << "\n  ids      " << Ids(ids) << "\n  expected " << Ids(c.ids)
                    << "\n  ids_special " << Ids(ids_special) << "\n  expected    " << Ids(c.ids_special)
                    << "\n  decoded  " << boost::json::serialize(boost::json::string(decoded))
                    << "\n  expected " << boost::json::serialize(boost::json::string(c.decoded))
                    << "\n  decoded_skip " << boost::json::serialize(boost::json::string(decoded_skip))
                    << "\n  expected     " << boost::json::serialize(boost::json::string(c.decoded_skip));
    }
  }
  std::printf("%s: %zu / %zu corpus strings identical to tokenizers.js (%.2f%%)\n", name.c_str(), passed, cases.size(),
              100.0 * static_cast<double>(passed) / static_cast<double>(cases.size()));
  EXPECT_EQ(passed, cases.size());
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, GoldenTest, ::testing::Values("qwen3", "llama3", "gemma3", "phi-3", "llama2"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

}  // namespace
}  // namespace parallm
