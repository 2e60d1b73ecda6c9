// Tokenizer::FromGguf: a tokenizer from tokenizer.ggml.* metadata, encoding as llama.cpp does for the "gpt2"
// (byte-level BPE) and "llama" (SentencePiece) vocabulary types.
#include <unordered_set>

#include "formats/gguf.h"
#include "tokenizer/bpe.h"
#include "tokenizer/spm.h"
#include "tokenizer/tokenizer_impl.h"

namespace parallm {
namespace {

// Control and unknown tokens are special; user-defined tokens are matched in text always (llama.cpp's
// tokenizer_st_partition).
void AddGgufAddedTokens(Tokenizer::Impl& m) {
  for (size_t i = 0; i < m.vocab.tokens.size(); ++i) {
    const int32_t type = i < m.vocab.types.size() ? m.vocab.types[i] : static_cast<int32_t>(TokenType::kNormal);
    const bool control = type == static_cast<int32_t>(TokenType::kControl) || type == static_cast<int32_t>(TokenType::kUnknown);
    if (!control && type != static_cast<int32_t>(TokenType::kUserDefined)) continue;
    AddedToken a;
    a.content = m.vocab.tokens[i];
    a.id = static_cast<int32_t>(i);
    a.special = control;
    m.added.push_back(std::move(a));
  }
}

}  // namespace

Result<Tokenizer> Tokenizer::FromGguf(const GgufFile& file, const std::string& path) {
  PARALLM_ASSIGN_OR_RETURN(Vocab vocab, Vocab::FromGguf(file, path));
  auto impl = std::make_unique<Impl>();
  Impl& m = *impl;
  m.vocab = std::move(vocab);
  m.clean_up_spaces = false;
  AddGgufAddedTokens(m);
  std::unordered_set<std::string> added_contents;
  for (const AddedToken& a : m.added) added_contents.insert(a.content);

  if (m.vocab.model == "gpt2") {
    const std::string pre = file.GetString("tokenizer.ggml.pre").value_or("default");
    auto pre_tokenizer = PreTokenizer::ForGgufPre(pre);
    if (!pre_tokenizer.ok()) return pre_tokenizer.status().WithContext(path);
    m.pre_tokenizer = std::move(pre_tokenizer).value();
    std::unordered_map<std::string, int32_t> pieces;
    pieces.reserve(m.vocab.tokens.size());
    for (size_t i = 0; i < m.vocab.tokens.size(); ++i) pieces.emplace(m.vocab.tokens[i], static_cast<int32_t>(i));
    std::vector<std::pair<std::string, std::string>> merges;
    merges.reserve(m.vocab.merges.size());
    for (const std::string& line : m.vocab.merges) {
      const size_t sp = line.find(' ', 1);  // a merge part may itself be a lone space-like char, never empty
      if (sp == std::string::npos) return Err("{}: merge '{}' has no space", path, line);
      merges.emplace_back(line.substr(0, sp), line.substr(sp + 1));
    }
    BpeOptions options;
    // llama.cpp sets ignore_merges for the Llama-3 pre-tokenizer, as Llama 3's tokenizer.json does.
    options.ignore_merges = pre == "llama-bpe" || pre == "llama3";
    m.model = std::make_unique<BpeModel>(std::move(pieces), merges, options);
    m.decoder = Decoder::ByteLevel(added_contents);
  } else if (m.vocab.model == "llama") {
    const GgufValue* prefix = file.Find("tokenizer.ggml.add_space_prefix");
    if (prefix == nullptr || prefix->type != GgufType::kBool || prefix->b) m.normalizer = Normalizer::SentencePieceSpaces();
    std::vector<bool> unmergeable(m.vocab.tokens.size(), false);
    for (size_t i = 0; i < m.vocab.types.size(); ++i)
      unmergeable[i] = m.vocab.types[i] != static_cast<int32_t>(TokenType::kNormal) &&
                       m.vocab.types[i] != static_cast<int32_t>(TokenType::kUserDefined);
    m.model = std::make_unique<SpmModel>(m.vocab.tokens, m.vocab.scores, unmergeable, m.vocab.unk);
    m.decoder = Decoder::SentencePiece();
  } else {
    return Err("{}: tokenizer.ggml.model '{}' is not supported (gpt2, llama)", path, m.vocab.model);
  }
  if (m.vocab.add_bos && m.vocab.bos >= 0) m.prefix_ids.push_back(m.vocab.bos);
  if (const GgufValue* add_eos = file.Find("tokenizer.ggml.add_eos_token");
      add_eos != nullptr && add_eos->type == GgufType::kBool && add_eos->b && m.vocab.eos >= 0)
    m.suffix_ids.push_back(m.vocab.eos);
  m.IndexAddedTokens();
  return Tokenizer(std::shared_ptr<const Impl>(std::move(impl)));
}

}  // namespace parallm
