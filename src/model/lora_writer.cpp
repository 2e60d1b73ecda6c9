// LoRA adapter writers for mlx-lm, PEFT and GGUF, and random adapters for tests and make-model.
#include "model/lora_writer.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include <boost/json.hpp>
#include <fmt/format.h>

#include "formats/gguf.h"
#include "formats/safetensors.h"
#include "model/arch/arch.h"
#include "model/model_writer.h"
#include "util/check.h"

namespace parallm {
namespace {

std::vector<uint8_t> Bytes(const std::vector<float>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(float));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

Status WriteText(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  f.close();
  if (!f) return Err("{}: cannot write", path);
  return Status::Ok();
}

// What every format's header states once: one rank and one scale, the adapted modules and layers.
struct Uniform {
  int32_t rank = 0;
  float scale = 0;
  std::vector<LoraTarget> targets;
  std::vector<int> layers;
};

Result<Uniform> CheckUniform(const LoraAdapter& a, const std::string& path) {
  Uniform u;
  std::vector<bool> used(kNumLoraTargets, false);
  for (size_t l = 0; l < a.layers.size(); ++l) {
    bool any = false;
    for (int t = 0; t < kNumLoraTargets; ++t) {
      const LoraWeights& w = a.layers[l][static_cast<size_t>(t)];
      if (w.rank == 0) continue;
      if (u.rank == 0) {
        u.rank = w.rank;
        u.scale = w.scale;
      }
      if (w.rank != u.rank || w.scale != u.scale)
        return Err("{}: the adapter's projections differ in rank or scale; the writers store one of each", path);
      used[static_cast<size_t>(t)] = true;
      any = true;
    }
    if (any) u.layers.push_back(static_cast<int>(l));
  }
  if (u.rank == 0) return Err("{}: the adapter adapts nothing", path);
  for (int t = 0; t < kNumLoraTargets; ++t)
    if (used[static_cast<size_t>(t)]) u.targets.push_back(static_cast<LoraTarget>(t));
  for (int l : u.layers)
    for (LoraTarget t : u.targets)
      if (a.layers[static_cast<size_t>(l)][static_cast<size_t>(t)].rank == 0)
        return Err("{}: layer {} lacks {} that other layers adapt; the writers store one set of modules", path, l,
                   LoraTargetHfName(t));
  return u;
}

}  // namespace

LoraAdapter MakeRandomLora(const ModelConfig& c, const RandomLoraSpec& spec) {
  LoraAdapter a;
  a.id = NewLoraId();
  a.path = "random";
  a.max_rank = spec.rank;
  a.layers.resize(static_cast<size_t>(c.n_layers));
  std::mt19937_64 rng(spec.seed);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  const int first = spec.num_layers > 0 ? std::max(0, c.n_layers - spec.num_layers) : 0;
  for (int l = first; l < c.n_layers; ++l) {
    for (LoraTarget t : spec.targets) {
      auto [in, out] = LoraTargetShape(c, t);
      LoraWeights& w = a.layers[static_cast<size_t>(l)][static_cast<size_t>(t)];
      w.rank = spec.rank;
      w.scale = spec.scale;
      w.a.resize(static_cast<size_t>(spec.rank * in));
      w.b.resize(static_cast<size_t>(out * spec.rank));
      const float sa = 1.0f / std::sqrt(static_cast<float>(in)), sb = 1.0f / std::sqrt(static_cast<float>(spec.rank));
      for (float& v : w.a) v = sa * unit(rng);
      for (float& v : w.b) v = sb * unit(rng);
    }
  }
  PrepareLoraForKernels(&a);
  return a;
}

Status WriteLoraAdapter(const LoraAdapter& adapter, const ModelConfig& c, const LoraWriteOptions& options,
                        const std::string& path) {
  PARALLM_ASSIGN_OR_RETURN(Uniform u, CheckUniform(adapter, path));
  namespace json = boost::json;
  std::error_code ec;
  const ArchSpec& spec = SpecFor(c.arch);
  if (options.format == LoraFormat::kGguf) {
    GgufWriter g;
    g.Set("general.architecture", GgufValue::String(std::string(spec.gguf_architecture)));
    g.Set("general.type", GgufValue::String("adapter"));
    g.Set("general.name", GgufValue::String("parallm LoRA"));
    g.Set("adapter.type", GgufValue::String("lora"));
    g.Set("adapter.lora.alpha", GgufValue::F32(u.scale * static_cast<float>(u.rank)));
    for (int l : u.layers) {
      for (LoraTarget t : u.targets) {
        const LoraWeights& w = adapter.layers[static_cast<size_t>(l)][static_cast<size_t>(t)];
        auto [in, out] = LoraTargetShape(c, t);
        std::vector<float> b = w.b;
        if (t == LoraTarget::kQ || t == LoraTarget::kK)
          b = PermuteRopeRows(b, out, w.rank, t == LoraTarget::kQ ? c.n_heads : c.n_kv_heads, options.rope_style,
                              spec.gguf_rope_style);
        const std::string base = fmt::format("blk.{}.{}.weight", l, LoraTargetGgufName(t));
        PARALLM_RETURN_IF_ERROR(g.AddTensor(base + ".lora_a", DType::kF32, {w.rank, in}, Bytes(w.a)));
        PARALLM_RETURN_IF_ERROR(g.AddTensor(base + ".lora_b", DType::kF32, {out, w.rank}, Bytes(b)));
      }
    }
    return g.Write(path);
  }

  std::filesystem::create_directories(path, ec);
  if (ec) return Err("{}: cannot create the folder: {}", path, ec.message());
  SafetensorsWriter st;
  json::object cfg;
  json::array modules;
  for (LoraTarget t : u.targets)
    modules.emplace_back(options.format == LoraFormat::kMlx ? LoraTargetHfModule(t) : LoraTargetHfName(t));
  for (int l : u.layers) {
    for (LoraTarget t : u.targets) {
      const LoraWeights& w = adapter.layers[static_cast<size_t>(l)][static_cast<size_t>(t)];
      auto [in, out] = LoraTargetShape(c, t);
      std::vector<float> b = w.b;
      if (t == LoraTarget::kQ || t == LoraTarget::kK)
        b = PermuteRopeRows(b, out, w.rank, t == LoraTarget::kQ ? c.n_heads : c.n_kv_heads, options.rope_style,
                            RopeStyle::kHalf);
      const std::string module = fmt::format("model.layers.{}.{}", l, LoraTargetHfModule(t));
      if (options.format == LoraFormat::kMlx) {
        PARALLM_RETURN_IF_ERROR(
            st.AddTensor(module + ".lora_a", DType::kF32, {in, w.rank}, Bytes(TransposeLoraFactor(w.a, w.rank, in))));
        PARALLM_RETURN_IF_ERROR(
            st.AddTensor(module + ".lora_b", DType::kF32, {w.rank, out}, Bytes(TransposeLoraFactor(b, out, w.rank))));
      } else {
        PARALLM_RETURN_IF_ERROR(st.AddTensor("base_model.model." + module + ".lora_A.weight", DType::kF32, {w.rank, in}, Bytes(w.a)));
        PARALLM_RETURN_IF_ERROR(st.AddTensor("base_model.model." + module + ".lora_B.weight", DType::kF32, {out, w.rank}, Bytes(b)));
      }
    }
  }
  if (options.format == LoraFormat::kMlx) {
    // mlx-lm adapts a run of final layers.
    if (u.layers.back() != c.n_layers - 1 || static_cast<int>(u.layers.size()) != u.layers.back() - u.layers.front() + 1)
      return Err("{}: mlx-lm adapters cover the last N layers; this adapter covers layers {}..{} with gaps or not the "
                 "last", path, u.layers.front(), u.layers.back());
    cfg["fine_tune_type"] = "lora";
    cfg["num_layers"] = static_cast<int64_t>(u.layers.size());
    cfg["lora_parameters"] = json::object{{"rank", u.rank}, {"scale", u.scale}, {"dropout", 0.0}, {"keys", modules}};
    PARALLM_RETURN_IF_ERROR(st.Write(path + "/adapters.safetensors"));
  } else {
    const double r = u.rank;
    cfg["peft_type"] = "LORA";
    cfg["task_type"] = "CAUSAL_LM";
    cfg["r"] = u.rank;
    cfg["lora_alpha"] = u.scale * (options.rslora ? std::sqrt(r) : r);
    cfg["use_rslora"] = options.rslora;
    cfg["use_dora"] = false;
    cfg["fan_in_fan_out"] = false;
    cfg["bias"] = "none";
    cfg["lora_dropout"] = 0.0;
    cfg["target_modules"] = modules;
    cfg["modules_to_save"] = nullptr;
    if (static_cast<int>(u.layers.size()) == c.n_layers) {
      cfg["layers_to_transform"] = nullptr;
    } else {
      json::array layers;
      for (int l : u.layers) layers.emplace_back(l);
      cfg["layers_to_transform"] = layers;
    }
    PARALLM_RETURN_IF_ERROR(st.Write(path + "/adapter_model.safetensors"));
  }
  return WriteText(path + "/adapter_config.json", json::serialize(cfg) + "\n");
}

bool FuseLora(const LoraAdapter& adapter, const std::string& name, const std::vector<int64_t>& shape,
              std::vector<float>& values) {
  for (size_t l = 0; l < adapter.layers.size(); ++l) {
    for (int t = 0; t < kNumLoraTargets; ++t) {
      const LoraWeights& w = adapter.layers[l][static_cast<size_t>(t)];
      if (w.rank == 0 || name != fmt::format("blk.{}.{}.weight", l, LoraTargetGgufName(static_cast<LoraTarget>(t))))
        continue;
      const int64_t r = w.rank, in = static_cast<int64_t>(w.a.size()) / r, out = static_cast<int64_t>(w.b.size()) / r;
      PARALLM_CHECK_MSG(shape.size() == 2 && shape[0] == out && shape[1] == in, "FuseLora: shape mismatch");
      for (int64_t o = 0; o < out; ++o) {
        for (int64_t i = 0; i < in; ++i) {
          float d = 0;
          for (int64_t j = 0; j < r; ++j) d += w.b[static_cast<size_t>(o * r + j)] * w.a[static_cast<size_t>(j * in + i)];
          values[static_cast<size_t>(o * in + i)] += w.scale * d;
        }
      }
      return true;
    }
  }
  return false;
}

}  // namespace parallm
