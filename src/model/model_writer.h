// ModelWriter: writes a model given tensor by tensor in f32 (canonical names, logical values) as a GGUF file,
// a Hugging Face safetensors folder or an MLX-quantized folder, quantizing and re-pairing Q/K rows for the
// target's RoPE convention on the way. Used by `parallm make-model` and `parallm convert`.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/json.hpp>

#include "formats/gguf.h"
#include "model/config.h"
#include "model/loader.h"
#include "model/weights.h"
#include "tensor/mlx_affine.h"
#include "tensor/tensor.h"
#include "tokenizer/vocab.h"

namespace parallm {

struct WriteOptions {
  ModelFormat format = ModelFormat::kGguf;  // kGguf, kHfFolder or kMlxFolder
  // GGUF: the type of the weight matrices (f32, f16, bf16, q8_0, q4_0, q4_k, q6_k); 1-D tensors stay f32.
  // A K-quant on a matrix whose width is not a multiple of 256 falls back to q8_0 (q6_k) or q4_0 (q4_k).
  DType gguf_type = DType::kF32;
  // GGUF: "Q4_K_M" mix: q6_k for the LM head and for attn_v / ffn_down in half of the layers, q4_k elsewhere.
  bool q4_k_m = false;
  // HF: the tensors' type; MLX: the type of scales, biases and unquantized tensors (f32, f16 or bf16).
  DType float_type = DType::kF32;
  MlxAffineParams mlx;         // MLX: bits and group size of every matrix (embedding included)
  // MLX: when > 0, mixed precision as mlx-lm's mixed_<bits>_<high> predicates (after llama.cpp's Q4_K_M):
  // the LM head, and v_proj / down_proj in the layers that get more bits, use `mlx_high_bits`; config.json
  // lists them as per-module overrides.
  int mlx_high_bits = 0;
  size_t max_shard_bytes = 0;  // HF/MLX: 0 = a single model.safetensors
  std::string name = "parallm";  // general.name
};

class ModelWriter {
 public:
  // `source_rope_style`: how the Q/K rows of the tensors about to be added pair dimensions for RoPE.
  ModelWriter(const ModelConfig& config, RopeStyle source_rope_style, const WriteOptions& options, Vocab vocab);

  // Adds one tensor (canonical name, shape outermost first, row-major f32 values), converted at once to the
  // target's type so memory holds the output, not the f32 input.
  Status Add(const std::string& name, std::vector<int64_t> shape, std::vector<float> values);
  // GGUF only: a random matrix (or stack of experts) of values spread over [-half_width, half_width], its type
  // chosen as Add chooses it, generated straight in that type while Finish writes the file (tensor/random_rows.h):
  // nothing of it is held in memory. Not the values GenerateRandomWeights gives for the same seed.
  Status AddRandom(const std::string& name, std::vector<int64_t> shape, float half_width, uint64_t seed);
  // Writes the model to `path` (a .gguf file, or a folder for HF/MLX).
  Status Finish(const std::string& path);
  // GGUF only: the model as written, loaded straight from memory (no file), with its vocabulary.
  Result<LoadedModel> FinishInMemory(const std::string& label);

  // The RoPE pairing the target format uses for this architecture.
  RopeStyle target_rope_style() const { return target_rope_; }

 private:
  DType GgufTypeFor(const std::string& name, int64_t cols) const;
  MlxAffineParams MlxParamsFor(const std::string& name) const;
  // Layers whose attn_v / ffn_down get more bits in mixed recipes (llama.cpp's use_more_bits).
  bool UseMoreBits(const std::string& name) const;

  ModelConfig config_;
  RopeStyle source_rope_;
  RopeStyle target_rope_;
  WriteOptions options_;
  Vocab vocab_;
  GgufWriter gguf_;
  boost::json::object mlx_overrides_;  // module path -> {"group_size", "bits"}
  TensorSet folder_tensors_;  // HF/MLX: converted tensors, owned by `folder_buffers_`
  std::vector<std::shared_ptr<std::vector<uint8_t>>> folder_buffers_;
};

// Calls `sink` with every weight of a loaded model as f32 (canonical names, shapes outermost first, the model's
// own RoPE pairing), dequantizing quantized matrices. `parallm convert` feeds a ModelWriter with it.
Status EmitWeights(const ModelConfig& config, const ModelWeights& weights, const TensorSink& sink);

// The RoPE tensors a config implies (rope_freqs.weight for Llama 3; rope_factors_long/short.weight for LongRoPE),
// as GGUF stores them; folders carry the same in config.json.
Status EmitRopeTensors(const ModelConfig& config, const TensorSink& sink);

// Reorders the rows of a Q or K projection (or its bias) between RoPE pairings: kHalf pairs (i, i + d/2) of
// each head, kInterleaved pairs (2i, 2i + 1); convert_hf_to_gguf's permute for llama does kHalf -> kInterleaved.
std::vector<float> PermuteRopeRows(const std::vector<float>& values, int64_t rows, int64_t cols, int n_heads,
                                   RopeStyle from, RopeStyle to);

}  // namespace parallm
