// `parallm make-model`: writes a random-weight model of any supported family, by preset or explicit sizes,
// as GGUF (any writable type), a Hugging Face folder or an MLX-quantized folder.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <cstdio>

#include "cli/commands.h"
#include "cli/write_options.h"
#include "model/arch/arch.h"
#include "model/model_writer.h"
#include "model/synthetic.h"
#include "util/progress.h"
#include "util/strings.h"

namespace parallm::cli {
namespace {

struct MakeModelOptions {
  std::string preset = "tiny";
  std::string arch;
  int hidden = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0, ffn = 0, vocab = 0, context = 0;
  std::string format = "gguf";
  std::string dtype;
  int bits = 4;
  int group_size = 64;
  int high_bits = 0;
  int shard_mb = 0;
  std::string rope_scaling;
  std::string tokenizer;
  uint64_t seed = 0;
  std::string output;
};

int Run(const MakeModelOptions& o) {
  const ArchSpec* spec = nullptr;
  if (!o.arch.empty()) {
    spec = SpecByName(o.arch);
    if (spec == nullptr) return Fail(fmt::format("--arch {} is not one of llama, mistral, qwen2, qwen3", o.arch));
  }
  Arch arch = spec ? spec->arch : Arch::kLlama;
  auto config = PresetConfig(o.preset, spec ? &arch : nullptr);
  if (!config.ok()) return Fail(config.status().message());
  ModelConfig c = *config;
  // Explicit sizes override the preset's.
  for (auto [value, field] : {std::pair{o.hidden, &c.hidden}, {o.layers, &c.n_layers}, {o.heads, &c.n_heads},
                              {o.kv_heads, &c.n_kv_heads}, {o.head_dim, &c.head_dim}, {o.ffn, &c.ffn}, {o.vocab, &c.vocab},
                              {o.context, &c.context_length}})
    if (value > 0) *field = value;
  if (o.heads > 0 && o.head_dim == 0 && o.hidden > 0) c.head_dim = c.hidden / c.n_heads;
  if (c.n_heads % c.n_kv_heads != 0) return Fail("--heads must be a multiple of --kv-heads");
  if (o.rope_scaling == "llama3") {
    c.rope_llama3 = ModelConfig::Llama3Rope{8, 1, 4, 512};  // short original context so tiny models feel it
    c.rope_freq_factors = Llama3RopeFactors(c.head_dim, c.rope_theta, 8, 1, 4, 512);
  } else if (!o.rope_scaling.empty() && o.rope_scaling != "none") {
    return Fail("--rope-scaling takes llama3 or none");
  }
  auto options = ParseWriteOptions(o.format, o.dtype, o.bits, o.group_size, o.high_bits, o.shard_mb);
  if (!options.ok()) return Fail(options.status().message());
  options->name = "parallm-synthetic-" + o.preset;
  // The vocabulary: a given tokenizer.json (the model's vocabulary grows to hold it), or the built-in one.
  Vocab vocab;
  std::string tokenizer_json;
  if (!o.tokenizer.empty()) {
    tokenizer_json = std::filesystem::is_directory(o.tokenizer) ? o.tokenizer + "/tokenizer.json" : o.tokenizer;
    auto loaded = Vocab::FromTokenizerJson(tokenizer_json);
    if (!loaded.ok()) return Fail(loaded.status().message());
    vocab = std::move(*loaded);
    if (o.vocab > 0 && o.vocab < vocab.size())
      return Fail(fmt::format("--vocab {} is smaller than the tokenizer's {} tokens", o.vocab, vocab.size()));
    c.vocab = std::max(o.vocab, vocab.size());
    if (options->format == ModelFormat::kGguf && !vocab.WritableToGguf())
      return Fail(fmt::format("{}: a SentencePiece-style tokenizer.json cannot be embedded in GGUF (GGUF takes its "
                              "scores from tokenizer.model); use --format hf or mlx",
                              tokenizer_json));
    vocab.PadTo(c.vocab);
  } else {
    if (c.vocab < 258) return Fail("--vocab must be at least 258 (256 bytes + bos + eos)");
    vocab = Vocab::ByteLevel(c.vocab);
  }
  auto start = std::chrono::steady_clock::now();
  Status st = WriteModel(c, RopeStyle::kHalf, *options, vocab, "generating " + o.output, o.output,
                         [&](const TensorSink& sink) { return GenerateRandomWeights(c, o.seed, sink); });
  if (st.ok() && !tokenizer_json.empty() && options->format != ModelFormat::kGguf) {
    // Folders carry the tokenizer files themselves, as on the Hugging Face hub.
    namespace fs = std::filesystem;
    std::error_code ec;
    fs::copy_file(tokenizer_json, fs::path(o.output) / "tokenizer.json", fs::copy_options::overwrite_existing, ec);
    fs::path config = fs::path(tokenizer_json).parent_path() / "tokenizer_config.json";
    if (!ec && fs::exists(config))
      fs::copy_file(config, fs::path(o.output) / "tokenizer_config.json", fs::copy_options::overwrite_existing, ec);
    if (ec) st = Err("{}: cannot copy the tokenizer files: {}", o.output, ec.message());
  }
  if (!st.ok()) return Fail(st.message());
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr, "wrote %s (%s, %s) in %.1f s\n", o.output.c_str(), o.format.c_str(), Describe(c).c_str(), secs);
  return 0;
}

}  // namespace

void AddMakeModelCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand("make-model", "Write a random-weight model of a preset shape or explicit sizes");
  auto o = std::make_shared<MakeModelOptions>();
  cmd->add_option("--preset", o->preset, "tiny, qwen2.5-0.5b, qwen3-0.6b or llama-3.2-1b")->capture_default_str();
  cmd->add_option("--arch", o->arch, "Family for 'tiny' or explicit sizes: llama, mistral, qwen2, qwen3");
  cmd->add_option("--hidden", o->hidden, "Model width (overrides the preset)");
  cmd->add_option("--layers", o->layers, "Number of layers");
  cmd->add_option("--heads", o->heads, "Query heads");
  cmd->add_option("--kv-heads", o->kv_heads, "Key/value heads");
  cmd->add_option("--head-dim", o->head_dim, "Dimension per head");
  cmd->add_option("--ffn", o->ffn, "Feed-forward width");
  cmd->add_option("--vocab", o->vocab, "Vocabulary size (>= 258)");
  cmd->add_option("--context-length", o->context, "Declared context in tokens (e.g. 128, as llama.cpp's llama2.c "
                  "converter writes)")->check(CLI::PositiveNumber);
  cmd->add_option("--format", o->format, "gguf, hf (safetensors folder) or mlx (MLX-quantized folder)")
      ->capture_default_str();
  cmd->add_option("--dtype", o->dtype,
                  "GGUF: f32 f16 bf16 q8_0 q4_0 q4_k q6_k q4_k_m (default q8_0); hf/mlx: f32 f16 bf16");
  cmd->add_option("--bits", o->bits, "MLX: bits per weight (2, 3, 4, 5, 6, 8)")->capture_default_str();
  cmd->add_option("--group-size", o->group_size, "MLX: values per scale/bias group (32, 64, 128)")->capture_default_str();
  cmd->add_option("--high-bits", o->high_bits,
                  "MLX: mixed precision as mlx-lm's mixed_<bits>_<high>: LM head and some v_proj/down_proj get these bits");
  cmd->add_option("--shard-mb", o->shard_mb, "HF/MLX: split the weights into safetensors shards of this many MiB");
  cmd->add_option("--rope-scaling", o->rope_scaling, "llama3: Llama-3 RoPE scaling (factor 8, original context 512)");
  cmd->add_option("--tokenizer", o->tokenizer,
                  "tokenizer.json (or a folder with it) to give the model; default: a built-in byte-level vocabulary");
  cmd->add_option("--seed", o->seed, "Random seed; the same seed gives the same weights in every format")
      ->capture_default_str();
  cmd->add_option("-o,--output", o->output, "Output .gguf file or folder")->required();
  cmd->callback([o] { ExitOnError(Run(*o)); });
}

}  // namespace parallm::cli
