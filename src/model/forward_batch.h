// ForwardBatch: what the engine hands the model for one step: a flat batch of tokens from many sequences,
// their positions, where each new token's K/V goes (slot_mapping) and where each sequence's context is
// read from (block tables). Plain data; the model never sees requests.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace parallm {

struct LoraAdapter;

struct SequenceSlice {
  int32_t token_begin = 0;  // index of the sequence's first token in ForwardBatch::tokens
  int32_t num_tokens = 0;   // new tokens this step (prompt chunk or one decode token)
  int32_t context_len = 0;  // tokens in context after this step (cached + new); positions run to context_len - 1
  std::span<const int32_t> block_table;  // block ids covering positions [0, context_len)
  // The request's prompt length (0: unknown, taken as context_len). LongRoPE (Phi-3) rotates with its long factors
  // when the prompt or the position passes the original context, as Hugging Face does for one sequence.
  int32_t num_prompt_tokens = 0;
  // The LoRA adapter this sequence runs with (nullptr: the base model). Must outlive the Forward call.
  const LoraAdapter* adapter = nullptr;
  // Hybrid models: the slot of the SsmStateStorage holding this sequence's recurrent state (-1: none). Reset by the
  // model when the sequence's first new token is at position 0.
  int32_t state_slot = -1;
};

// Where MatMul's bf16 formula runs a request's prompt (Bf16RowsEnabled), the positions below this take it: the prompt
// but the run of 16 positions holding its last token. Those stay int8 because a prompt whose other blocks are all
// cached computes just them, where the bf16 formula would dequantize every weight for a few rows (a cached 1,000-token
// prompt's first token came 2.5x later so). A prompt of 16 tokens or fewer takes none; 0 (unknown): none.
constexpr int32_t kInt8PromptTail = 16;
inline int32_t Bf16PromptEnd(int32_t num_prompt_tokens) {
  return num_prompt_tokens <= 0 ? 0 : (num_prompt_tokens - 1) / kInt8PromptTail * kInt8PromptTail;
}

struct ForwardBatch {
  std::span<const int32_t> tokens;        // [num_tokens]
  std::span<const int32_t> positions;     // [num_tokens]
  std::span<const int64_t> slot_mapping;  // [num_tokens]: KV slot (block * block_size + offset) of each token
  std::vector<SequenceSlice> sequences;   // each token belongs to exactly one slice
  std::span<const int32_t> logits_indices;  // tokens whose logits are wanted, in output order

  int64_t num_tokens() const { return static_cast<int64_t>(tokens.size()); }
};

}  // namespace parallm
