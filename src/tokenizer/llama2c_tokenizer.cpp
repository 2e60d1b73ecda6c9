// Tokenizer::FromLlama2c: llama2.c's tokenizer.bin encoded as run.c's encode() does.
#include "formats/llama2c.h"
#include "tokenizer/spm.h"
#include "tokenizer/tokenizer_impl.h"

namespace parallm {

// run.c prepends a dummy " " and merges the highest-scoring adjacent pair (first on ties) until none is in
// the vocabulary; characters it cannot find become byte tokens. That is SpmModel over the pieces with spaces
// written as U+2581 (Vocab::FromLlama2c's form) after the SentencePiece space normalizer. No text is ever
// parsed as a special token, and <s>/</s> and byte pieces are never merge results.
Tokenizer Tokenizer::FromLlama2c(const Llama2cTokenizer& tok) {
  auto impl = std::make_unique<Impl>();
  Impl& m = *impl;
  m.vocab = Vocab::FromLlama2c(tok);
  m.normalizer = Normalizer::SentencePieceSpaces();
  std::vector<bool> unmergeable(m.vocab.tokens.size(), false);
  for (size_t i = 0; i < m.vocab.types.size(); ++i)
    unmergeable[i] = m.vocab.types[i] != static_cast<int32_t>(TokenType::kNormal);
  m.model = std::make_unique<SpmModel>(m.vocab.tokens, m.vocab.scores, unmergeable, m.vocab.unk);
  m.decoder = Decoder::SentencePiece();
  m.prefix_ids = {m.vocab.bos};
  m.IndexAddedTokens();
  // Control tokens are skippable in Decode, but never matched in text (no added tokens).
  for (size_t i = 0; i < m.vocab.types.size(); ++i)
    if (m.vocab.types[i] == static_cast<int32_t>(TokenType::kControl)) m.special[i] = true;
  return Tokenizer(std::shared_ptr<const Impl>(std::move(impl)));
}

}  // namespace parallm
