// StopStringMatcher: stops across chunk boundaries, overlapping stops, a stop at the very start, multi-byte
// stops, and agreement with a whole-text reference under every way of cutting the text into chunks.
#include <gtest/gtest.h>

#include <random>

#include "tokenizer/stop_strings.h"

namespace parallm {
namespace {

struct Outcome {
  std::string text;
  bool stopped = false;
  int32_t stop_index = -1;
  bool operator==(const Outcome&) const = default;
};

Outcome Stream(const std::vector<std::string>& stops, const std::vector<std::string>& chunks) {
  StopStringMatcher m(stops);
  Outcome o;
  for (const std::string& c : chunks) {
    StopStringMatcher::Step s = m.Feed(c);
    o.text += s.text;
    if (s.stopped) {
      o.stopped = true;
      o.stop_index = s.stop_index;
      break;
    }
  }
  if (!o.stopped) o.text += m.Flush();
  EXPECT_EQ(m.final_size(), o.text.size());
  return o;
}

// Whole-text reference: the stop whose first occurrence ends earliest (longest on a tie).
Outcome Reference(const std::vector<std::string>& stops, const std::string& text) {
  Outcome best{text, false, -1};
  size_t best_end = std::string::npos, best_begin = 0;
  for (size_t i = 0; i < stops.size(); ++i) {
    if (stops[i].empty()) continue;
    const size_t at = text.find(stops[i]);
    if (at == std::string::npos) continue;
    const size_t end = at + stops[i].size();
    if (end < best_end || (end == best_end && at < best_begin)) {
      best_end = end;
      best_begin = at;
      best = {text.substr(0, at), true, static_cast<int32_t>(i)};
    }
  }
  return best;
}

TEST(StopStringMatcher, AcrossChunks) {
  const Outcome o = Stream({"</s>"}, {"Hello <", "/", "s> more"});
  EXPECT_EQ(o, (Outcome{"Hello ", true, 0}));
  StopStringMatcher m({"STOP"});
  EXPECT_EQ(m.Feed("abc ST").text, "abc ");  // "ST" held: it may begin "STOP"
  EXPECT_EQ(m.held_size(), 2u);
  EXPECT_EQ(m.Feed("x").text, "STx");  // it did not
  EXPECT_EQ(m.Feed("S").text, "");
  const StopStringMatcher::Step s = m.Feed("TOP tail");
  EXPECT_TRUE(s.stopped);
  EXPECT_EQ(s.text, "");
  EXPECT_EQ(m.final_size(), 7u);  // "abc STx"
  EXPECT_TRUE(m.Feed("later").stopped);
  EXPECT_EQ(m.Flush(), "");
}

TEST(StopStringMatcher, StopAtStart) {
  EXPECT_EQ(Stream({"\n\n"}, {"\n", "\nrest"}), (Outcome{"", true, 0}));
  EXPECT_EQ(Stream({"abc"}, {"abc"}), (Outcome{"", true, 0}));
}

TEST(StopStringMatcher, OverlappingStops) {
  // The one that completes first wins, even if another began earlier.
  EXPECT_EQ(Stream({"abcx", "bc"}, {"a", "b", "c", "x"}), (Outcome{"a", true, 1}));
  // Same end: the longer (earlier) one.
  EXPECT_EQ(Stream({"c", "abc"}, {"ab", "c"}), (Outcome{"", true, 1}));
  // A stop overlapping itself ("aab" in "aaab").
  EXPECT_EQ(Stream({"aab"}, {"a", "a", "a", "b"}), (Outcome{"a", true, 0}));
  // Prefix of one stop, then another completes inside the held text's continuation.
  EXPECT_EQ(Stream({"hello world", "lo w"}, {"hel", "lo", " wor"}), (Outcome{"hel", true, 1}));
  // No match: all text comes out at the end, held part included.
  EXPECT_EQ(Stream({"xyz", "yy"}, {"ax", "xy"}), (Outcome{"axxy", false, -1}));
}

TEST(StopStringMatcher, MultiByteUtf8) {
  // "終了" (end) and an emoji; held text is a byte prefix of the stop and starts on a character boundary.
  StopStringMatcher m({"\xE7\xB5\x82\xE4\xBA\x86", "\xF0\x9F\x9B\x91"});
  EXPECT_EQ(m.Feed("ok \xE7\xB5\x82").text, "ok ");
  EXPECT_EQ(m.Feed("\xE7\xB5\x82").text, "\xE7\xB5\x82");  // a second 終 is not 了
  const StopStringMatcher::Step s = m.Feed("\xE4\xBA\x86!");
  EXPECT_TRUE(s.stopped);
  EXPECT_EQ(s.stop_index, 0);
  EXPECT_EQ(s.text, "");
  EXPECT_EQ(Stream({"\xF0\x9F\x9B\x91"}, {"go \xF0\x9F", "\x9B\x91 no"}), (Outcome{"go ", true, 0}));
}

TEST(StopStringMatcher, EmptyAndNoStops) {
  EXPECT_EQ(Stream({}, {"a", "b"}), (Outcome{"ab", false, -1}));
  EXPECT_EQ(Stream({""}, {"a", "b"}), (Outcome{"ab", false, -1}));
  EXPECT_EQ(Stream({"", "b"}, {"a", "b"}), (Outcome{"a", true, 1}));  // indices are the constructor's
}

// Random texts over a small alphabet, random stops, random chunkings: same as the whole-text reference.
TEST(StopStringMatcher, AnyChunkingMatchesReference) {
  std::mt19937_64 rng(1);
  auto word = [&](size_t max_len) {
    std::string s(1 + rng() % max_len, 'a');
    for (char& c : s) c = "abc"[rng() % 3];
    return s;
  };
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<std::string> stops(rng() % 4);
    for (std::string& s : stops) s = word(5);
    const std::string text = word(30);
    std::vector<std::string> chunks;
    for (size_t i = 0; i < text.size();) {
      const size_t n = std::min(text.size() - i, static_cast<size_t>(rng() % 5));  // empty chunks too
      chunks.push_back(text.substr(i, n));
      i += n;
    }
    ASSERT_EQ(Stream(stops, chunks), Reference(stops, text)) << "trial " << trial << " text " << text;
  }
}

}  // namespace
}  // namespace parallm
