// IncrementalDetokenizer against Tokenizer::Decode: after every token the chunks so far are a prefix of
// Decode(ids so far), after Flush they equal it, and the window stays bounded. Five tokenizers (byte-level BPE
// with and without clean-up, SentencePiece BPE with byte fallback, with and without Strip), random streams
// rich in byte tokens that split characters, specials, spaces and punctuation, and the golden corpus ids.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <random>

#include "golden_util.h"
#include "test_paths.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/incremental_detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace parallm {
namespace {

std::string SourceDir() { return PARALLM_TOKENIZER_TEST_DIR; }

// Sanitizer and debug builds decode ~20x slower: they stream a sample of the corpus and shorter random streams.
#if defined(__SANITIZE_ADDRESS__) || !defined(NDEBUG)
constexpr size_t kSlow = 1;
#else
constexpr size_t kSlow = 0;
#endif
constexpr size_t kCorpusStride = kSlow ? 40 : 1;
constexpr size_t kRandomLength = kSlow ? 150 : 300;

const Tokenizer& Load(const std::string& name) {
  static std::map<std::string, Tokenizer> cache;
  auto it = cache.find(name);
  if (it == cache.end()) {
    auto tok = Tokenizer::FromTokenizerJson(testing::FixturePath("tokenizers/" + name + "/tokenizer.json"));
    if (!tok.ok()) {
      ADD_FAILURE() << tok.status().message();
      std::abort();
    }
    it = cache.emplace(name, std::move(tok).value()).first;
  }
  return it->second;
}

// Printable form of text for failure messages: control and non-ASCII bytes as \xNN.
std::string Escaped(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (c >= 0x20 && c < 0x7F) {
      out += static_cast<char>(c);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02X", c);
      out += hex;
    }
  }
  return out;
}

// Every kCorpusStride-th golden case of one tokenizer, read once (only those lines are parsed).
const std::vector<testing::GoldenCase>& Golden(const std::string& name) {
  static std::map<std::string, std::vector<testing::GoldenCase>> cache;
  auto it = cache.find(name);
  if (it != cache.end()) return it->second;
  std::vector<testing::GoldenCase> cases;
  std::ifstream corpus(SourceDir() + "/corpus.jsonl", std::ios::binary);
  std::ifstream golden(SourceDir() + "/golden/" + name + ".jsonl", std::ios::binary);
  std::string text_line, golden_line;
  for (size_t k = 0; std::getline(corpus, text_line) && std::getline(golden, golden_line); ++k) {
    if (k % kCorpusStride != 0) continue;
    const boost::json::object t = boost::json::parse(text_line).as_object();
    const boost::json::object g = boost::json::parse(golden_line).as_object();
    testing::GoldenCase c;
    c.id = t.at("id").as_int64();
    EXPECT_EQ(g.at("id").as_int64(), c.id);
    c.ids = testing::IdsOf(g.at("ids"));
    c.ids_special = testing::IdsOf(g.at("ids_special"));
    c.decoded = std::string(g.at("decoded").as_string());
    c.decoded_skip = std::string(g.at("decoded_skip").as_string());
    cases.push_back(std::move(c));
  }
  return cache.emplace(name, std::move(cases)).first->second;
}

struct Streamed {
  std::string text;
  size_t max_window = 0;
};

// Streams `ids` and checks the prefix invariant against Decode of the ids so far: after every Add for the
// first `check_all` tokens, then (to keep long inputs cheap) at 32 or so evenly spaced points and the last few.
Streamed StreamAndCheck(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip_special,
                        const std::string& what, size_t check_all = 1000) {
  IncrementalDetokenizer detok(tok, skip_special);
  const size_t stride = std::max<size_t>(16, ids.size() / 32);
  Streamed s;
  for (size_t i = 0; i < ids.size(); ++i) {
    s.text += detok.Add(ids[i]);
    s.max_window = std::max(s.max_window, detok.window_size());
    if (i >= check_all && i % stride != 0 && i + 8 < ids.size()) continue;
    const std::string want = tok.Decode(std::span(ids.data(), i + 1), skip_special);
    if (want.compare(0, s.text.size(), s.text) != 0) {
      ADD_FAILURE() << what << ": after token " << i << " (id " << ids[i] << ") the text is not a prefix of Decode:\n"
                    << "  streamed: [" << Escaped(s.text) << "]\n  decoded:  [" << Escaped(want) << "]";
      return s;
    }
  }
  s.text += detok.Flush();
  EXPECT_EQ(s.text, tok.Decode(ids, skip_special)) << what;
  return s;
}

