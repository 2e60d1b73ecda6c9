// TokenVocab: decoding token pieces to bytes and building the preorder trie (tokens sorted by bytes).
#include "structured/token_vocab.h"

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
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < size_; ++id)
    if (!bytes_[static_cast<size_t>(id)].empty()) ids.push_back(id);
  trie_ = TokenTrie::Build(bytes_, std::move(ids), mask_words());
}

const RunTable* TokenVocab::Runs(const RunClass& cls) const {
  std::lock_guard lock(runs_mu_);
  for (const auto& t : runs_)
    if (t->cls == cls) return t.get();
  if (runs_.size() >= kMaxRunTables) return nullptr;
  runs_.push_back(std::make_unique<const RunTable>(RunTable::Build(cls, bytes_, trie_)));
  return runs_.back().get();
}

}  // namespace parallm::structured
