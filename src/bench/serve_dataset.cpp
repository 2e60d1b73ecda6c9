// Random and ShareGPT request sets for `parallm bench serve` (see serve_dataset.h).
#include "bench/serve_dataset.h"

#include <algorithm>
#include <cmath>
#include <random>

#include <boost/json.hpp>

#include "util/mapped_file.h"

namespace parallm::bench {

namespace {

int32_t CountTokens(const Tokenizer& tok, const std::string& text) {
  return static_cast<int32_t>(tok.Encode(text, /*add_special=*/false, /*parse_special=*/false).size());
}

// Text of about `ids.size()` tokens that re-encodes to exactly that many where possible: decoding random ids
// and encoding the text again merges or splits tokens, so trim or top up and retry (vLLM's
// gen_prompt_decode_to_target_len). Returns the text and its final token count.
std::pair<std::string, int32_t> TextOfLength(const Tokenizer& tok, std::vector<int32_t> ids, std::mt19937_64& rng,
                                             const std::vector<int32_t>& pool) {
  const size_t target = ids.size();
  std::string text;
  std::vector<int32_t> again;
  for (int attempt = 0; attempt < 10; ++attempt) {
    text = tok.Decode(ids, /*skip_special=*/true);
    again = tok.Encode(text, false, false);
    if (again.size() == target) break;
    if (again.size() > target) {
      again.resize(target);
    } else {
      while (again.size() < target) again.push_back(pool[rng() % pool.size()]);
    }
    ids = again;
  }
  return {text, static_cast<int32_t>(tok.Encode(text, false, false).size())};
}

int32_t DrawLength(int32_t len, double ratio, std::mt19937_64& rng) {
  if (ratio <= 0) return len;
  const int32_t lo = std::max<int32_t>(1, static_cast<int32_t>(std::floor(len * (1 - ratio))));
  const int32_t hi = std::max(lo, static_cast<int32_t>(std::ceil(len * (1 + ratio))));
  return std::uniform_int_distribution<int32_t>(lo, hi)(rng);
}

}  // namespace

std::vector<ServeRequest> RandomDataset(const RandomDatasetOptions& o, const Tokenizer* tokenizer) {
  std::mt19937_64 rng(o.seed);
  // Ids to draw from: every non-special token of the tokenizer, or [0, vocab) without one.
  std::vector<int32_t> pool;
  if (tokenizer) {
    for (int32_t id = 0; id < tokenizer->size(); ++id)
      if (!tokenizer->IsSpecial(id) && !tokenizer->TokenText(id).empty()) pool.push_back(id);
  }
  if (pool.empty())
    for (int32_t id = 0; id < std::max(o.vocab, 2); ++id) pool.push_back(id);
  auto draw = [&](int32_t n) {
    std::vector<int32_t> ids(static_cast<size_t>(std::max(n, 0)));
    for (int32_t& id : ids) id = pool[rng() % pool.size()];
    return ids;
  };
  const std::vector<int32_t> prefix = draw(o.prefix_len);
  std::string prefix_text;
  if (tokenizer && !prefix.empty()) prefix_text = TextOfLength(*tokenizer, prefix, rng, pool).first;

  std::vector<ServeRequest> out(static_cast<size_t>(std::max(o.num_prompts, 0)));
  for (ServeRequest& r : out) {
    const int32_t input_len = DrawLength(o.input_len, o.range_ratio, rng);
    r.output_len = std::max(1, DrawLength(o.output_len, o.range_ratio, rng));
    std::vector<int32_t> own = draw(input_len);
    if (tokenizer) {
      auto [text, n] = TextOfLength(*tokenizer, own, rng, pool);
      r.prompt = prefix_text + text;
      r.prompt_len = CountTokens(*tokenizer, r.prompt);
    } else {
      r.prompt_ids = prefix;
      r.prompt_ids.insert(r.prompt_ids.end(), own.begin(), own.end());
      r.prompt_len = static_cast<int32_t>(r.prompt_ids.size());
    }
  }
  return out;
}

Result<std::vector<ServeRequest>> ShareGptDataset(const std::string& path, const ShareGptOptions& o,
                                                  const Tokenizer* tokenizer) {
  PARALLM_ASSIGN_OR_RETURN(std::string text, ReadTextFile(path));
  boost::system::error_code ec;
  boost::json::value doc = boost::json::parse(text, ec);
  if (ec) return Err("{}: not JSON: {}", path, ec.message());
  if (!doc.is_array()) return Err("{}: expected a JSON array of {{\"conversations\": [...]}} entries", path);

  auto count = [&](const std::string& s) {
    return tokenizer ? CountTokens(*tokenizer, s) : static_cast<int32_t>((s.size() + 3) / 4);
  };
  std::vector<std::pair<std::string, std::string>> pairs;  // (prompt, reply)
  for (const boost::json::value& entry : doc.as_array()) {
    const boost::json::value* conv = entry.is_object() ? entry.as_object().if_contains("conversations") : nullptr;
    if (!conv || !conv->is_array()) continue;
    const boost::json::array& turns = conv->as_array();
    auto field = [](const boost::json::value& turn, const char* key) -> std::string {
      if (!turn.is_object()) return "";
      const boost::json::value* v = turn.as_object().if_contains(key);
      return v && v->is_string() ? std::string(v->as_string()) : "";
    };
    for (size_t i = 0; i + 1 < turns.size(); ++i) {
      if (field(turns[i], "from") != "human") continue;
      if (field(turns[i + 1], "from") == "gpt") pairs.emplace_back(field(turns[i], "value"), field(turns[i + 1], "value"));
      break;
    }
  }
  std::mt19937_64 rng(o.seed);
  std::shuffle(pairs.begin(), pairs.end(), rng);
  std::vector<ServeRequest> valid;
  for (auto& [prompt, reply] : pairs) {
    ServeRequest r;
    r.prompt_len = count(prompt);
    r.output_len = o.output_len > 0 ? o.output_len : count(reply);
    // vLLM's is_valid_sequence: drop tiny pairs, prompts over 1024 tokens, pairs over 2048 together.
    if (r.prompt_len < 4 || (o.output_len <= 0 && r.output_len < 4)) continue;
    if (r.prompt_len > 1024 || r.prompt_len + r.output_len > 2048) continue;
    r.prompt = std::move(prompt);
    valid.push_back(std::move(r));
    if (static_cast<int32_t>(valid.size()) == o.num_prompts) break;
  }
  if (valid.empty()) return Err("{}: no usable human/gpt conversation pairs", path);
  std::vector<ServeRequest> out;
  for (int32_t i = 0; i < o.num_prompts; ++i) out.push_back(valid[static_cast<size_t>(i) % valid.size()]);
  return out;
}

}  // namespace parallm::bench