// Ids worth mixing into random streams: every byte token, specials, and tokens of spaces, punctuation,
// clean-up patterns, multi-byte characters and BOMs.
std::vector<int32_t> InterestingIds(const Tokenizer& tok) {
  std::vector<int32_t> ids;
  for (int b = 0; b < 256; ++b) {
    char piece[8];
    std::snprintf(piece, sizeof piece, "<0x%02X>", b);
    if (auto id = tok.TokenToId(piece)) ids.push_back(*id);
    if (auto id = tok.TokenToId(ByteLevelEncode(std::string(1, static_cast<char>(b))))) ids.push_back(*id);
  }
  for (int32_t id = 0; id < tok.size(); ++id)
    if (tok.IsSpecial(id)) ids.push_back(id);
  for (const char* text : {" ", "  ", ".", " .", ",", " ,", "?", "!", "'", " '", " ' ", "n't", " n't", "'s", " 's",
                           "'m", "'ve", " 're", "n", "t", "s", "\n", "\xE4\xB8\xAD", "\xF0\x9F\x98\x80", "\xC3\xA9",
                           "\xEF\xBB\xBF", "\xEF\xBF\xBD", "\xE2\x96\x81", "a", " a", "word"}) {
    for (int32_t id : tok.Encode(text, false, false)) ids.push_back(id);
  }
  for (const char* piece : {"\xE2\x96\x81", "\xE2\x96\x81\xE2\x96\x81", "\xC4\xA0", ".", "'", "\xC4\xA0'"})
    if (auto id = tok.TokenToId(piece)) ids.push_back(*id);
  return ids;
}

std::vector<int32_t> RandomStream(const Tokenizer& tok, const std::vector<int32_t>& interesting, size_t n,
                                  uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> ids;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t r = rng() % 10;
    if (r < 6) {
      ids.push_back(interesting[rng() % interesting.size()]);
    } else if (r < 9) {
      ids.push_back(static_cast<int32_t>(rng() % static_cast<uint64_t>(tok.size())));
    } else {
      ids.push_back(static_cast<int32_t>(rng() % static_cast<uint64_t>(tok.size() + 8)) - 4);  // some out of range
    }
  }
  return ids;
}

const char* const kTokenizers[] = {"qwen3", "llama3", "gemma3", "phi-3", "llama2"};

TEST(IncrementalDetokenizer, RandomStreamsEqualDecode) {
  for (const char* name : kTokenizers) {
    const Tokenizer& tok = Load(name);
    const std::vector<int32_t> interesting = InterestingIds(tok);
    for (uint64_t seed = 0; seed < (kSlow ? 2 : 4); ++seed) {
      const std::vector<int32_t> ids = RandomStream(tok, interesting, kRandomLength, seed);
      for (bool skip : {false, true})
        StreamAndCheck(tok, ids, skip, std::string(name) + " seed " + std::to_string(seed) + (skip ? " skip" : ""));
    }
  }
}

// Short streams drawn from a tiny alphabet of tricky tokens hit the corner cases densely.
TEST(IncrementalDetokenizer, DenseCornerCases) {
  for (const char* name : kTokenizers) {
    const Tokenizer& tok = Load(name);
    std::vector<int32_t> pool;
    for (const char* text : {" ", ".", " '", "'s", "n", "t", "\xE2\x96\x81", "\xEF\xBB\xBF", "a"})
      for (int32_t id : tok.Encode(text, false, false)) pool.push_back(id);
    for (int b : {0xE4, 0xB8, 0xAD, 0xEF, 0xBB, 0xBF, 0x80, 0xF0, 0x9F, 0x2E, 0x20}) {
      char piece[8];
      std::snprintf(piece, sizeof piece, "<0x%02X>", b);
      if (auto id = tok.TokenToId(piece)) pool.push_back(*id);
      if (auto id = tok.TokenToId(ByteLevelEncode(std::string(1, static_cast<char>(b))))) pool.push_back(*id);
    }
    if (tok.bos_id() >= 0) pool.push_back(tok.bos_id());
    std::mt19937_64 rng(7);
    for (int trial = 0; trial < 300; ++trial) {
      std::vector<int32_t> ids(1 + rng() % 24);
      for (int32_t& id : ids) id = pool[rng() % pool.size()];
      StreamAndCheck(tok, ids, trial % 2 == 0, std::string(name) + " dense trial " + std::to_string(trial));
    }
  }
}

