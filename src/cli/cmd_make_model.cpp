// `parallm make-model`: writes a random-weight model of any supported family, by preset or explicit sizes,
// as GGUF (any writable type), a Hugging Face folder or an MLX-quantized folder.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>
#include <cstdio>

#include "cli/commands.h"
#include "cli/write_options.h"
#include "formats/gguf.h"
#include "model/arch/arch.h"
#include "model/family_config.h"
#include "model/lora_writer.h"
#include "model/model_writer.h"
#include "model/scripted_model.h"
#include "model/synthetic.h"
#include "tokenizer/tokenizer.h"
#include "util/progress.h"
#include "util/strings.h"

namespace parallm::cli {
namespace {

struct MakeModelOptions {
  std::string preset = "tiny";
  std::string arch;
  int hidden = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0, ffn = 0, vocab = 0, context = 0;
  std::string format = "gguf";
  std::string pattern;
  std::string dtype;
  int bits = 4;
  int group_size = 64;
  int high_bits = 0;
  int shard_mb = 0;
  std::string rope_scaling;
  std::optional<int> sliding_window;
  std::optional<float> attn_softcap, final_softcap;
  int original_context = 0;
  float partial_rotary = 0;
  int decoder_sparse_step = 0;       // mixtures of experts: every Nth layer sparse (0: the preset's)
  std::vector<int> mlp_only_layers;  // mixtures of experts: layers with a dense MLP
  std::string tokenizer;
  std::vector<std::string> scripts;  // "TRIGGER=>CONTINUATION": a scripted model (model/scripted_model.h)
  uint64_t seed = 0;
  bool fast = false;
  std::string output;
  // --lora FORMAT: a random LoRA adapter for the model shape instead of a model.
  std::string lora;
  int lora_rank = 8;
  std::string lora_targets = "q,v";
  float lora_scale = 2.0f;
  int lora_layers = 0;
  bool rslora = false;
};

// A random adapter for the shape `c`, as mlx-lm, PEFT or llama.cpp would save it.
int MakeLora(const MakeModelOptions& o, const ModelConfig& c) {
  RandomLoraSpec spec;
  spec.rank = o.lora_rank;
  spec.scale = o.lora_scale;
  spec.num_layers = o.lora_layers;
  spec.seed = o.seed;
  spec.targets.clear();
  for (const std::string& name : Split(o.lora_targets, ',')) {
    bool found = false;
    for (int t = 0; t < kNumLoraTargets; ++t) {
      const std::string hf = LoraTargetHfName(static_cast<LoraTarget>(t));
      if (name == hf || name + "_proj" == hf) {
        spec.targets.push_back(static_cast<LoraTarget>(t));
        found = true;
      }
    }
    if (!found) return Fail(fmt::format("--lora-targets: {} is not one of q, k, v, o, gate, up, down", name));
  }
  if (spec.rank <= 0 || spec.targets.empty()) return Fail("--lora-rank must be positive and --lora-targets non-empty");
  LoraWriteOptions w;
  if (o.lora == "mlx") {
    w.format = LoraFormat::kMlx;
  } else if (o.lora == "peft") {
    w.format = LoraFormat::kPeft;
  } else if (o.lora == "gguf") {
    w.format = LoraFormat::kGguf;
  } else {
    return Fail(fmt::format("--lora {} is not one of mlx, peft, gguf", o.lora));
  }
  w.rslora = o.rslora;
  if (o.rslora && w.format != LoraFormat::kPeft) return Fail("--rslora goes with --lora peft");
  if (Status st = WriteLoraAdapter(MakeRandomLora(c, spec), c, w, o.output); !st.ok()) return Fail(st.message());
  std::fprintf(stderr, "wrote %s (%s LoRA, rank %d on %s, for %s)\n", o.output.c_str(), o.lora.c_str(), spec.rank,
               o.lora_targets.c_str(), Describe(c).c_str());
  return 0;
}

int Run(const MakeModelOptions& o) {
  const ArchSpec* spec = nullptr;
  if (!o.arch.empty()) {
    spec = SpecByName(o.arch);
    if (spec == nullptr) return Fail(fmt::format("--arch {} is not one of {}", o.arch, SupportedNames()));
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
  if (!o.pattern.empty()) {
    if (!c.hybrid()) return Fail("--pattern gives the layers of a hybrid model (--arch nemotronh)");
    c.layer_pattern = o.pattern;
    c.n_layers = static_cast<int>(o.pattern.size());
  }
  if (c.hybrid() && c.n_layers != static_cast<int>(c.layer_pattern.size()))
    return Fail(fmt::format("--layers {} does not match the {} layers of pattern {}; give --pattern instead", c.n_layers,
                            c.layer_pattern.size(), c.layer_pattern));
  if (o.sliding_window) c.sliding_window = *o.sliding_window;
  if (o.attn_softcap) c.attn_softcap = *o.attn_softcap;
  if (o.final_softcap) c.final_softcap = *o.final_softcap;
  if (o.partial_rotary > 0) {
    if (o.partial_rotary > 1) return Fail("--partial-rotary takes a fraction in (0, 1]");
    c.rotary_dim = static_cast<int>(c.head_dim * o.partial_rotary);
  }
  if (o.decoder_sparse_step > 0 || !o.mlp_only_layers.empty()) {
    if (c.n_experts == 0) return Fail("--decoder-sparse-step and --mlp-only-layers apply to qwen2moe and qwen3moe");
    if (o.decoder_sparse_step > 0) c.decoder_sparse_step = o.decoder_sparse_step;
    for (int l : o.mlp_only_layers)
      if (l < 0 || l >= c.n_layers) return Fail(fmt::format("--mlp-only-layers: {} is not a layer below {}", l, c.n_layers));
    c.mlp_only_layers = o.mlp_only_layers;
  }
  if (o.rope_scaling == "llama3") {
    c.rope_llama3 = ModelConfig::Llama3Rope{8, 1, 4, 512};  // short original context so tiny models feel it
    c.rope_freq_factors = Llama3RopeFactors(c.head_dim, c.rope_theta, 8, 1, 4, 512);
  } else if (o.rope_scaling == "longrope") {
    if (c.arch != Arch::kPhi3) return Fail("--rope-scaling longrope is Phi-3's (--arch phi3)");
    c.rope_longrope =
        SyntheticLongRope(c, o.original_context > 0 ? o.original_context : std::min(4096, c.context_length));
  } else if (!o.rope_scaling.empty() && o.rope_scaling != "none") {
    return Fail("--rope-scaling takes llama3, longrope (phi3) or none");
  }
  if (!o.scripts.empty()) c.tied_embeddings = false;  // the script lives in an LM head of its own
  if (o.original_context > 0 && !c.rope_longrope) return Fail("--original-context goes with --rope-scaling longrope");
  if (Status st = ValidateExtras(c, o.output); !st.ok()) return Fail(st.message());
  if (!o.lora.empty()) return MakeLora(o, c);
  auto options = ParseWriteOptions(o.format, o.dtype, o.bits, o.group_size, o.high_bits, o.shard_mb);
  if (!options.ok()) return Fail(options.status().message());
  options->name = "parallm-synthetic-" + o.preset;
  // The vocabulary: a given tokenizer.json (the model's vocabulary grows to hold it), or the built-in one.
  Vocab vocab;
  std::string tokenizer_json;
  if (!o.tokenizer.empty() && EndsWith(o.tokenizer, ".gguf")) {
    // A vocabulary-only GGUF (llama.cpp's ggml-vocab-*.gguf, e.g. Phi-3's): GGUF models embed it as it is.
    if (options->format != ModelFormat::kGguf)
      return Fail(fmt::format("{}: a GGUF vocabulary goes into GGUF models only; folders need a tokenizer.json",
                              o.tokenizer));
    auto file = GgufFile::Open(o.tokenizer);
    if (!file.ok()) return Fail(file.status().message());
    auto loaded = Vocab::FromGguf(*file, o.tokenizer);
    if (!loaded.ok()) return Fail(loaded.status().message());
    vocab = std::move(*loaded);
    if (o.vocab > 0 && o.vocab < vocab.size())
      return Fail(fmt::format("--vocab {} is smaller than the tokenizer's {} tokens", o.vocab, vocab.size()));
    c.vocab = std::max(o.vocab, vocab.size());
    vocab.PadTo(c.vocab);
  } else if (!o.tokenizer.empty()) {
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
  // --script: after the last token of TRIGGER the model writes CONTINUATION's tokens, one after another.
  std::vector<ScriptedStep> steps;
  if (!o.scripts.empty()) {
    if (tokenizer_json.empty()) return Fail("--script needs --tokenizer with a tokenizer.json (to spell the script)");
    auto tok = Tokenizer::FromTokenizerJson(tokenizer_json);
    if (!tok.ok()) return Fail(tok.status().message());
    for (const std::string& script : o.scripts) {
      const size_t arrow = script.find("=>");
      if (arrow == std::string::npos) return Fail(fmt::format("--script '{}' is not TRIGGER=>CONTINUATION", script));
      const auto trigger = tok->Encode(script.substr(0, arrow), /*add_special=*/false, /*parse_special=*/true);
      const auto continuation = tok->Encode(script.substr(arrow + 2), /*add_special=*/false, /*parse_special=*/true);
      if (trigger.empty() || continuation.empty()) return Fail(fmt::format("--script '{}' has an empty side", script));
      steps.push_back({trigger.back(), continuation[0]});
      for (size_t i = 0; i + 1 < continuation.size(); ++i) steps.push_back({continuation[i], continuation[i + 1]});
    }
  }
  auto start = std::chrono::steady_clock::now();
  if (o.fast) {
    if (options->format != ModelFormat::kGguf || !steps.empty())
      return Fail("--fast writes random GGUF models (no --script, --format gguf)");
    Status st = WriteFastRandomModel(c, *options, vocab, o.seed, o.output);
    if (!st.ok()) return Fail(st.message());
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "wrote %s (gguf, random blocks, %s) in %.1f s\n", o.output.c_str(), Describe(c).c_str(), secs);
    return 0;
  }
  Status st = WriteModel(c, RopeStyle::kHalf, *options, vocab, "generating " + o.output, o.output,
                         [&](const TensorSink& sink) {
                           return steps.empty() ? GenerateRandomWeights(c, o.seed, sink)
                                                : GenerateScriptedWeights(c, steps, sink);
                         });
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
  std::string presets;
  for (const std::string& p : PresetNames()) presets += (presets.empty() ? "" : ", ") + p;
  cmd->add_option("--preset", o->preset, "Shape of a real model: " + presets)->capture_default_str();
  cmd->add_option("--arch", o->arch, "Family for 'tiny' or explicit sizes: " + SupportedNames());
  cmd->add_option("--hidden", o->hidden, "Model width (overrides the preset)");
  cmd->add_option("--layers", o->layers, "Number of layers");
  cmd->add_option("--pattern", o->pattern,
                  "nemotronh: the layers as hybrid_override_pattern spells them (M Mamba-2, * attention, - MLP, "
                  "E experts), e.g. M*M-ME");
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
  cmd->add_option("--rope-scaling", o->rope_scaling,
                  "llama3: Llama-3 RoPE scaling (factor 8, original context 512); longrope: Phi-3's LongRoPE "
                  "(fixed short/long factors)");
  cmd->add_option("--original-context", o->original_context,
                  "longrope: original_max_position_embeddings, where the long factors take over (default 4096)");
  cmd->add_option("--partial-rotary", o->partial_rotary, "Fraction of each head RoPE rotates (Phi-4-mini: 0.75)");
  cmd->add_option("--sliding-window", o->sliding_window,
                  "Window of the windowed layers (gemma2: even layers, gemma3: 5 of 6, mistral/phi3: all); 0: none");
  cmd->add_option("--attn-softcap", o->attn_softcap, "Soft-capping of attention scores (gemma2 default 50; 0: none)");
  cmd->add_option("--final-softcap", o->final_softcap, "Soft-capping of the final logits (gemma2 default 30; 0: none)");
  cmd->add_option("--decoder-sparse-step", o->decoder_sparse_step,
                  "Mixtures of experts (qwen2moe, qwen3moe): layer l is sparse when (l + 1) is a multiple of this, "
                  "dense otherwise");
  cmd->add_option("--mlp-only-layers", o->mlp_only_layers,
                  "Mixtures of experts (qwen2moe, qwen3moe): comma-separated layers with a dense MLP")
      ->delimiter(',');
  cmd->add_option("--tokenizer", o->tokenizer,
                  "tokenizer.json (or a folder with it), or a vocabulary-only .gguf (GGUF output only), to give the "
                  "model; default: a built-in byte-level vocabulary");
  cmd->add_option("--script", o->scripts,
                  "TRIGGER=>CONTINUATION (repeatable): instead of random weights, a model whose greedy answer after "
                  "the last token of TRIGGER is CONTINUATION (spelled with --tokenizer; special tokens such as an "
                  "end-of-turn token allowed), for exact end-to-end tests; each token may have one successor only");
  cmd->add_flag("--fast", o->fast,
               "GGUF: write random quantized blocks straight to the file over all cores, holding no tensor in memory "
               "(for 30B-parameter shapes: ~1 minute instead of hours); other values than without --fast");
  cmd->add_option("--seed", o->seed, "Random seed; the same seed gives the same weights in every format")
      ->capture_default_str();
  cmd->add_option("-o,--output", o->output, "Output .gguf file or folder")->required();
  cmd->add_option("--lora", o->lora,
                  "Write a random LoRA adapter for this model shape instead of a model: mlx (adapters.safetensors), "
                  "peft (adapter_model.safetensors) or gguf (llama.cpp)");
  cmd->add_option("--lora-rank", o->lora_rank, "LoRA: rank")->capture_default_str();
  cmd->add_option("--lora-targets", o->lora_targets, "LoRA: projections, from q,k,v,o,gate,up,down")
      ->capture_default_str();
  cmd->add_option("--lora-scale", o->lora_scale, "LoRA: the update's multiplier (stored as each format does)")
      ->capture_default_str();
  cmd->add_option("--lora-layers", o->lora_layers, "LoRA: adapt the last N layers only (0: all)");
  cmd->add_flag("--rslora", o->rslora, "LoRA (peft): store lora_alpha for rsLoRA's alpha / sqrt(r)");
  cmd->callback([o] { ExitOnError(Run(*o)); });
}

}  // namespace parallm::cli
