// llama2.c checkpoints (karpathy/llama2.c "legacy" version 0 .bin) and its tokenizer.bin.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tensor/tensor.h"
#include "util/status.h"

namespace parallm {

struct Llama2cConfig {
  int dim = 0;
  int hidden_dim = 0;
  int n_layers = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int vocab_size = 0;
  int seq_len = 0;
  bool shared_classifier = true;  // the header's vocab_size was positive
};

// Tensors are f32 views into the mapped file, named as in GGUF llama files ("token_embd.weight",
// "blk.0.attn_q.weight", ..., "output_norm.weight", "output.weight" only when not shared), shapes outermost
// first. Q/K keep llama2.c's interleaved-pair RoPE layout (the GGUF "llama" convention).
struct Llama2cCheckpoint {
  Llama2cConfig config;
  TensorSet tensors;
};
Result<Llama2cCheckpoint> ReadLlama2cCheckpoint(const std::string& path);
// Parses a checkpoint already in memory (fuzzing, tests): views point into `bytes`; `owner` (may be null) is
// kept alive with them; `name` appears in errors.
Result<Llama2cCheckpoint> ParseLlama2cCheckpoint(std::span<const uint8_t> bytes, const std::string& name,
                                                 std::shared_ptr<const void> owner = nullptr);

struct Llama2cTokenizer {
  int max_token_length = 0;
  std::vector<std::string> pieces;  // raw bytes as stored: " the", "<0x0A>", "\n<s>\n"
  std::vector<float> scores;
};
Result<Llama2cTokenizer> ReadLlama2cTokenizer(const std::string& path);
Result<Llama2cTokenizer> ParseLlama2cTokenizer(std::span<const uint8_t> bytes, const std::string& name);

}  // namespace parallm