// Every corpus string's golden ids (plain and with BOS/EOS), streamed; the window stays small on real text.
TEST(IncrementalDetokenizer, CorpusEqualsDecode) {
  for (const char* name : kTokenizers) {
    const Tokenizer& tok = Load(name);
    const auto& cases = Golden(name);
    ASSERT_FALSE(cases.empty()) << name;
    size_t max_window = 0;
    std::vector<int32_t> all;  // the whole corpus as one long stream too
    for (const testing::GoldenCase& c : cases) {
      const std::string what = std::string(name) + " corpus id " + std::to_string(c.id);
      const Streamed plain = StreamAndCheck(tok, c.ids_special, false, what, 64);
      EXPECT_EQ(plain.text, c.decoded) << what;
      const Streamed skip = StreamAndCheck(tok, c.ids_special, true, what + " skip", 64);
      EXPECT_EQ(skip.text, c.decoded_skip) << what;
      max_window = std::max({max_window, plain.max_window, skip.max_window});
      if (all.size() < (kSlow ? 1000 : 4000)) all.insert(all.end(), c.ids_special.begin(), c.ids_special.end());
    }
    EXPECT_LE(max_window, 4 * IncrementalDetokenizer::kContextTokens) << name;
    IncrementalDetokenizer detok(tok, false);
    std::string text;
    size_t window = 0;
    for (int32_t id : all) {
      text += detok.Add(id);
      window = std::max(window, detok.window_size());
    }
    text += detok.Flush();
    EXPECT_EQ(text, tok.Decode(all, false)) << name;
    EXPECT_LE(window, 4 * IncrementalDetokenizer::kContextTokens) << name;
  }
}

// With the prompt as context the text is what Decode(prompt ++ ids) adds after Decode(prompt).
TEST(IncrementalDetokenizer, PromptContext) {
  for (const char* name : kTokenizers) {
    const Tokenizer& tok = Load(name);
    const auto& cases = Golden(name);
    for (size_t i = 0; i + 1 < cases.size(); i += 3) {
      const std::vector<int32_t>& prompt = cases[i].ids_special;
      const std::vector<int32_t>& gen = cases[i + 1].ids;
      std::vector<int32_t> all = prompt;
      all.insert(all.end(), gen.begin(), gen.end());
      for (bool skip : {false, true}) {
        const std::string before = tok.Decode(prompt, skip), after = tok.Decode(all, skip);
        if (after.compare(0, before.size(), before) != 0) continue;  // the prompt's own text changes
        IncrementalDetokenizer detok(tok, prompt, skip);
        std::string text;
        for (int32_t id : gen) text += detok.Add(id);
        text += detok.Flush();
        EXPECT_EQ(before + text, after) << name << " corpus " << cases[i].id << " + " << cases[i + 1].id;
      }
    }
  }
}

TEST(IncrementalDetokenizer, SentencePieceLeadingSpace) {
  const Tokenizer& tok = Load("llama2");
  const std::vector<int32_t> prompt = tok.Encode("Hello", true, false);
  const std::vector<int32_t> gen = tok.Encode("world", false, false);  // "▁world"
  ASSERT_EQ(tok.TokenText(gen[0]), "\xE2\x96\x81world");
  auto stream = [&](IncrementalDetokenizer detok) {
    std::string text = detok.Add(gen[0]);
    return text + detok.Flush();
  };
  // A stream on its own: the leading space goes, as in Decode. After a prompt it is mid-text and stays.
  EXPECT_EQ(stream(IncrementalDetokenizer(tok, true)), "world");
  EXPECT_EQ(stream(IncrementalDetokenizer(tok, prompt, true)), " world");
  // Only BOS before it: still the start of the text.
  EXPECT_EQ(stream(IncrementalDetokenizer(tok, std::vector<int32_t>{tok.bos_id()}, true)), "world");
}

