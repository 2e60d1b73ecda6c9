// The config fields beyond the Llama core (Gemma's soft-capping and norms, sliding windows, Gemma 3's per-layer
// RoPE bases, Phi-3's LongRoPE and partial rotary), read from and written to GGUF metadata and config.json in the
// names llama.cpp and Hugging Face use. A field parallm cannot honour is an error naming it.
#pragma once

#include <string>

#include <boost/json.hpp>

#include "formats/gguf.h"
#include "model/arch/arch.h"
#include "model/config.h"
#include "util/status.h"

namespace parallm {

// Sets the flags a family always has (biases, q/k norm, activation, embedding scale, post-norms, window pattern).
void ApplySpec(const ArchSpec& spec, ModelConfig& c);

// GGUF: keys "<arch>.…" and the LongRoPE factor tensors (rope_factors_long/short.weight). `c` has the core
// fields already (head_dim, context_length).
Status ReadGgufExtras(const GgufFile& file, const ArchSpec& spec, const std::string& path, ModelConfig& c);
void WriteGgufExtras(const ModelConfig& c, const ArchSpec& spec, GgufWriter& w);

// config.json (Hugging Face and MLX folders).
Status ReadHfExtras(const boost::json::object& cfg, const ArchSpec& spec, const std::string& path, ModelConfig& c);
void WriteHfExtras(const ModelConfig& c, const ArchSpec& spec, boost::json::object& cfg);

// Checks the extras against the core shape (rotary dims, factor counts, window).
Status ValidateExtras(const ModelConfig& c, const std::string& path);

// LongRoPE's attention factor from the context extension s = max_position / original_max_position, as Hugging
// Face and llama.cpp compute it: sqrt(1 + ln(s) / ln(original)), 1 when s <= 1.
float LongRopeAttnFactor(int max_position, int original_max_position);

}  // namespace parallm
