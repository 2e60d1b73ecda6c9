// Exact token masks on tiny vocabularies: which tokens are allowed after which bytes, multi-byte UTF-8 split
// across tokens, SentencePiece byte tokens, special tokens never allowed, EOS only where the grammar may end.
#include <gtest/gtest.h>

#include "formats/llama2c.h"
#include "byte_vocab.h"
#include "structured/gbnf.h"
#include "structured/matcher.h"
#include "structured/structured_output.h"
#include "test_paths.h"
#include "tokenizer/tokenizer.h"

namespace parallm::structured {
namespace {

std::shared_ptr<const CompiledGrammar> Compile(const std::string& gbnf, std::shared_ptr<const TokenVocab> vocab) {
  auto g = ParseGbnf(gbnf);
  EXPECT_TRUE(g.ok()) << g.status().message();
  return std::make_shared<const CompiledGrammar>(std::move(*g), std::move(vocab));
}

// The allowed token ids, in order, with `eos` added where the grammar may end.
std::vector<int32_t> Allowed(const GrammarMatcher& m, std::vector<int32_t> eos = {}) {
  std::vector<uint32_t> mask(static_cast<size_t>(m.grammar().vocab().mask_words()));
  m.FillMask(mask, eos);
  std::vector<int32_t> ids;
  for (int32_t t = 0; t < m.grammar().vocab_size(); ++t)
    if (mask[static_cast<size_t>(t) >> 5] >> (t & 31) & 1) ids.push_back(t);
  return ids;
}

using Ids = std::vector<int32_t>;

TEST(Matcher, ExactMasksAndEos) {
  //                                      0    1    2     3     4      5    6         7 (special)  8
  auto vocab = TokenVocab::FromBytes({"a", "b", "ab", "abc", "c", "cc", "x", std::nullopt, "bc"});
  auto g = Compile(R"g(root ::= "a" "b" "c"*)g", vocab);
  GrammarMatcher m(g);
  EXPECT_EQ(Allowed(m, {7}), (Ids{0, 2, 3}));
  EXPECT_FALSE(m.CanEnd());
  ASSERT_TRUE(m.AcceptToken(0));  // "a"
  EXPECT_EQ(Allowed(m, {7}), (Ids{1, 8}));
  EXPECT_FALSE(m.AcceptToken(4));  // "c" before "b": refused, state unchanged
  ASSERT_TRUE(m.AcceptToken(1));   // "b": complete, more c's may follow
  EXPECT_TRUE(m.CanEnd());
  EXPECT_FALSE(m.IsTerminated());
  EXPECT_EQ(Allowed(m, {7}), (Ids{4, 5, 7}));  // EOS (7) allowed only now
  EXPECT_FALSE(m.AcceptToken(7));              // a special token is never part of the text
  ASSERT_TRUE(m.AcceptToken(5));
  EXPECT_EQ(Allowed(m, {7}), (Ids{4, 5, 7}));
  // A grammar that must stop: after "ab" only EOS remains.
  auto fixed = Compile(R"g(root ::= "ab")g", vocab);
  GrammarMatcher f(fixed);
  ASSERT_TRUE(f.AcceptToken(2));
  EXPECT_TRUE(f.IsTerminated());
  EXPECT_EQ(Allowed(f, {7}), (Ids{7}));
  // Masks are cached per state and shared between matchers of one grammar.
  GrammarMatcher m2(g);
  const int32_t cached = g->num_cached_masks();
  EXPECT_EQ(Allowed(m2), (Ids{0, 2, 3}));
  EXPECT_EQ(g->num_cached_masks(), cached);
}

TEST(Matcher, Utf8SplitAcrossTokens) {
  // "é" is C3 A9; "ü" is C3 BC. Tokens may hold a lead byte alone, a continuation alone, or the whole char.
  auto vocab = TokenVocab::FromBytes({"\xC3", "\xA9", "\xC3\xA9", "e", "\xBC", "\xC3\xA9\xC3", "\""});
  auto g = Compile(R"g(root ::= "\"" [é]+ "\"")g", vocab);
  GrammarMatcher m(g);
  EXPECT_EQ(Allowed(m), (Ids{6}));
  ASSERT_TRUE(m.AcceptToken(6));
  EXPECT_EQ(Allowed(m), (Ids{0, 2, 5}));  // the lead byte alone, the whole char, char + next lead byte
  ASSERT_TRUE(m.AcceptToken(0));
  EXPECT_EQ(Allowed(m), (Ids{1}));  // only A9 completes é (not BC: ü is outside the class)
  ASSERT_TRUE(m.AcceptToken(1));
  EXPECT_EQ(Allowed(m), (Ids{0, 2, 5, 6}));
}

TEST(Matcher, SentencePieceByteTokensAndSpecials) {
  auto bin = ReadLlama2cTokenizer(testing::FixturePath("models/stories260K/tok512.bin"));
  ASSERT_TRUE(bin.ok()) << bin.status().message();
  const Tokenizer tok = Tokenizer::FromLlama2c(*bin);
  auto vocab = TokenVocab::FromTokenizer(tok, 520);  // the model pads past the tokenizer: never allowed
  EXPECT_EQ(vocab->size(), 520);
  EXPECT_EQ(vocab->bytes(3), std::string(1, '\0'));  // <0x00>
  EXPECT_EQ(vocab->bytes(3 + 'A'), "A");             // <0x41>
  EXPECT_TRUE(vocab->bytes(1).empty());              // <s>
  EXPECT_TRUE(vocab->bytes(2).empty());              // </s>
  EXPECT_TRUE(vocab->bytes(515).empty());
  const auto space_the = tok.TokenToId("\xE2\x96\x81the");
  ASSERT_TRUE(space_the.has_value());
  EXPECT_EQ(vocab->bytes(*space_the), " the");
  auto g = Compile(R"g(root ::= " the" | "\n")g", vocab);
  GrammarMatcher m(g);
  const Ids allowed = Allowed(m, {2});
  // Every allowed token's bytes are a prefix of an accepted string, and the byte tokens for ' ' and '\n' are there.
  for (int32_t t : allowed) {
    const std::string& b = vocab->bytes(t);
    EXPECT_TRUE(std::string(" the").rfind(b, 0) == 0 || b == "\n") << t;
  }
  EXPECT_NE(std::find(allowed.begin(), allowed.end(), 3 + ' '), allowed.end());
  EXPECT_NE(std::find(allowed.begin(), allowed.end(), 3 + '\n'), allowed.end());
  EXPECT_NE(std::find(allowed.begin(), allowed.end(), *space_the), allowed.end());
  EXPECT_EQ(std::find(allowed.begin(), allowed.end(), 2), allowed.end());  // EOS: not complete yet
}

TEST(Matcher, PrefixAndChoiceThroughCompiler) {
  std::vector<std::optional<std::string>> bytes;
  for (int b = 0; b < 128; ++b) bytes.push_back(std::string(1, static_cast<char>(b)));
  bytes.push_back("<tool_call>");
  GrammarCompiler compiler(TokenVocab::FromBytes(bytes));
  StructuredOutput spec;
  spec.kind = StructuredOutput::Kind::kChoice;
  spec.choices = {"yes", "no"};
  spec.prefix = "<tool_call>";
  spec.suffix = "!";
  auto g = compiler.Compile(spec);
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(*compiler.Compile(spec), *g);  // cached
  GrammarMatcher m(*g);
  EXPECT_EQ(Allowed(m), (Ids{'<', 128}));
  ASSERT_TRUE(m.AcceptToken(128));
  EXPECT_EQ(Allowed(m), (Ids{'n', 'y'}));
  ASSERT_TRUE(m.AcceptBytes("no"));
  EXPECT_FALSE(m.CanEnd());
  EXPECT_EQ(Allowed(m), (Ids{'!'}));
  ASSERT_TRUE(m.AcceptBytes("!"));
  EXPECT_TRUE(m.IsTerminated());
  spec.choices.clear();
  EXPECT_EQ(compiler.Compile(spec).status().message(), "choice: the list of choices is empty");
  StructuredOutput bad{StructuredOutput::Kind::kGbnf, "root ::= x", {}, "", ""};
  EXPECT_EQ(compiler.Compile(bad).status().message(), "grammar: rule 'x' is used but never defined");
}

// Walks `schema` at random (`walks` requests of up to 40 tokens) and checks at every state that the mask equals
// the token-by-token answer, with EOS (`eos`, a token no grammar allows) exactly where the grammar may end.
void CheckMasksAgainstTokens(const std::vector<std::optional<std::string>>& bytes, const std::string& schema,
                             int walks, uint64_t seed, int* checked, int* run_masks) {
  auto rand = [&](uint64_t n) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return (seed >> 33) % n;
  };
  int32_t eos = -1;
  for (size_t i = 0; i < bytes.size() && eos < 0; ++i)
    if (!bytes[i]) eos = static_cast<int32_t>(i);
  ASSERT_GE(eos, 0);
  GrammarCompiler compiler(TokenVocab::FromBytes(bytes));
  auto g = compiler.Compile({StructuredOutput::Kind::kJsonSchema, schema, {}, "", ""});
  ASSERT_TRUE(g.ok()) << g.status().message();
  for (int walk = 0; walk < walks; ++walk) {
    GrammarMatcher m(*g);
    for (int step = 0; step < 40; ++step) {
      const Ids allowed = Allowed(m, {eos});
      Ids expected;
      for (int32_t t = 0; t < static_cast<int32_t>(bytes.size()); ++t) {
        GrammarMatcher copy = m;
        if (copy.AcceptToken(t) || (t == eos && m.CanEnd())) expected.push_back(t);
      }
      ASSERT_EQ(allowed, expected) << "walk " << walk << " step " << step;
      ++*checked;
      Ids text;
      for (int32_t t : allowed)
        if (t != eos) text.push_back(t);
      if (text.empty()) break;
      ASSERT_TRUE(m.AcceptToken(text[rand(text.size())]));
    }
  }
  *run_masks += (*g)->num_run_masks();
}

// A vocabulary of every byte and random pieces over `alphabet` (2-7 pieces each), then one special token.
std::vector<std::optional<std::string>> RandomVocab(const std::vector<std::string>& alphabet, int pieces, uint64_t seed) {
  auto rand = [&](uint64_t n) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return (seed >> 33) % n;
  };
  std::vector<std::optional<std::string>> bytes;
  for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, static_cast<char>(b)));
  for (int i = 0; i < pieces; ++i) {
    std::string piece;
    for (uint64_t k = 0, n = 2 + rand(6); k < n; ++k) piece += alphabet[rand(alphabet.size())];
    bytes.push_back(piece);
  }
  bytes.push_back(std::nullopt);
  return bytes;
}