// A character split over byte tokens comes out whole, once its last byte arrives.
TEST(IncrementalDetokenizer, HoldsIncompleteUtf8) {
  for (const char* name : {"llama2", "qwen3"}) {
    const Tokenizer& tok = Load(name);
    std::vector<int32_t> bytes;
    for (unsigned char b : std::string("\xF0\x9F\x98\x80")) {
      char piece[8];
      std::snprintf(piece, sizeof piece, "<0x%02X>", b);
      auto id = tok.TokenToId(piece);
      if (!id) id = tok.TokenToId(ByteLevelEncode(std::string(1, static_cast<char>(b))));
      ASSERT_TRUE(id.has_value());
      bytes.push_back(*id);
    }
    IncrementalDetokenizer detok(tok, tok.Encode("Hi", false, false), true);
    EXPECT_EQ(detok.Add(bytes[0]), "");
    EXPECT_EQ(detok.Add(bytes[1]), "");
    EXPECT_EQ(detok.Add(bytes[2]), "");
    EXPECT_EQ(detok.Add(bytes[3]), "\xF0\x9F\x98\x80") << name;
    // An incomplete character at the end of the stream comes out as U+FFFD, as Decode writes it.
    EXPECT_EQ(detok.Add(bytes[0]), "");
    EXPECT_EQ(detok.Flush(), "\xEF\xBF\xBD");
  }
}

// llama3 decodes with clean-up: a space is held until the next token shows whether " ." etc. removes it.
TEST(IncrementalDetokenizer, CleanUpHoldsSpace) {
  const Tokenizer& tok = Load("llama3");
  ASSERT_TRUE(tok.clean_up_tokenization_spaces());
  const auto word = tok.Encode("Hi", false, false);
  const auto space = tok.Encode(" ", false, false);
  const auto dot = tok.Encode(".", false, false);
  ASSERT_EQ(space.size(), 1u);
  ASSERT_EQ(dot.size(), 1u);
  IncrementalDetokenizer detok(tok, false);
  EXPECT_EQ(detok.Add(word[0]), "Hi");
  EXPECT_EQ(detok.Add(space[0]), "");  // " " could still go
  EXPECT_EQ(detok.Add(dot[0]), ".");   // it went: "Hi ." decodes to "Hi."
  EXPECT_EQ(detok.Flush(), "");
  EXPECT_EQ(tok.Decode(std::vector<int32_t>{word[0], space[0], dot[0]}, false), "Hi.");
}

// Clean-up is not monotone: " ' " becomes "'", but " ' ." becomes " '." (" ." takes the second space first),
// so the quote is held too.
TEST(IncrementalDetokenizer, CleanUpHoldsQuote) {
  const Tokenizer& tok = Load("llama3");
  std::vector<int32_t> ids = tok.Encode("x", false, false);
  for (const char* piece : {"\xC4\xA0'", "\xC4\xA0", "."}) ids.push_back(*tok.TokenToId(piece));  // " '", " ", "."
  EXPECT_EQ(tok.Decode(std::span(ids.data(), 3), false), "x'");
  EXPECT_EQ(tok.Decode(ids, false), "x '.");
  EXPECT_EQ(StreamAndCheck(tok, ids, false, "quote").text, "x '.");
}

// Ids Decode ignores change nothing.
TEST(IncrementalDetokenizer, IgnoredIds) {
  const Tokenizer& tok = Load("qwen3");
  IncrementalDetokenizer detok(tok, true);
  EXPECT_EQ(detok.Add(-1), "");
  EXPECT_EQ(detok.Add(tok.size() + 5), "");
  EXPECT_EQ(detok.Add(*tok.TokenToId("<|im_end|>")), "");
  EXPECT_EQ(detok.window_size(), 0u);
  IncrementalDetokenizer keep(tok, false);
  EXPECT_EQ(keep.Add(*tok.TokenToId("<|im_end|>")), "<|im_end|>");
}

}  // namespace
}  // namespace parallm
