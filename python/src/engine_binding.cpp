// _parallm.Engine: a model, its tokenizer and chat template, and the AsyncEngine that runs them on its own thread;
// Python submits requests into a Collector and cancels them. Also the engine's SamplingParams.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>

#include <pybind11/stl.h>

#include "binding.h"
#include "cache/kv_storage.h"
#include "chat/model_text.h"
#include "collector.h"
#include "engine/async_engine.h"
#include "engine/lora_registry.h"
#include "engine/speculation.h"
#include "model/synthetic_model.h"

namespace py = pybind11;

namespace parallm::python {
namespace {

struct EngineOptions {
  std::string model, tokenizer;
  int max_num_seqs = 64;
  int max_num_batched_tokens = 512;
  int max_model_len = 0;  // 0: the model's context length
  double kv_cache_gb = 2.0;
  int num_kv_blocks = 0;  // 0: from kv_cache_gb
  int block_size = 16;
  bool enable_prefix_caching = true;
  int threads = 0;        // 0: all cores
  std::string speculative_config;  // vLLM's speculative config as JSON; empty: none
  std::string kv_cache_dtype = "auto";
};

// Options the engine would abort on are refused here, naming the option.
void CheckOptions(const EngineOptions& o) {
  auto fail = [](const std::string& message) { throw py::value_error(message); };
  if (o.max_num_seqs < 1) fail(fmt::format("max_num_seqs must be >= 1, got {}", o.max_num_seqs));
  if (o.max_num_batched_tokens < 1)
    fail(fmt::format("max_num_batched_tokens must be >= 1, got {}", o.max_num_batched_tokens));
  if (o.max_model_len < 0 || o.max_model_len == 1)
    fail(fmt::format("max_model_len must be >= 2 (or None), got {}", o.max_model_len));
  if (o.num_kv_blocks < 0) fail(fmt::format("num_kv_blocks must be >= 0, got {}", o.num_kv_blocks));
  if (o.num_kv_blocks == 0 && !(o.kv_cache_gb > 0)) fail(fmt::format("kv_cache_gb must be > 0, got {}", o.kv_cache_gb));
  if (o.block_size < 1) fail(fmt::format("block_size must be >= 1, got {}", o.block_size));
  if (o.threads < 0) fail(fmt::format("threads must be >= 0, got {}", o.threads));
  std::optional<KvDtype> kv_dtype;
  if (!ParseKvCacheDtype(o.kv_cache_dtype, &kv_dtype))
    fail(fmt::format("kv_cache_dtype must be 'auto', 'f32', 'f16', 'bf16' or 'int8', got '{}'", o.kv_cache_dtype));
}

// The type the KV cache stores with these options: the one asked for, or the model's own for "auto".
KvDtype KvDtypeFor(const Model& model, const EngineOptions& o) {
  std::optional<KvDtype> kv_dtype;
  ParseKvCacheDtype(o.kv_cache_dtype, &kv_dtype);  // CheckOptions has accepted the name
  return kv_dtype.value_or(model.AutoKvDtype());
}

void CheckPath(const std::string& path, const char* what) {
  if (IsSyntheticSpec(path)) return;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw FileNotFound(fmt::format("{} not found: {}", what, path));
}

// kv_cache_gb is the most the cache may take: it takes no more than max_num_seqs requests of max_model_len tokens
// can use (a tiny model would otherwise allocate and zero gigabytes it never touches).
int32_t DefaultKvBlocks(const Model& model, const EngineOptions& o, KvDtype kv_dtype) {
  const int32_t max_len = std::min(o.max_model_len > 0 ? o.max_model_len : SchedulerConfig{}.max_model_len,
                                   model.config().context_length);
  const int64_t per_request = (max_len + o.block_size - 1) / o.block_size;
  const double per_block =
      static_cast<double>(PagedKvStorage::BytesPerBlock(model.KvShape(1, o.block_size, kv_dtype)));
  const int64_t by_budget = std::max<int64_t>(1, static_cast<int64_t>(o.kv_cache_gb * (1ull << 30) / per_block));
  return static_cast<int32_t>(std::min<int64_t>(by_budget, per_request * o.max_num_seqs));
}

class PyEngine {
 public:
  explicit PyEngine(const EngineOptions& o) : path_(o.model) {
    CheckOptions(o);
    SpeculativeConfig speculative;  // checked before the model loads
    if (!o.speculative_config.empty()) {
      Result<SpeculativeConfig> spec = ParseSpeculativeConfig(o.speculative_config);
      if (!spec.ok()) throw py::value_error("speculative_config: " + spec.status().message());
      speculative = *spec;
    }
    CheckPath(o.model, "model");
    if (!o.tokenizer.empty()) CheckPath(o.tokenizer, "tokenizer");
    Result<std::unique_ptr<Model>> model = LoadModelSpec(o.model);
    if (!model.ok()) throw std::runtime_error(model.status().message());
    Result<ModelText> text = ModelText::ForModel(o.model, o.tokenizer);
    if (!text.ok()) throw std::runtime_error(text.status().message());
    text_ = std::make_shared<const ModelText>(std::move(*text));
    loras_ = std::make_unique<LoraRegistry>((*model)->config(), 8);
    EngineConfig config;
    config.kv_cache_gb = o.kv_cache_gb;
    config.kv_cache_dtype = KvDtypeFor(**model, o);
    config.num_kv_blocks = o.num_kv_blocks > 0 ? o.num_kv_blocks : DefaultKvBlocks(**model, o, *config.kv_cache_dtype);
    config.block_size = o.block_size;
    config.enable_prefix_caching = o.enable_prefix_caching;
    config.threads = o.threads;
    config.scheduler.max_num_seqs = o.max_num_seqs;
    config.scheduler.max_num_batched_tokens = o.max_num_batched_tokens;
    if (o.max_model_len > 0) config.scheduler.max_model_len = o.max_model_len;
    config.scheduler.speculative = speculative;
    if (Status st = LoadDraftModelFor(**model, &config); !st.ok()) throw py::value_error("speculative_config: " + st.message());
    AsyncEngineConfig async_config;
    // Python callers queue everything they submit (batch_generate of thousands of prompts); nothing is refused.
    async_config.max_queued_requests = std::numeric_limits<int32_t>::max() / 2;
    engine_ = std::make_unique<AsyncEngine>(std::move(*model), config, text_->shared_tokenizer(), async_config);
  }

