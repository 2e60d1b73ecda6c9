// RunTable: sorting a vocabulary's tokens into runs of one character class and the rest.
#include "structured/run_table.h"

namespace parallm::structured {

int Utf8Step(int state, uint8_t b) {
  const bool cont = b >= 0x80 && b <= 0xBF;
  switch (state) {
    case 0:
      if (b < 0x80) return 0;
      if (b >= 0xC2 && b <= 0xDF) return 1;
      if (b == 0xE0) return 4;
      if (b == 0xED) return 5;
      if (b >= 0xE1 && b <= 0xEF) return 2;
      if (b == 0xF0) return 6;
      if (b == 0xF4) return 7;
      if (b >= 0xF1 && b <= 0xF3) return 3;
      return -1;
    case 1: return cont ? 0 : -1;
    case 2: return cont ? 1 : -1;
    case 3: return cont ? 2 : -1;
    case 4: return b >= 0xA0 && b <= 0xBF ? 1 : -1;
    case 5: return b >= 0x80 && b <= 0x9F ? 1 : -1;
    case 6: return b >= 0x90 && b <= 0xBF ? 2 : -1;
    case 7: return b >= 0x80 && b <= 0x8F ? 2 : -1;
    default: return -1;
  }
}

namespace {

// The characters `token` starts when it is a run of the class (its last character may be unfinished); -1 when not.
int32_t RunLength(const RunClass& cls, const std::string& token) {
  int32_t chars = 0;
  int state = 0;
  for (char ch : token) {
    const auto b = static_cast<uint8_t>(ch);
    if (b < 0x80) {
      if (state != 0 || (cls.ascii[b >> 6] >> (b & 63) & 1) == 0) return -1;
      ++chars;
      continue;
    }
    if (!cls.utf8) return -1;
    if (state == 0) ++chars;
    state = Utf8Step(state, b);
    if (state < 0) return -1;
  }
  return chars;
}

}  // namespace

RunTable RunTable::Build(const RunClass& cls, const std::vector<std::string>& bytes, const TokenTrie& trie) {
  RunTable t;
  t.cls = cls;
  const size_t words = trie.tokens().size();
  const std::vector<int32_t>& ids = trie.token_ids();
  t.at_most.assign(static_cast<size_t>(kMaxChars) + 1, std::vector<uint32_t>(words, 0u));
  t.all.assign(words, 0u);
  t.class_at.assign((ids.size() + 63) / 64, 0);
  t.others_before.assign(ids.size() + 1, 0);
  // By id first (the strings in memory order), then by trie position.
  std::vector<int32_t> run_length(bytes.size(), -1);
  for (size_t id = 0; id < bytes.size(); ++id)
    if (!bytes[id].empty()) run_length[id] = RunLength(cls, bytes[id]);
  for (size_t p = 0; p < ids.size(); ++p) {
    const int32_t id = ids[p];
    const int32_t chars = run_length[static_cast<size_t>(id)];
    t.others_before[p + 1] = t.others_before[p] + (chars < 0 ? 1 : 0);
    if (chars < 0) continue;
    t.class_at[p >> 6] |= uint64_t{1} << (p & 63);
    t.all[static_cast<size_t>(id) >> 5] |= 1u << (id & 31);
    if (chars <= kMaxChars) t.at_most[static_cast<size_t>(chars)][static_cast<size_t>(id) >> 5] |= 1u << (id & 31);
  }
  for (size_t c = 1; c < t.at_most.size(); ++c)
    for (size_t w = 0; w < words; ++w) t.at_most[c][w] |= t.at_most[c - 1][w];
  return t;
}

}  // namespace parallm::structured
