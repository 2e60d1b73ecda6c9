// The naive-vs-incremental detokenization benchmark.
#include "bench/detok.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include "bench/stats.h"
#include "tokenizer/incremental_detokenizer.h"

namespace parallm::bench {
namespace {

using Clock = std::chrono::steady_clock;

volatile size_t g_sink = 0;  // keeps the timed work observable

// Text like a model's output: prose with punctuation (clean-up rules), code, accents, CJK and emoji (multi-byte
// characters, byte-fallback tokens in SentencePiece vocabularies).
constexpr const char* kText =
    "The quick brown fox jumps over the lazy dog. It's a classic pangram, isn't it? Yes! "
    "Here is some code:\n```python\ndef fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n```\n"
    "Caf\xC3\xA9, na\xC3\xAFve, r\xC3\xA9sum\xC3\xA9. \xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C"
    "\xEF\xBC\x81 \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E\xE3\x81\xAE\xE3\x83\x86\xE3\x82\xAD\xE3\x82\xB9\xE3\x83\x88"
    "\xE3\x80\x82 Emoji: \xF0\x9F\x98\x80\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD \xF0\x9F\xA7\x91\xE2\x80\x8D\xF0\x9F\x9A\x80. "
    "Numbers 3.14159, 2,718 and 1e-9 ; \xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82, \xD0\xBC\xD0\xB8\xD1\x80! "
    "We'll see, they've done it, I'm fine , you 're great .\n\n";

std::vector<int32_t> Stream(const Tokenizer& tok, size_t n) {
  std::vector<int32_t> unit = tok.Encode(kText, false, false);
  if (unit.empty()) unit.push_back(0);
  std::vector<int32_t> ids;
  while (ids.size() < n) ids.insert(ids.end(), unit.begin(), unit.end());
  ids.resize(n);
  return ids;
}

// Decode the whole prefix after each token and emit what it adds (the text only grows or is replaced; the
// benchmark keeps the last decode so the work cannot be optimized away).
size_t NaiveStream(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  std::string out, previous;
  for (size_t i = 1; i <= ids.size(); ++i) {
    std::string text = tok.Decode(std::span(ids.data(), i), true);
    if (text.size() > previous.size() && text.compare(0, previous.size(), previous) == 0)
      out.append(text, previous.size());
    previous = std::move(text);
  }
  return out.size() + previous.size();
}

std::string IncrementalStream(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  IncrementalDetokenizer detok(tok, true);
  std::string out;
  for (int32_t id : ids) out += detok.Add(id);
  out += detok.Flush();
  return out;
}

}  // namespace

boost::json::object RunDetokBenchmark(const Tokenizer& tokenizer, const std::vector<int>& lengths, int repeats) {
  repeats = std::max(repeats, 1);
  int longest = 1;
  for (int n : lengths) longest = std::max(longest, n);
  const std::vector<int32_t> all = Stream(tokenizer, static_cast<size_t>(longest));

  // Construction, averaged over many: without a prompt, and with a 4,000-token prompt (only its tail is read).
  constexpr int kConstructions = 20000;
  size_t sink = 0;
  auto start = Clock::now();
  for (int i = 0; i < kConstructions; ++i) {
    IncrementalDetokenizer detok(tokenizer, true);
    sink += detok.window_size();
  }
  const double construct_us = SecondsSince(start) * 1e6 / kConstructions;
  start = Clock::now();
  for (int i = 0; i < kConstructions; ++i) {
    IncrementalDetokenizer detok(tokenizer, all, true);
    sink += detok.window_size();
  }
  const double construct_prompt_us = SecondsSince(start) * 1e6 / kConstructions;

  boost::json::array rows;
  std::printf("detokenization: naive (Decode the prefix per token) vs incremental; vocab %d, %d repeat(s)\n",
              tokenizer.size(), repeats);
  std::printf("%8s %12s %16s %14s %18s %9s %6s\n", "tokens", "naive ms", "naive us/token", "incr ms",
              "incr us/token", "speedup", "exact");
  for (int n : lengths) {
    if (n <= 0) continue;
    const std::vector<int32_t> ids(all.begin(), all.begin() + n);
    // Best of `repeats` for each: the machine is shared, and the best run is the least disturbed one.
    double naive = 1e30, incremental = 1e30;
    std::string text;
    for (int r = 0; r < repeats; ++r) {
      start = Clock::now();
      sink += NaiveStream(tokenizer, ids);
      naive = std::min(naive, SecondsSince(start));
      start = Clock::now();
      text = IncrementalStream(tokenizer, ids);
      incremental = std::min(incremental, SecondsSince(start));
    }
    const bool exact = text == tokenizer.Decode(ids, true);
    const double per_naive = naive * 1e6 / n, per_incr = incremental * 1e6 / n;
    std::printf("%8d %12.3f %16.3f %14.3f %18.3f %8.1fx %6s\n", n, naive * 1e3, per_naive, incremental * 1e3,
                per_incr, naive / incremental, exact ? "yes" : "NO");
    rows.push_back({{"tokens", n},
                    {"naive_ms", naive * 1e3},
                    {"incremental_ms", incremental * 1e3},
                    {"naive_us_per_token", per_naive},
                    {"incremental_us_per_token", per_incr},
                    {"speedup", naive / incremental},
                    {"exact", exact}});
  }
  g_sink = g_sink + sink;
  std::printf("construction: %.3f us (no prompt), %.3f us (%d-token prompt)\n", construct_us, construct_prompt_us,
              longest);
  return {{"benchmark", "detok"},
          {"tokenizer_vocab", tokenizer.size()},
          {"repeats", repeats},
          {"construct_us", construct_us},
          {"construct_with_prompt_us", construct_prompt_us},
          {"prompt_tokens", longest},
          {"rows", std::move(rows)}};
}

}  // namespace parallm::bench