// The trie walk's masks (with its shortcuts: refused bytes skip a subtree, a looping state covers one, a state
// that takes runs of a character class reads its class tokens from the vocabulary's RunTable and skips them in
// the walk) equal the token-by-token answer, at every state of random walks through JSON Schemas: free strings
// (self-loops, multi-byte characters that come back to them), counted strings with minimum and maximum lengths
// (runs), an e-mail format (a run of an ASCII class), escapes, nested objects and arrays, characters split across
// tokens, EOS; over vocabularies of random pieces.
TEST(Matcher, MasksEqualTokenByTokenAnswers) {
  const std::vector<std::string> alphabet = {"a", "b", "\"", "\\", "n", "\xC3\xA9", "\xE2\x82\xAC", "{", "}", ":",
                                             " ", ",", "1", "\xF0\x9F\x98\x80", "\xC3", "\xA9"};
  int checked = 0, run_masks = 0;
  const std::string schema = R"({"type": "object", "properties": {"s": {"type": "string"},
      "t": {"type": "string", "maxLength": 3}, "u": {"type": "array", "items": {"type": "string"}}},
      "required": ["s", "t", "u"], "additionalProperties": false})";
  CheckMasksAgainstTokens(RandomVocab(alphabet, 600, 12345), schema, 20, 12345, &checked, &run_masks);
  // Counted strings of many lengths, nested; letters for the e-mail address; characters cut at any byte.
  const std::vector<std::string> letters = {"a", "b", "Z", "x", "_", "-", "+", "@", ".", "\"", "\\", "n", "u", "0",
                                            "\xC3\xA9", "\xE4\xB8\xAD", "\xE4", "\xB8\xAD", "\xF0\x9F\x98\x80",
                                            "\xF0\x9F", ",", ":", " ", "}", "]", "\n"};
  const std::string counted = R"({"type": "object", "properties": {
      "a": {"type": "string", "minLength": 2, "maxLength": 5},
      "b": {"type": "array", "items": {"type": "object", "properties": {
          "c": {"type": "string", "maxLength": 12}, "d": {"type": "string", "minLength": 3}},
          "required": ["c", "d"], "additionalProperties": false}, "maxItems": 2},
      "e": {"type": "string", "format": "email"},
      "f": {"type": "string", "maxLength": 1}},
      "required": ["a", "b", "e", "f"], "additionalProperties": false})";
  CheckMasksAgainstTokens(RandomVocab(letters, 900, 777), counted, 24, 99, &checked, &run_masks);
  // A class for three characters, then a narrower one: only the part that takes the whole class may be a run.
  CheckMasksAgainstTokens(RandomVocab(letters, 900, 778), R"({"type": "string", "pattern": "^[a-zA-Z_+-]{3}[ab]{2}$"})",
                          8, 5, &checked, &run_masks);
  EXPECT_GT(checked, 600);
  EXPECT_GT(run_masks, 20);  // the RunTable path was taken
}

