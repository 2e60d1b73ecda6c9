// `parallm convert`: rewrites a model in another format: llama2.c checkpoints (with their tokenizer.bin),
// GGUF files and Hugging Face / MLX folders to GGUF, a Hugging Face folder or an MLX folder.
#include <cstdio>

#include "cli/commands.h"
#include "cli/write_options.h"
#include "formats/llama2c.h"
#include "model/loader.h"
#include "model/lora_writer.h"
#include "model/model_writer.h"
#include "util/progress.h"

namespace parallm::cli {

namespace {

struct ConvertOptions {
  std::string input, output, tokenizer, to = "gguf", dtype, adapter;
  int bits = 4, group_size = 64, high_bits = 0, shard_mb = 0;
};

int Run(const ConvertOptions& o) {
  auto loaded = LoadModel(o.input);
  if (!loaded.ok()) return Fail(loaded.status().message());
  std::optional<Vocab> vocab = loaded->vocab;
  if (!o.tokenizer.empty()) {
    auto tok = ReadLlama2cTokenizer(o.tokenizer);
    if (!tok.ok()) return Fail(tok.status().message());
    vocab = Vocab::FromLlama2c(*tok);
  }
  if (!vocab) return Fail(fmt::format("{} carries no vocabulary; pass --tokenizer tokenizer.bin", o.input));
  if (vocab->size() != loaded->config.vocab)
    return Fail(fmt::format("the tokenizer has {} tokens but the model's vocabulary is {}", vocab->size(),
                            loaded->config.vocab));
  // Default output type: keep floats as they are stored (f32 for llama2.c).
  std::string dtype = o.dtype.empty() ? "f32" : o.dtype;
  auto options = ParseWriteOptions(o.to, dtype, o.bits, o.group_size, o.high_bits, o.shard_mb);
  if (!options.ok()) return Fail(options.status().message());
  // --adapter: the LoRA update is added to the weights it adapts on their way to the writer (mlx_lm.fuse).
  std::shared_ptr<const LoraAdapter> adapter;
  if (!o.adapter.empty()) {
    auto a = LoadLoraAdapter(o.adapter, loaded->config);
    if (!a.ok()) return Fail(a.status().message());
    adapter = *a;
  }
  int fused = 0;
  Status st = WriteModel(loaded->config, loaded->config.rope_style, *options, *vocab, "converting " + o.input, o.output,
                         [&](const TensorSink& sink) {
                           if (adapter == nullptr) return EmitWeights(loaded->config, loaded->weights, sink);
                           return EmitWeights(loaded->config, loaded->weights,
                                              [&](const std::string& name, std::vector<int64_t> shape,
                                                  std::vector<float> values) {
                                                fused += FuseLora(*adapter, name, shape, values) ? 1 : 0;
                                                return sink(name, std::move(shape), std::move(values));
                                              });
                         });
  if (st.ok() && adapter != nullptr) std::fprintf(stderr, "fused %s into %d matrices\n", adapter->Describe().c_str(), fused);
  if (!st.ok()) return Fail(st.message());
  std::fprintf(stderr, "wrote %s (%s, %s)\n", o.output.c_str(), o.to.c_str(), Describe(loaded->config).c_str());
  return 0;
}

}  // namespace

void AddConvertCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand("convert", "Convert a model (llama2.c, GGUF, HF, MLX) to GGUF, HF or MLX");
  auto o = std::make_shared<ConvertOptions>();
  cmd->add_option("input", o->input, "Input model: llama2.c .bin, .gguf, or Hugging Face / MLX folder")->required();
  cmd->add_option("-o,--output", o->output, "Output .gguf file or folder")->required();
  cmd->add_option("--to", o->to, "gguf, hf or mlx")->capture_default_str();
  cmd->add_option("--tokenizer", o->tokenizer, "llama2.c tokenizer.bin for a llama2.c checkpoint");
  cmd->add_option("--dtype", o->dtype, "GGUF: f32 f16 bf16 q8_0 q4_0 q4_k q6_k q4_k_m; hf/mlx: f32 f16 bf16 (default f32)");
  cmd->add_option("--bits", o->bits, "MLX: bits per weight")->capture_default_str();
  cmd->add_option("--group-size", o->group_size, "MLX: group size")->capture_default_str();
  cmd->add_option("--high-bits", o->high_bits, "MLX: mixed precision (LM head and some v_proj/down_proj)");
  cmd->add_option("--shard-mb", o->shard_mb, "HF/MLX: safetensors shards of this many MiB");
  cmd->add_option("--adapter", o->adapter,
                  "Fuse a LoRA adapter into the weights (mlx_lm.fuse): an mlx-lm or PEFT folder, or a GGUF LoRA file");
  cmd->callback([o] { ExitOnError(Run(*o)); });
}

}  // namespace parallm::cli