  void Validate(const std::vector<int32_t>& prompt, const SamplingParams& params) const {
    Status st = engine_->Validate(GenerationRequest{prompt, params, 0});
    if (!st.ok()) throw py::value_error(st.message());
  }

  uint64_t Submit(const std::shared_ptr<Collector>& collector, int64_t tag, std::vector<int32_t> prompt,
                  const SamplingParams& params, int32_t priority, const std::string& lora_name,
                  const std::string& lora_path) {
    GenerationRequest request{std::move(prompt), params, priority};
    if (!lora_name.empty()) {
      // vLLM's LoRARequest: the first request naming an adapter loads it from its path.
      if (!loras_->Has(lora_name)) {
        Status st = loras_->Add(lora_name, lora_path);
        if (!st.ok() && !loras_->Has(lora_name)) throw py::value_error(st.message());
      }
      Result<std::shared_ptr<const LoraAdapter>> adapter = loras_->Acquire(lora_name);
      if (!adapter.ok()) throw py::value_error(adapter.status().message());
      request.adapter = std::move(*adapter);
    }
    Status st = engine_->Validate(request);
    if (!st.ok()) throw py::value_error(st.message());
    RequestSink sink = collector->Expect(tag, params.n);
    Submission s = engine_->Submit(std::move(request), std::move(sink));
    if (s.admission != Admission::kAccepted) {
      collector->Forget(tag);
      throw std::runtime_error(s.admission == Admission::kQueueFull ? "the engine's queue is full"
                                                                   : "the engine is shutting down");
    }
    return s.id;
  }

  void Cancel(uint64_t id) { engine_->Cancel(id); }

  py::dict Metrics() const {
    // num_unfinished first: when it reads 0, the gauges copied next already count the last request's blocks as
    // freed (the engine updates them before it reports a request done).
    const int32_t unfinished = engine_->num_unfinished();
    const EngineMetrics m = engine_->Metrics();
    py::dict d;
    d["num_requests_running"] = m.num_requests_running;
    d["num_requests_waiting"] = m.num_requests_waiting;
    d["num_unfinished"] = unfinished;
    d["kv_cache_usage"] = m.kv_cache_usage;
    d["num_blocks"] = m.num_blocks;
    // kv_cache_usage is 1 - free / num_blocks, taken between steps: this gives the free count back exactly.
    d["num_free_blocks"] = m.num_blocks - static_cast<int>(std::lround(m.kv_cache_usage * m.num_blocks));
    d["block_size"] = m.block_size;
    d["prompt_tokens"] = m.prompt_tokens;
    d["generation_tokens"] = m.generation_tokens;
    d["prefix_cache_queries"] = m.prefix_cache_queries;
    d["prefix_cache_hits"] = m.prefix_cache_hits;
    d["num_preemptions"] = m.num_preemptions;
    d["spec_decode_num_drafts"] = m.spec_decode_num_drafts;
    d["spec_decode_num_draft_tokens"] = m.spec_decode_num_draft_tokens;
    d["spec_decode_num_accepted_tokens"] = m.spec_decode_num_accepted_tokens;
    return d;
  }

  const std::string& path() const { return path_; }
  std::shared_ptr<const ModelText> text() const { return text_; }
  const AsyncEngine& engine() const { return *engine_; }

