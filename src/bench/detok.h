// Streaming-detokenization benchmark: the naive way (Decode the whole prefix after every token and emit the
// difference, O(n) per token) against IncrementalDetokenizer (a bounded window per token, O(1)), per stream
// length, plus what constructing an IncrementalDetokenizer costs. Returns JSON and prints a readable table.
#pragma once

#include <vector>

#include <boost/json.hpp>

#include "tokenizer/tokenizer.h"

namespace parallm::bench {

// `lengths`: generated tokens per stream (e.g. 8, 100, 500, 1000, 2000, 4000); each is streamed `repeats`
// times both ways, the best run of each reported. The stream is the tokenizer's encoding of a fixed
// multilingual text (prose, code, CJK, emoji), repeated to the longest length; skip_special is on.
// JSON: {"benchmark": "detok", "tokenizer_vocab", "repeats", "construct_us", "construct_with_prompt_us",
// "prompt_tokens", "rows": [{"tokens", "naive_ms", "incremental_ms", "naive_us_per_token",
// "incremental_us_per_token", "speedup", "exact"}]} ("exact": the incremental text equals Decode).
boost::json::object RunDetokBenchmark(const Tokenizer& tokenizer, const std::vector<int>& lengths, int repeats);

}  // namespace parallm::bench
