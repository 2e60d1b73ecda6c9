// Tiny random models for tests: written with the project's own writer to a scratch folder, then loaded.
#pragma once

#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "model/model.h"
#include "model/model_writer.h"
#include "model/synthetic.h"
#include "test_paths.h"

namespace parallm::testing {

struct TinyModelOptions {
  Arch arch = Arch::kLlama;
  ModelFormat format = ModelFormat::kGguf;
  DType gguf_type = DType::kF32;
  int mlx_bits = 4;
  uint64_t seed = 3;
  // Overrides of the tiny preset (0 = keep).
  int hidden = 0, layers = 0, ffn = 0, vocab = 0;
  int sliding_window = -1;  // -1: the family's default
  // Phi-3: LongRoPE switching to its long factors past `longrope_original` positions (0: no scaling), and the
  // fraction of each head RoPE rotates (0: all).
  int longrope_original = 0;
  float partial_rotary = 0;
  // Nemotron-H: the layers as hybrid_override_pattern spells them (empty: the tiny preset's ME*M-E).
  std::string pattern = {};
};

// Writes the tiny model to a scratch folder; returns its path (a .gguf file or a folder).
inline std::string WriteTinyModel(const TinyModelOptions& o, const std::string& name) {
  auto config = PresetConfig("tiny", &o.arch);
  EXPECT_TRUE(config.ok());
  if (o.hidden > 0) config->hidden = o.hidden;
  if (o.layers > 0) config->n_layers = o.layers;
  if (o.ffn > 0) config->ffn = o.ffn;
  if (o.vocab > 0) config->vocab = o.vocab;
  if (!o.pattern.empty()) {
    config->layer_pattern = o.pattern;
    config->n_layers = static_cast<int>(o.pattern.size());
  }
  if (o.sliding_window >= 0) config->sliding_window = o.sliding_window;
  if (o.partial_rotary > 0) config->rotary_dim = static_cast<int>(config->head_dim * o.partial_rotary);
  if (o.longrope_original > 0) config->rope_longrope = SyntheticLongRope(*config, o.longrope_original);
  WriteOptions options;
  options.format = o.format;
  options.gguf_type = o.gguf_type;
  options.mlx.bits = o.mlx_bits;
  options.mlx.group_size = 32;
  const bool file = o.format == ModelFormat::kGguf;
  std::string path = ScratchDir("model-" + name) + (file ? "/model.gguf" : "/model");
  ModelWriter writer(*config, RopeStyle::kHalf, options, Vocab::ByteLevel(config->vocab));
  Status st = GenerateRandomWeights(*config, o.seed, [&](const std::string& n, std::vector<int64_t> s,
                                                         std::vector<float> v) {
    return writer.Add(n, std::move(s), std::move(v));
  });
  EXPECT_TRUE(st.ok()) << st.message();
  st = writer.Finish(path);
  EXPECT_TRUE(st.ok()) << st.message();
  return path;
}

inline std::unique_ptr<Model> TinyModel(const TinyModelOptions& o, const std::string& name) {
  auto model = Model::Load(WriteTinyModel(o, name));
  EXPECT_TRUE(model.ok()) << model.status().message();
  return model.ok() ? std::move(*model) : nullptr;
}

}  // namespace parallm::testing