// Which states read their mask from a RunTable (the speed of string-heavy JSON depends on it; the masks are exact
// either way, which MasksEqualTokenByTokenAnswers checks): states inside a string, counted or free, and inside a
// wide ASCII class (an e-mail address) do; states that take a few bytes (a number's digits, a quote, an escape,
// an enum's next letter) or a counted string with nothing left are walked. Each probe compiles afresh, so the one
// mask computed is the probed state's.
TEST(Matcher, RunTablesServeTheStatesInsideStrings) {
  struct Probe {
    const char* schema;
    const char* text;
    bool run;
  };
  const Probe probes[] = {
      {R"({"type": "string"})", "", false},
      {R"({"type": "string"})", "\"", true},
      {R"({"type": "string"})", "\"ab\xC3\xA9", true},
      {R"({"type": "string"})", "\"a\\", false},
      {R"({"type": "string"})", "\"a\\n", true},
      {R"({"type": "string"})", "\"\xE4\xB8", false},  // inside a character: its last byte, not a run
      {R"({"type": "string", "maxLength": 3})", "\"", true},
      {R"({"type": "string", "maxLength": 3})", "\"ab", true},
      {R"({"type": "string", "maxLength": 3})", "\"abc", false},
      {R"({"type": "string", "minLength": 2, "maxLength": 4})", "\"a", true},
      {R"({"type": "string", "format": "email"})", "\"ab", true},
      {R"({"type": "string", "format": "email"})", "\"ab@c", true},
      {R"({"type": "string", "pattern": "^[a-z]{2}[a-f]$"})", "\"a", false},  // a-z, then only a-f: not one class
      {R"({"type": "integer"})", "1", false},
      {R"({"enum": ["apple", "avocado"]})", "\"a", false},
      {R"({"type": "object", "properties": {"k": {"type": "string"}}, "required": ["k"]})", "{\"k\": \"x", true},
      {R"({"type": "object", "properties": {"k": {"type": "string"}}, "required": ["k"]})", "{\"k\"", false},
  };
  for (const Probe& p : probes) {
    GrammarCompiler compiler(ByteVocab());
    auto g = compiler.Compile({StructuredOutput::Kind::kJsonSchema, p.schema, {}, "", ""});
    ASSERT_TRUE(g.ok()) << g.status().message();
    GrammarMatcher m(*g);
    ASSERT_TRUE(m.AcceptBytes(p.text)) << p.schema << " " << p.text;
    ASSERT_NE(m.Mask(), nullptr);
    EXPECT_EQ((*g)->num_cached_masks(), 1) << p.schema << " after " << p.text;
    EXPECT_EQ((*g)->num_run_masks(), p.run ? 1 : 0) << p.schema << " after " << p.text;
  }
}

}  // namespace
}  // namespace parallm::structured
