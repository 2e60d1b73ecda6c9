// The preset shapes of `make-model` and `synthetic:` against the published models they stand for: the parameter
// counts of the released checkpoints, counted exactly (embeddings, projections, norms, tied heads), so a preset
// that drifts from its model (a wrong width, head count or tie) fails here rather than skewing a benchmark.
#include <gtest/gtest.h>

#include "model/config.h"
#include "model/synthetic.h"

namespace parallm {
namespace {

int64_t PresetParameters(const char* preset) {
  auto c = PresetConfig(preset, nullptr);
  EXPECT_TRUE(c.ok()) << preset << ": " << c.status().message();
  return c.ok() ? ParameterCount(*c) : -1;
}

TEST(Presets, DenseShapesHaveTheirCheckpointsParameterCounts) {
  // The totals of the released safetensors (Hugging Face's model pages): Qwen2.5-0.5B with its q/k/v biases,
  // Llama 3.2 1B and 3B with their tied embeddings.
  EXPECT_EQ(PresetParameters("qwen2.5-0.5b"), 494'032'768);
  EXPECT_EQ(PresetParameters("llama-3.2-1b"), 1'235'814'400);
  EXPECT_EQ(PresetParameters("llama-3.2-3b"), 3'212'749'824);
}

TEST(Presets, Llama32ThreeBIsTheLlama3Shape) {
  auto c = PresetConfig("llama-3.2-3b", nullptr);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->arch, Arch::kLlama);
  EXPECT_TRUE(c->tied_embeddings);
  EXPECT_EQ(c->n_heads / c->n_kv_heads, 3);  // 24 query heads over 8 KV heads
  EXPECT_EQ(c->rope_theta, 500000.0f);
}

}  // namespace
}  // namespace parallm