 private:
  std::string path_;
  std::shared_ptr<const ModelText> text_;
  std::unique_ptr<AsyncEngine> engine_;
  std::unique_ptr<LoraRegistry> loras_;  // adapters named by LoRARequests, 8 kept loaded
};

}  // namespace

void BindEngine(py::module_& m) {
  py::class_<SamplingParams>(m, "SamplingParams", "The engine's sampling parameters (see parallm.SamplingParams).")
      .def(py::init<>())
      .def_readwrite("max_tokens", &SamplingParams::max_tokens)
      .def_readwrite("temperature", &SamplingParams::temperature)
      .def_readwrite("top_k", &SamplingParams::top_k)
      .def_readwrite("top_p", &SamplingParams::top_p)
      .def_readwrite("min_p", &SamplingParams::min_p)
      .def_readwrite("repetition_penalty", &SamplingParams::repetition_penalty)
      .def_readwrite("frequency_penalty", &SamplingParams::frequency_penalty)
      .def_readwrite("presence_penalty", &SamplingParams::presence_penalty)
      .def_readwrite("logit_bias", &SamplingParams::logit_bias)
      .def_readwrite("stop_token_ids", &SamplingParams::stop_token_ids)
      .def_readwrite("stop", &SamplingParams::stop)
      .def_readwrite("ignore_eos", &SamplingParams::ignore_eos)
      .def_readwrite("skip_special_tokens", &SamplingParams::skip_special_tokens)
      .def_readwrite("logprobs", &SamplingParams::logprobs)
      .def_readwrite("n", &SamplingParams::n)
      .def_readwrite("seed", &SamplingParams::seed)
      .def_readwrite("has_seed", &SamplingParams::has_seed);

  py::class_<PyEngine>(m, "Engine", "A model and its tokenizer, run by the continuous-batching engine on its own thread.")
      .def(py::init([](std::string model, std::string tokenizer, int max_num_seqs, int max_num_batched_tokens,
                       int max_model_len, double kv_cache_gb, int num_kv_blocks, int block_size,
                       bool enable_prefix_caching, int threads, std::string speculative_config,
                       std::string kv_cache_dtype) {
             EngineOptions o{std::move(model), std::move(tokenizer), max_num_seqs, max_num_batched_tokens,
                             max_model_len, kv_cache_gb, num_kv_blocks, block_size, enable_prefix_caching, threads,
                             std::move(speculative_config), std::move(kv_cache_dtype)};
             py::gil_scoped_release release;  // loading maps and repacks the weights: seconds for a real model
             return std::make_unique<PyEngine>(o);
           }),
           py::arg("model"), py::arg("tokenizer") = "", py::arg("max_num_seqs") = 64,
           py::arg("max_num_batched_tokens") = 512, py::arg("max_model_len") = 0, py::arg("kv_cache_gb") = 2.0,
           py::arg("num_kv_blocks") = 0, py::arg("block_size") = 16, py::arg("enable_prefix_caching") = true,
           py::arg("threads") = 0, py::arg("speculative_config") = "", py::arg("kv_cache_dtype") = "auto")
      .def("validate", &PyEngine::Validate, py::arg("prompt"), py::arg("params"),
           "Raises ValueError if the engine would refuse this request.")
      .def("submit", &PyEngine::Submit, py::arg("collector"), py::arg("tag"), py::arg("prompt"), py::arg("params"),
           py::arg("priority") = 0, py::arg("lora_name") = "", py::arg("lora_path") = "",
           "Queues a request (with the LoRA adapter `lora_name`, loaded from `lora_path` the first time); its "
           "progress goes to `collector` under `tag`. Returns its id.")
      .def("cancel", &PyEngine::Cancel, py::arg("id"), "Finishes a request at once and frees its KV blocks.")
      .def("metrics", &PyEngine::Metrics, "A consistent copy of the engine's gauges and counters.")
      .def_property_readonly("model_path", &PyEngine::path)
      .def_property_readonly("tokenizer", [](const PyEngine& e) { return std::const_pointer_cast<ModelText>(e.text()); })
      .def_property_readonly("vocab_size", [](const PyEngine& e) { return e.engine().model_config().vocab; })
      .def_property_readonly("max_model_len",
                             [](const PyEngine& e) { return e.engine().engine_config().scheduler.max_model_len; })
      .def_property_readonly("num_kv_blocks", [](const PyEngine& e) { return e.engine().engine_config().num_kv_blocks; })
      .def_property_readonly("block_size", [](const PyEngine& e) { return e.engine().engine_config().block_size; })
      .def_property_readonly("kv_cache_dtype",
                             [](const PyEngine& e) {
                               return std::string(KvDtypeName(*e.engine().engine_config().kv_cache_dtype));
                             })
      .def_property_readonly("max_num_seqs",
                             [](const PyEngine& e) { return e.engine().engine_config().scheduler.max_num_seqs; });
}

}  // namespace parallm::python
