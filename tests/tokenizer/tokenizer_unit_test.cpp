// Tokenizer building blocks and edge cases: split behaviours, regex translation, normalizers, special-token
// parsing, invalid UTF-8, and inputs long enough that quadratic merging would take minutes.
#include <gtest/gtest.h>

#include "formats/llama2c.h"
#include "test_paths.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/regex.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace parallm {
namespace {

using Strings = std::vector<std::string>;

Tokenizer Load(const std::string& name) {
  auto tok = Tokenizer::FromTokenizerJson(testing::FixturePath("tokenizers/" + name + "/tokenizer.json"));
  if (!tok.ok()) {
    ADD_FAILURE() << tok.status().message();
    std::abort();
  }
  return std::move(tok).value();
}

// The examples of Rust tokenizers' SplitDelimiterBehavior documentation.
TEST(SplitText, Behaviours) {
  const Regex dash = Regex::Literal("-");
  const std::string text = "the-final--countdown";
  EXPECT_EQ(SplitText(text, dash, SplitBehavior::kRemoved, false), (Strings{"the", "final", "countdown"}));
  EXPECT_EQ(SplitText(text, dash, SplitBehavior::kIsolated, false), (Strings{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(SplitText(text, dash, SplitBehavior::kMergedWithPrevious, false), (Strings{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(SplitText(text, dash, SplitBehavior::kMergedWithNext, false), (Strings{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(SplitText(text, dash, SplitBehavior::kContiguous, false), (Strings{"the", "-", "final", "--", "countdown"}));
  // invert: matches become the kept pieces and the text between them the delimiters (each match on its own).
  EXPECT_EQ(SplitText(text, dash, SplitBehavior::kRemoved, true), (Strings{"-", "-", "-"}));
  EXPECT_EQ(SplitText(text, Regex::Literal("--"), SplitBehavior::kMergedWithNext, true), (Strings{"the-final--", "countdown"}));
}

TEST(Regex, OnigurumaTranslation) {
  auto tr = OnigurumaToPcre2("(?i:'s|'t)|\\p{L}+");
  ASSERT_TRUE(tr.ok());
  EXPECT_EQ(*tr, "(?:'[sS]|'[tT])|\\p{L}+");
  auto ci = Regex::FromOniguruma("(?i:'s)");
  ASSERT_TRUE(ci.ok());
  EXPECT_EQ(ci->FindAll("'S").size(), 1u);
  EXPECT_EQ(ci->FindAll("'\xC5\xBF").size(), 0u);  // U+017F LONG S folds to 's' in PCRE2, not in tokenizers.js
  auto space = Regex::FromOniguruma("\\s+");
  ASSERT_TRUE(space.ok());
  EXPECT_EQ(space->FindAll("\xC2\x85").size(), 1u);      // U+0085 is White_Space
  EXPECT_EQ(space->FindAll("\xE1\xA0\x8E").size(), 0u);  // U+180E is not (PCRE2's \h would say it is)
  EXPECT_FALSE(Regex::FromOniguruma("[a").ok());
  // Empty matches are skipped.
  auto empty = Regex::Compile("x*");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->FindAll("abxxc"), (std::vector<std::pair<size_t, size_t>>{{2, 4}}));
}

TEST(Normalizer, KindsFromJson) {
  auto lower = Normalizer::FromJson(boost::json::parse(R"({"type": "Lowercase"})"));
  ASSERT_TRUE(lower.ok());
  EXPECT_EQ((*lower)->Normalize("ΟΔΟΣ ΣΑΣ İ ABC"), "οδος σας i\xCC\x87 abc");  // final sigma, dotted I
  auto seq = Normalizer::FromJson(boost::json::parse(
      R"({"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Strip", "strip_left": true, "strip_right": true},
          {"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": " "}, {"type": "Prepend", "prepend": ">"}]})"));
  ASSERT_TRUE(seq.ok()) << seq.status().message();
  EXPECT_EQ((*seq)->Normalize("  \xEF\xAC\x81 x\t\ty  "), ">fi x y");  // U+FB01 ligature -> "fi" under NFKC
  EXPECT_EQ((*seq)->Normalize(""), "");
  EXPECT_FALSE(Normalizer::FromJson(boost::json::parse(R"({"type": "Nope"})")).ok());
}

TEST(Tokenizer, ParseSpecialControlsSpecialTokensOnly) {
  const Tokenizer qwen = Load("qwen3");
  EXPECT_EQ(qwen.Encode("<|im_end|>", false, true), std::vector<int32_t>{151645});
  const auto plain = qwen.Encode("<|im_end|>", false, false);
  EXPECT_GT(plain.size(), 1u);
  for (int32_t id : plain) EXPECT_FALSE(qwen.IsSpecial(id));
  EXPECT_EQ(qwen.Decode(plain, false), "<|im_end|>");
  EXPECT_EQ(qwen.eos_id(), 151645);
  EXPECT_EQ(qwen.bos_id(), -1);
  EXPECT_TRUE(qwen.IsSpecial(151645));
  EXPECT_EQ(qwen.TokenText(151645), "<|im_end|>");
  EXPECT_EQ(qwen.TokenToId("<|im_end|>"), 151645);
  // Non-special added tokens (Qwen3's <think>) are matched either way.
  EXPECT_EQ(qwen.Encode("<think>", false, false), std::vector<int32_t>{151667});

  const Tokenizer llama2 = Load("llama2");
  EXPECT_EQ(llama2.Encode("hi", true, false).front(), 1);  // BOS from the post-processor
  EXPECT_EQ(llama2.bos_id(), 1);
  EXPECT_TRUE(llama2.vocab().add_bos);
  EXPECT_EQ(llama2.Decode(llama2.Encode("Hello world", true, true), true), "Hello world");
}

// Invalid UTF-8 is replaced by U+FFFD per maximal invalid subsequence (WHATWG / from_utf8_lossy), then encoded.
TEST(Tokenizer, InvalidUtf8IsReplacedThenEncoded) {
  const std::string r = "\xEF\xBF\xBD";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"\xFF", r},
      {"a\x80" "b", "a" + r + "b"},
      {"\xC3(", r + "("},
      {"\xE2\x82", r},                // truncated at the end: one replacement
      {"\xE2\x82(", r + "("},
      {"\xED\xA0\x80", r + r + r},    // a UTF-16 surrogate: three
      {"\xC0\xAF", r + r},            // overlong: two
      {"\xF4\x90\x80\x80", r + r + r + r},
      {"\xF0\x9F\x98 ok", r + " ok"},
      {"fine \xE2\x82\xAC", "fine \xE2\x82\xAC"},
  };
  for (const auto& [bad, good] : cases) EXPECT_EQ(unicode::ToValidUtf8(bad), good) << bad;
  for (const char* name : {"qwen3", "llama3", "phi-3"}) {
    const Tokenizer tok = Load(name);
    for (const auto& [bad, good] : cases) {
      const std::string text = "x " + bad + " y";
      EXPECT_EQ(tok.Encode(text, true, true), tok.Encode("x " + good + " y", true, true)) << name;
      EXPECT_TRUE(unicode::IsValidUtf8(tok.Decode(tok.Encode(text, false, true), false))) << name;
    }
  }
  // Byte tokens that are not UTF-8 decode to U+FFFD.
  const Tokenizer llama2 = Load("llama2");
  const auto e2 = llama2.TokenToId("<0xE2>"), x82 = llama2.TokenToId("<0x82>");
  ASSERT_TRUE(e2 && x82);
  EXPECT_EQ(llama2.Decode(std::vector<int32_t>{*e2, *x82}, false), r);
  const Tokenizer qwen = Load("qwen3");
  const auto ff = qwen.TokenToId("\xC3\xBF");  // byte-level 'ÿ' is byte 0xFF
  ASSERT_TRUE(ff);
  EXPECT_EQ(qwen.Decode(std::vector<int32_t>{*ff}, false), r);
}

// Sizes at which an O(n^2) merge or split would run for minutes; they must simply finish and round-trip.
std::string PseudoRandomLetters(size_t n) {
  std::string s(n, 'a');
  uint32_t x = 12345;
  for (char& c : s) {
    x = x * 1103515245u + 12345u;
    c = static_cast<char>('a' + (x >> 16) % 26);
  }
  return s;
}

std::string Repeat(const std::string& unit, size_t n) {
  std::string s;
  s.reserve(unit.size() * n);
  for (size_t i = 0; i < n; ++i) s += unit;
  return s;
}

void ExpectLongInputsRoundTrip(const Tokenizer& tok, const std::string& name) {
  const std::vector<std::string> inputs = {
      PseudoRandomLetters(1 << 20),  // 1 MiB, no spaces: one pre-token of a million characters
      Repeat("a", 100000), Repeat("1", 100000), Repeat(" ", 100000), Repeat("\n", 100000),
      Repeat("\xF0\x9F\x98\x80", 100000),  // 100k emoji
      Repeat("ab ", 100000),               // many short words (cache)
  };
  for (const std::string& text : inputs) {
    const auto ids = tok.Encode(text, false, true);
    EXPECT_FALSE(ids.empty()) << name;
    EXPECT_LE(ids.size(), text.size() + 1) << name;  // at worst one byte token per byte, plus the "▁" prefix
    EXPECT_TRUE(tok.Decode(ids, false) == text) << name << ": a " << text.size() << "-byte input does not round-trip";
  }
}

TEST(LongInput, ByteLevelBpe) { ExpectLongInputsRoundTrip(Load("qwen3"), "qwen3"); }
TEST(LongInput, ByteLevelBpeIgnoreMerges) { ExpectLongInputsRoundTrip(Load("llama3"), "llama3"); }
TEST(LongInput, SentencePieceBpe) { ExpectLongInputsRoundTrip(Load("llama2"), "llama2"); }
TEST(LongInput, SentencePieceBpeWithoutPreTokenizer) { ExpectLongInputsRoundTrip(Load("gemma3"), "gemma3"); }
TEST(LongInput, Llama2cScores) {
  auto bin = ReadLlama2cTokenizer(testing::FixturePath("tokenizers/llama2/tokenizer.bin"));
  ASSERT_TRUE(bin.ok()) << bin.status().message();
  ExpectLongInputsRoundTrip(Tokenizer::FromLlama2c(*bin), "llama2.c");
}

TEST(Tokenizer, LoadErrorsAreClear) {
  auto missing = Tokenizer::FromTokenizerJson("/nonexistent/tokenizer.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/tokenizer.json"), std::string::npos);
  const std::string dir = testing::ScratchDir("tok-json");
  {
    std::FILE* f = std::fopen((dir + "/tokenizer.json").c_str(), "w");
    std::fputs(R"({"model": {"type": "WordPiece", "vocab": {}}})", f);
    std::fclose(f);
  }
  auto wordpiece = Tokenizer::FromTokenizerJson(dir + "/tokenizer.json");
  ASSERT_FALSE(wordpiece.ok());
  EXPECT_NE(wordpiece.status().message().find("WordPiece"), std::string::npos) << wordpiece.status().message();
}

}  // namespace
}  // namespace parallm
