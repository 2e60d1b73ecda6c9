// TokenVocab: decoding token pieces to bytes and building the preorder trie (tokens sorted by bytes).
#include "structured/token_vocab.h"

#include <algorithm>

#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"

namespace parallm::structured {
namespace {

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581, SentencePiece's visible space

// One UTF-8 code point of `s` at `p` (advances p); U+FFFD on a broken sequence.
char32_t NextCodePoint(const std::string& s, size_t* p) {
  const unsigned char c = static_cast<unsigned char>(s[*p]);
  size_t len = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
  if (*p + len > s.size()) len = 1;
  char32_t v = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
  for (size_t i = 1; i < len; ++i) v = (v << 6) | (static_cast<unsigned char>(s[*p + i]) & 0x3F);
  *p += len;
  return v;
}

std::string PieceBytes(const std::string& model, const std::string& piece, TokenType type) {
  if (model == "gpt2") {
    // Byte-level: every code point of the piece is one byte; added tokens outside the alphabet keep their text.
    std::string out;
    for (size_t p = 0; p < piece.size();) {
      const size_t start = p;
      const int b = CodePointToByte(NextCodePoint(piece, &p));
      if (b < 0) return piece;
      out.push_back(static_cast<char>(b));
      (void)start;
    }
    return out;
  }
  if (type == TokenType::kByte || (piece.size() == 6 && piece.rfind("<0x", 0) == 0 && piece[5] == '>')) {
    return std::string(1, static_cast<char>(std::stoi(piece.substr(3, 2), nullptr, 16)));
  }
  std::string out;
  for (size_t p = 0; p < piece.size();) {
    if (piece.compare(p, kSpaceMark.size(), kSpaceMark) == 0) {
      out.push_back(' ');
      p += kSpaceMark.size();
    } else {
      out.push_back(piece[p++]);
    }
  }
  return out;
}

}  // namespace

std::shared_ptr<const TokenVocab> TokenVocab::FromTokenizer(const Tokenizer& tokenizer, int32_t vocab_size) {
  auto v = std::make_shared<TokenVocab>();
  const Vocab& vocab = tokenizer.vocab();
  v->size_ = std::max(vocab_size, 0);
  v->bytes_.resize(static_cast<size_t>(v->size_));
  for (int32_t id = 0; id < std::min(v->size_, vocab.size()); ++id) {
    const TokenType type =
        static_cast<size_t>(id) < vocab.types.size() ? static_cast<TokenType>(vocab.types[static_cast<size_t>(id)])
                                                     : TokenType::kNormal;
    if (tokenizer.IsSpecial(id) || type == TokenType::kControl || type == TokenType::kUnused ||
        type == TokenType::kUnknown || id == vocab.eos || id == vocab.bos)
      continue;
    v->bytes_[static_cast<size_t>(id)] = PieceBytes(vocab.model, vocab.tokens[static_cast<size_t>(id)], type);
  }
  v->BuildTrie();
  return v;
}

std::shared_ptr<const TokenVocab> TokenVocab::FromBytes(const std::vector<std::optional<std::string>>& tokens) {
  auto v = std::make_shared<TokenVocab>();
  v->size_ = static_cast<int32_t>(tokens.size());
  v->bytes_.resize(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i]) v->bytes_[i] = *tokens[i];
  v->BuildTrie();
  return v;
}

void TokenVocab::BuildTrie() {
  std::vector<int32_t> order;
  for (int32_t id = 0; id < size_; ++id)
    if (!bytes_[static_cast<size_t>(id)].empty()) order.push_back(id);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return bytes_[static_cast<size_t>(a)] < bytes_[static_cast<size_t>(b)]; });
  std::vector<int32_t> path;  // node index per depth - 1, along the last inserted token
  // Closes the deepest open node: its subtree ends here; its byte and the bytes below it go to its parent.
  auto close = [&] {
    const size_t n = static_cast<size_t>(path.back());
    path.pop_back();
    trie_[n].skip = static_cast<int32_t>(trie_.size());
    if (!path.empty()) {
      ByteBits& up = below_[static_cast<size_t>(path.back())];
      for (size_t k = 0; k < 4; ++k) up[k] |= below_[n][k];
      up[trie_[n].byte >> 6] |= uint64_t{1} << (trie_[n].byte & 63);
    }
  };
  const std::string* prev = nullptr;
  for (int32_t id : order) {
    const std::string& w = bytes_[static_cast<size_t>(id)];
    size_t common = 0;
    if (prev != nullptr)
      while (common < prev->size() && common < w.size() && (*prev)[common] == w[common]) ++common;
    while (path.size() > common) close();
    for (size_t i = common; i < w.size(); ++i) {
      path.push_back(static_cast<int32_t>(trie_.size()));
      trie_.push_back({static_cast<uint8_t>(w[i]), static_cast<uint16_t>(i + 1), 0});
      first_token_.push_back(static_cast<int32_t>(token_ids_.size()));
      below_.push_back({0, 0, 0, 0});
    }
    token_ids_.push_back(id);
    max_depth_ = std::max(max_depth_, static_cast<int32_t>(w.size()));
    prev = &w;
  }
  while (!path.empty()) close();
  first_token_.push_back(static_cast<int32_t>(token_ids_.size()));
}

}  // namespace parallm::structured
