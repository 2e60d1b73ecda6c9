// `parallm info -m MODEL`: what a model file is: format, family, shape, weight types, size.
#include <cstdio>

#include <fmt/format.h>

#include "cache/cache_budget.h"
#include "cli/commands.h"
#include "cli/kv_cache_dtype_option.h"
#include "kernels/cpu_features.h"
#include "model/config.h"
#include "model/loader.h"
#include "model/model.h"
#include "util/strings.h"

namespace parallm::cli {

void AddInfoCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "Describe a model: format, architecture, shape, weight types");
  auto path = std::make_shared<std::string>();
  cmd->add_option("-m,--model", *path, "Model: .gguf file, llama2.c .bin, or Hugging Face / MLX folder")->required();
  // The serve defaults: how that budget would be split (hybrid models: state slots and KV blocks).
  auto kv_cache_gb = std::make_shared<double>(2.0);
  auto max_num_seqs = std::make_shared<int>(64);
  cmd->add_option("--kv-cache-gb", *kv_cache_gb, "Cache budget to show the split of (blocks of 16)")
      ->capture_default_str();
  cmd->add_option("--max-num-seqs", *max_num_seqs, "Requests running at once (hybrid models: state slots wanted)")
      ->capture_default_str();
  auto kv_dtype = std::make_shared<std::optional<KvDtype>>();
  AddKvCacheDtypeOption(cmd, kv_dtype.get());
  cmd->callback([path, kv_cache_gb, max_num_seqs, kv_dtype] {
    auto loaded = LoadModel(*path);
    if (!loaded.ok()) throw CLI::RuntimeError(Fail(loaded.status().message()));
    const ModelConfig& c = loaded->config;
    size_t bytes = 0;
    for (const auto& [name, t] : loaded->weights.storage.tensors) bytes += t.nbytes;
    std::printf("%s\n", loaded->path.c_str());
    std::printf("  format:   %s\n", FormatName(loaded->format).c_str());
    std::printf("  model:    %s\n", Describe(c).c_str());
    std::printf("  context:  %d tokens, rope theta %g%s, rms eps %g\n", c.context_length, c.rope_theta,
                c.rope_freq_factors.empty() ? "" : " (llama3 scaling)", c.rms_eps);
    std::printf("  weights:  %s (%s)\n", loaded->weight_types.c_str(), HumanBytes(static_cast<double>(bytes)).c_str());
    // Mixture of experts: a token reads only its experts' weights (what bounds decode speed), not all of them.
    const double total = static_cast<double>(ParameterCount(c)), active = static_cast<double>(ActiveParameterCount(c));
    if (c.n_experts > 0) {
      std::printf("  params:   %.3gB total, %.3gB active per token (%d of %d experts)\n", total / 1e9, active / 1e9,
                  c.n_experts_used, c.n_experts);
    } else {
      std::printf("  params:   %.3gB\n", total / 1e9);
    }
    // What one request costs in the cache: KV per token of context in the type the cache would store (auto: the
    // model's), and a hybrid model's fixed recurrent state.
    const KvDtype dtype = kv_dtype->value_or(AutoKvDtype(loaded->weights));
    const int64_t per_token = KvBytesPerToken(c, dtype);
    const std::string kv = fmt::format("{} KV per token in {}{}", HumanBytes(static_cast<double>(per_token)),
                                       KvDtypeName(dtype), kv_dtype->has_value() ? "" : " (auto)");
    if (c.hybrid()) {
      std::printf("  cache:    %s (attention layers only), %s recurrent state per request\n", kv.c_str(),
                  HumanBytes(static_cast<double>(StateBytesPerSequence(c))).c_str());
    } else {
      std::printf("  cache:    %s\n", kv.c_str());
    }
    const int64_t block = per_token * 16, state = StateBytesPerSequence(c);
    const double budget = *kv_cache_gb * (1ull << 30);
    const CacheBudget split = SplitCacheBudget(budget, state, block, *max_num_seqs);
    std::printf("  budget:   %s\n", DescribeCacheBudget(split, budget, state, block, *max_num_seqs).c_str());
    // The kernel path MatMul takes on this machine, and the formula a prompt's tokens take (README: Performance).
    const char* prompts = "";
    if (PromptsTakeBf16(loaded->config, loaded->weights))
      prompts = Bf16RowsEnabled()
                    ? "; prompt tokens on the bf16 formula, products and attention (PARALLM_BF16_ROWS=0: int8 and f32)"
                    : "; prompt tokens' attention in bf16 (PARALLM_BF16_ROWS=0: f32)";
    std::printf("  kernels:  %s%s\n", std::string(IsaName(ActiveIsa())).c_str(), prompts);
    if (loaded->vocab)
      std::printf("  vocab:    %d tokens (%s), bos %d, eos %d\n", loaded->vocab->size(), loaded->vocab->model.c_str(),
                  loaded->vocab->bos, loaded->vocab->eos);
  });
}

}  // namespace parallm::cli
