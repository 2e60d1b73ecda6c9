// Reading tests/tokenizer/corpus.jsonl and the golden files written by node/reference.mjs.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include <boost/json.hpp>

namespace parallm::testing {

struct GoldenCase {
  int64_t id = 0;
  std::string text;
  std::vector<int32_t> ids, ids_special;
  std::string decoded, decoded_skip;
};

inline std::vector<boost::json::object> ReadJsonLines(const std::string& path) {
  std::vector<boost::json::object> out;
  std::ifstream in(path, std::ios::binary);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    out.push_back(boost::json::parse(line).as_object());
  }
  return out;
}

inline std::vector<int32_t> IdsOf(const boost::json::value& v) {
  std::vector<int32_t> ids;
  for (const boost::json::value& x : v.as_array()) ids.push_back(static_cast<int32_t>(x.as_int64()));
  return ids;
}

// Corpus strings joined with the golden outputs of one tokenizer, by "id". Empty when a file is missing.
inline std::vector<GoldenCase> ReadGolden(const std::string& corpus_path, const std::string& golden_path) {
  std::vector<GoldenCase> cases;
  const auto corpus = ReadJsonLines(corpus_path);
  const auto golden = ReadJsonLines(golden_path);
  if (corpus.size() != golden.size()) return cases;
  for (size_t i = 0; i < corpus.size(); ++i) {
    GoldenCase c;
    c.id = corpus[i].at("id").as_int64();
    c.text = std::string(corpus[i].at("text").as_string());
    if (golden[i].at("id").as_int64() != c.id) return {};
    c.ids = IdsOf(golden[i].at("ids"));
    c.ids_special = IdsOf(golden[i].at("ids_special"));
    c.decoded = std::string(golden[i].at("decoded").as_string());
    c.decoded_skip = std::string(golden[i].at("decoded_skip").as_string());
    cases.push_back(std::move(c));
  }
  return cases;
}

}  // namespace parallm::testing
