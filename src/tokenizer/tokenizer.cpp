// Tokenizer::Encode and Decode: the tokenizer.json pipeline run over the parts the loaders assembled.
#include "tokenizer/tokenizer.h"

#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"

namespace parallm {

void Tokenizer::Impl::IndexAddedTokens() {
  piece_to_id.clear();
  piece_to_id.reserve(vocab.tokens.size() + added.size());
  for (size_t i = 0; i < vocab.tokens.size(); ++i) piece_to_id.emplace(vocab.tokens[i], static_cast<int32_t>(i));
  special.assign(vocab.tokens.size(), false);
  for (size_t i = 0; i < added.size(); ++i) {
    const AddedToken& t = added[i];
    const auto index = static_cast<int32_t>(i);
    piece_to_id[t.content] = t.id;
    if (t.special && t.id >= 0 && static_cast<size_t>(t.id) < special.size()) special[static_cast<size_t>(t.id)] = true;
    added_by_text[t.content] = index;
    if (t.normalized && normalizer) {
      const std::string normalized = normalizer->Normalize(t.content);
      added_by_text[normalized] = index;
      normalized_all.Add(normalized, index);
      if (!t.special) normalized_plain.Add(normalized, index);
    } else {
      raw_all.Add(t.content, index);
      if (!t.special) raw_plain.Add(t.content, index);
    }
  }
}

namespace {

// Applies lstrip/rstrip of matched added tokens to their neighbours, as tokenizers.js does on its section list.
void StripAroundAddedTokens(std::vector<AddedTokenMatcher::Piece>& pieces, const std::vector<AddedToken>& added) {
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (pieces[i].token_index < 0) continue;
    const AddedToken& t = added[static_cast<size_t>(pieces[i].token_index)];
    if (t.lstrip && i > 0 && pieces[i - 1].token_index < 0) pieces[i - 1].text = unicode::TrimEndJs(pieces[i - 1].text);
    if (t.rstrip && i + 1 < pieces.size() && pieces[i + 1].token_index < 0)
      pieces[i + 1].text = unicode::TrimStartJs(pieces[i + 1].text);
  }
}

}  // namespace

std::vector<int32_t> Tokenizer::Encode(std::string_view input, bool add_special, bool parse_special) const {
  const Impl& m = *impl_;
  const std::string text = unicode::ToValidUtf8(input);
  std::vector<int32_t> ids;
  if (add_special) ids = m.prefix_ids;

  // An exact section match counts as the added token (tokenizers.js's added_tokens_map lookup).
  auto whole_token = [&](std::string_view s) -> int32_t {
    if (m.added_by_text.empty()) return -1;
    auto it = m.added_by_text.find(std::string(s));
    if (it == m.added_by_text.end()) return -1;
    const AddedToken& t = m.added[static_cast<size_t>(it->second)];
    return t.special && !parse_special ? -1 : t.id;
  };

  std::vector<AddedTokenMatcher::Piece> sections = (parse_special ? m.raw_all : m.raw_plain).Split(text, m.added);
  StripAroundAddedTokens(sections, m.added);
  std::vector<std::string> words;
  for (size_t si = 0; si < sections.size(); ++si) {
    const AddedTokenMatcher::Piece& section = sections[si];
    if (section.token_index >= 0) {
      ids.push_back(m.added[static_cast<size_t>(section.token_index)].id);
      continue;
    }
    if (section.text.empty()) continue;
    if (const int32_t id = whole_token(section.text); id >= 0) {
      ids.push_back(id);
      continue;
    }
    const std::string normalized = m.normalizer ? m.normalizer->Normalize(std::string(section.text)) : std::string(section.text);
    if (normalized.empty()) continue;
    std::vector<AddedTokenMatcher::Piece> subsections =
        (parse_special ? m.normalized_all : m.normalized_plain).Split(normalized, m.added);
    StripAroundAddedTokens(subsections, m.added);
    for (const AddedTokenMatcher::Piece& sub : subsections) {
      if (sub.token_index >= 0) {
        ids.push_back(m.added[static_cast<size_t>(sub.token_index)].id);
        continue;
      }
      if (sub.text.empty()) continue;
      if (const int32_t id = whole_token(sub.text); id >= 0) {
        ids.push_back(id);
        continue;
      }
      words.assign(1, std::string(sub.text));
      if (m.pre_tokenizer) m.pre_tokenizer->PreTokenize(words, si);
      m.model->Encode(words, ids);
    }
  }
  if (add_special) ids.insert(ids.end(), m.suffix_ids.begin(), m.suffix_ids.end());
  return ids;
}

std::string Tokenizer::Decode(std::span<const int32_t> ids, bool skip_special) const {
  const Impl& m = *impl_;
  std::vector<std::string> pieces;
  pieces.reserve(ids.size());
  for (int32_t id : ids) {
    if (id < 0 || id >= m.vocab.size()) continue;
    if (skip_special && m.special[static_cast<size_t>(id)]) continue;
    pieces.push_back(m.vocab.tokens[static_cast<size_t>(id)]);
  }
  std::string text;
  if (m.decoder) {
    m.decoder->DecodeChain(pieces);
    for (const std::string& p : pieces) text += p;
  } else {
    for (size_t i = 0; i < pieces.size(); ++i) text += (i ? " " : "") + pieces[i];
  }
  if (m.clean_up_spaces) text = CleanUpTokenization(std::move(text));
  return text;
}

const Vocab& Tokenizer::vocab() const { return impl_->vocab; }

const std::string& Tokenizer::TokenText(int32_t id) const {
  static const std::string kEmpty;
  return id >= 0 && id < impl_->vocab.size() ? impl_->vocab.tokens[static_cast<size_t>(id)] : kEmpty;
}

bool Tokenizer::IsSpecial(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < impl_->special.size() && impl_->special[static_cast<size_t>(id)];
}

std::optional<int32_t> Tokenizer::TokenToId(std::string_view piece) const {
  auto it = impl_->piece_to_id.find(std::string(piece));
  if (it == impl_->piece_to_id.end()) return std::nullopt;
  return it->second;
}

bool Tokenizer::clean_up_tokenization_spaces() const { return impl_->clean_up_spaces; }

}  // namespace parallm
