// Tokenizer encoding benchmark: parallm's Tokenizer::Encode on ~1 MB of English prose (MB/s and tokens/s, cold
// and warm word cache), long single pre-tokens at 1x/2x/4x to show the time grows linearly, and optionally the
// same texts through the reference tokenizer (tokenizers.js, via tests/tokenizer/node/bench.mjs) for the speedup.
// Returns JSON and prints a readable table.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include <boost/json.hpp>

#include "tokenizer/tokenizer.h"
#include "util/status.h"

namespace parallm::bench {

struct TokenizeBenchOptions {
  int repeats = 3;  // warm runs per case after the cold one; the best is reported
  // Builds a tokenizer with an empty word cache for each case's cold run. When unset, the given tokenizer is
  // used throughout and "cold" is merely its first run on that text.
  std::function<Result<Tokenizer>()> load_fresh;
  size_t no_space_bytes = 1 << 20;  // the 1x size of the no-space case (4x is 4 MiB)
  size_t repeat_chars = 100000;     // the 1x length of the repeated-character cases
  // The reference: node script (bench.mjs) and the tokenizer.json it loads. Empty script: not run.
  std::string reference_script, reference_tokenizer_json;
  bool reference_long = false;  // also time the long inputs (1x only) in the reference; slow: ~1 min for 1 MB
};

// Deterministic English prose of `bytes` bytes (ASCII): sentences of common words with capitals, commas,
// contractions, quotes, numbers and paragraph breaks, from a fixed-seed generator.
std::string EnglishText(size_t bytes);

// Times tokenizer.Encode(text, add_special=false, parse_special=false), the long inputs and the reference.
// JSON: {"benchmark": "tokenize", "tokenizer_vocab", "repeats",
//  "english": {"bytes", "tokens", "cold_s", "warm_s", "cold_mb_per_s", "warm_mb_per_s", "cold_tokens_per_s",
//              "warm_tokens_per_s"}                                   (MB = 10^6 bytes)
//  "long_inputs": [{"name", "unit_bytes", "rows": [{"scale", "bytes", "tokens", "cold_s", "warm_s",
//                   "mb_per_s", "time_ratio"}]}]       (time_ratio: warm_s / warm_s at 1x; linear is ~scale)
//  "reference": {"available": false, "reason"} or {"available": true, "version", "node", "english": {"bytes",
//               "tokens", "cold_s", "warm_s", "cold_mb_per_s", "warm_mb_per_s", "tokens_match"},
//               "long_inputs": [{"name", "bytes", "tokens", "cold_s", "warm_s", "speedup", "tokens_match"}]},
//  "speedup": {"cold", "warm"} (parallm's MB/s over the reference's; only when the reference ran)}
boost::json::object RunTokenizeBenchmark(const Tokenizer& tokenizer, const std::string& text,
                                         const TokenizeBenchOptions& options);
boost::json::object RunTokenizeBenchmark(const Tokenizer& tokenizer, const std::string& text, int repeats);

}  // namespace parallm::bench
