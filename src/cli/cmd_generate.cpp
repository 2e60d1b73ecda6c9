// `parallm generate`: continues a prompt with one sequence and reports prefill/decode speed (with drafts, through the
// engine that verifies them);
// `parallm logits`: writes the logits of every prompt position as .npy (for checks against references).
#include <chrono>
#include <cstdio>
#include <memory>

#include <boost/json.hpp>

#include "cli/commands.h"
#include "cli/kv_cache_dtype_option.h"
#include "cli/model_options.h"
#include "cli/speculative_option.h"
#include "engine/llm.h"
#include "engine/sampler.h"
#include "engine/single_sequence.h"
#include "formats/llama2c.h"
#include "model/lora.h"
#include "model/model.h"
#include "chat/model_text.h"
#include "util/npy.h"
#include "util/strings.h"

namespace parallm::cli {
namespace {

struct GenerateOptions {
  std::string model, prompt_ids, prompt, tokenizer, output, chat_template, chat, adapter_path;
  int max_model_len = 0;  // 0: the file's context
  int max_tokens = 64;
  int chunk = 0;  // logits: prompt chunk size (0: whole prompt)
  int threads = 0;
  float temperature = 0.0f, top_p = 1.0f;
  int top_k = 0;
  uint64_t seed = 0;
  bool json = false;
  bool ignore_eos = false;
  std::optional<KvDtype> kv_cache_dtype;  // nullopt: auto (the model's type)
  SpeculativeConfig speculative;  // generate: drafts (prompt lookup or a draft model) through the engine
};

using Clock = std::chrono::steady_clock;
double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// Loads the model, its text side (tokenizer, chat template; --tokenizer overrides) and the prompt ids.
struct Session {
  std::unique_ptr<Model> model;
  std::shared_ptr<const LoraAdapter> adapter;  // --adapter-path
  ModelText text;
  std::vector<int32_t> prompt;
  int32_t eos = -1;
};

Result<Session> Open(const GenerateOptions& o) {
  Session s;
  PARALLM_ASSIGN_OR_RETURN(s.model, LoadModelForCommand(o.model, o.max_model_len));
  PARALLM_ASSIGN_OR_RETURN(s.text, LoadModelTextForCommand(o.model, o.tokenizer, o.chat_template));
  if (!o.adapter_path.empty()) {
    PARALLM_ASSIGN_OR_RETURN(s.adapter, LoadLoraAdapter(o.adapter_path, s.model->config()));
  }
  const Tokenizer* tok = s.text.tokenizer();
  s.eos = tok ? tok->eos_id() : (s.model->loaded().vocab ? s.model->loaded().vocab->eos : -1);
  if (!o.prompt.empty() + !o.prompt_ids.empty() + !o.chat.empty() > 1)
    return Err("pass one prompt (-p TEXT, --chat TEXT or --prompt-ids), not both");
  if (!o.chat.empty()) {
    const boost::json::array messages{boost::json::object{{"role", "user"}, {"content", o.chat}}};
    PARALLM_ASSIGN_OR_RETURN(s.prompt, s.text.EncodeChat(messages));
  } else if (!o.prompt.empty()) {
    PARALLM_ASSIGN_OR_RETURN(s.prompt, s.text.EncodePrompt(o.prompt));
  } else if (!o.prompt_ids.empty()) {
    PARALLM_ASSIGN_OR_RETURN(s.prompt, ParseIdList(o.prompt_ids));
  } else if (tok && tok->bos_id() >= 0) {
    s.prompt = {tok->bos_id()};  // no prompt: start from BOS
  } else if (s.model->loaded().vocab && s.model->loaded().vocab->bos >= 0) {
    s.prompt = {s.model->loaded().vocab->bos};
  } else {
    return Err("no prompt: pass -p TEXT or --prompt-ids (this model has no BOS token to start from)");
  }
  const int vocab = s.model->config().vocab;
  for (int32_t id : s.prompt)
    if (id >= vocab) return Err("prompt id {} is out of range for a vocabulary of {}", id, vocab);
  if (s.prompt.empty()) return Err("the prompt is empty");
  return s;
}

int RunGenerate(const GenerateOptions& o) {
  auto session = Open(o);
  if (!session.ok()) return Fail(session.status().message());
  Model& model = *session->model;
  const std::vector<int32_t>& prompt = session->prompt;
  const int context = model.config().context_length;
  if (static_cast<int>(prompt.size()) + o.max_tokens > context)
    return Fail(fmt::format("prompt ({} tokens) + max tokens ({}) exceed the model's context of {} tokens; "
                            "--max-model-len {} serves more",
                            prompt.size(), o.max_tokens, context, prompt.size() + o.max_tokens));
  SamplingParams params;
  params.temperature = o.temperature;
  params.top_k = o.top_k;
  params.top_p = o.top_p;
  params.seed = o.seed;
  params.has_seed = true;
  if (Status st = params.Validate(model.config().vocab); !st.ok()) return Fail(st.message());
  const int32_t eos = o.ignore_eos ? -1 : session->eos;

  std::vector<int32_t> out;
  std::string finish = "length";
  double prefill_s = 0, decode_s = 0;
  int threads = 0;
  std::unique_ptr<LLM> llm;  // with drafts: the engine runs the one request (verification needs its batched step)
  if (o.speculative.enabled()) {
    EngineConfig config;
    const int32_t tokens = static_cast<int32_t>(prompt.size()) + o.max_tokens + o.speculative.num_speculative_tokens;
    config.block_size = 16;
    config.num_kv_blocks = tokens / config.block_size + 2;
    config.kv_cache_dtype = o.kv_cache_dtype;
    config.threads = o.threads;
    config.enable_prefix_caching = false;
    config.scheduler.max_num_seqs = 1;
    config.scheduler.max_num_batched_tokens = std::max<int32_t>(512, tokens);  // the prompt in one pass, as below
    config.scheduler.max_model_len = context;
    config.scheduler.speculative = o.speculative;
    if (Status st = LoadDraftModelFor(model, &config); !st.ok()) return Fail(st.message());
    llm = std::make_unique<LLM>(std::move(session->model), config);
    SamplingParams p = params;
    p.max_tokens = o.max_tokens;
    p.ignore_eos = true;  // generate's own end-of-sequence token ends it, as without drafts
    if (eos >= 0) p.stop_token_ids = {eos};
    auto done = llm->Generate({prompt}, {p}, nullptr, {session->adapter});
    if (!done.ok()) return Fail(done.status().message());
    const Choice& c = (*done)[0].choices[0];
    out = c.ids;
    finish = c.finish_reason == FinishReason::kStop ? "stop" : "length";
    prefill_s = c.ttft_seconds;
    decode_s = c.total_seconds - c.ttft_seconds;
    threads = llm->engine().config().threads;
    const Scheduler::SpecStats& spec = llm->engine().scheduler().spec_stats();
    std::fprintf(stderr, "speculative decoding: %lld of %lld draft tokens accepted (%.1f%%)\n",
                 static_cast<long long>(spec.num_accepted_tokens), static_cast<long long>(spec.num_draft_tokens),
                 spec.num_draft_tokens > 0 ? 100.0 * static_cast<double>(spec.num_accepted_tokens) / spec.num_draft_tokens : 0.0);
  } else {
    ThreadPool pool(o.threads);
    SingleSequence seq(model, static_cast<int>(prompt.size()) + o.max_tokens, &pool,
                       o.kv_cache_dtype.value_or(model.AutoKvDtype()));
    seq.SetAdapter(session->adapter.get());
    seq.SetNumPromptTokens(static_cast<int>(prompt.size()));
    Sampler sampler(params);
    auto t0 = Clock::now();
    std::vector<float> logits = seq.Append(prompt);
    auto t1 = Clock::now();
    while (static_cast<int>(out.size()) < o.max_tokens) {
      int32_t next = sampler.Sample(logits, prompt, out).token;
      if (next == eos) {
        finish = "stop";
        break;
      }
      out.push_back(next);
      if (static_cast<int>(out.size()) == o.max_tokens) break;
      logits = seq.Append(std::span<const int32_t>(&out.back(), 1));
    }
    auto t2 = Clock::now();
    prefill_s = Seconds(t0, t1);
    decode_s = Seconds(t1, t2);
    threads = pool.num_threads();
  }
  const Model& loaded = llm ? llm->model() : model;
  // The first generated token comes from the prefill; each later one costs one decode step.
  const int decode_steps = std::max<int>(0, static_cast<int>(out.size()) - 1);
  const double prefill_tps = prompt.size() / std::max(prefill_s, 1e-9);
  const double decode_tps = decode_steps / std::max(decode_s, 1e-9);
  const bool has_text = session->text.has_tokenizer() || loaded.loaded().vocab.has_value();
  std::string text = session->text.has_tokenizer()
                         ? session->text.Decode(out)
                         : (loaded.loaded().vocab ? loaded.loaded().vocab->Decode(out) : "");
  if (o.json) {
    boost::json::object j;
    boost::json::array ids;
    for (int32_t id : out) ids.push_back(id);
    j["ids"] = ids;
    j["text"] = ToValidUtf8(text);  // a token may end mid-character; JSON needs valid UTF-8
    j["finish_reason"] = finish;
    j["prompt_tokens"] = prompt.size();
    j["completion_tokens"] = out.size();
    j["prefill_seconds"] = prefill_s;
    j["decode_seconds"] = decode_s;
    j["prefill_tokens_per_second"] = prefill_tps;
    j["decode_tokens_per_second"] = decode_tps;
    j["threads"] = threads;
    std::printf("%s\n", boost::json::serialize(j).c_str());
  } else {
    if (has_text) {
      std::printf("%s\n", text.c_str());
    } else {
      std::string ids;
      for (int32_t id : out) ids += (ids.empty() ? "" : ",") + std::to_string(id);
      std::printf("%s\n", ids.c_str());
    }
    std::fprintf(stderr, "prefill: %zu tokens in %.3f s (%.1f tokens/s); decode: %d tokens in %.3f s (%.1f tokens/s); %d threads\n",
                 prompt.size(), prefill_s, prefill_tps, decode_steps, decode_s, decode_tps, threads);
  }
  return 0;
}

int RunLogits(const GenerateOptions& o) {
  auto session = Open(o);
  if (!session.ok()) return Fail(session.status().message());
  Model& model = *session->model;
  const std::vector<int32_t>& prompt = session->prompt;
  if (static_cast<int>(prompt.size()) > model.config().context_length)
    return Fail(fmt::format("prompt of {} tokens exceeds the context of {} tokens; --max-model-len {} serves more",
                            prompt.size(), model.config().context_length, prompt.size()));
  ThreadPool pool(o.threads);
  SingleSequence seq(model, static_cast<int>(prompt.size()), &pool, o.kv_cache_dtype.value_or(model.AutoKvDtype()));
  seq.SetAdapter(session->adapter.get());
  // In chunks of --chunk tokens when given (as the engine's chunked prefill runs a long prompt): the KV cache and a
  // hybrid model's recurrent state carry from one chunk to the next.
  std::vector<float> logits;
  const size_t chunk = o.chunk > 0 ? static_cast<size_t>(o.chunk) : prompt.size();
  for (size_t at = 0; at < prompt.size(); at += chunk) {
    std::span<const int32_t> part(prompt.data() + at, std::min(chunk, prompt.size() - at));
    std::vector<float> rows = seq.Append(part, /*all_logits=*/true);
    logits.insert(logits.end(), rows.begin(), rows.end());
  }
  Status st = WriteNpyF32(o.output, {static_cast<int64_t>(prompt.size()), model.config().vocab}, logits.data());
  if (!st.ok()) return Fail(st.message());
  return 0;
}

void AddCommonOptions(CLI::App* cmd, GenerateOptions& o) {
  cmd->add_option("-m,--model", o.model, "Model: .gguf file, llama2.c .bin, or Hugging Face / MLX folder")->required();
  cmd->add_option("--prompt-ids", o.prompt_ids, "Prompt as comma-separated token ids (default: BOS)");
  cmd->add_option("-p,--prompt", o.prompt, "Prompt text, tokenized by the model's tokenizer");
  cmd->add_option("--chat", o.chat, "A user message: the prompt is the chat template's rendering of it");
  cmd->add_option("--tokenizer", o.tokenizer,
                  "Tokenizer to use instead of the model's: tokenizer.json (or its folder), .gguf, llama2.c tokenizer.bin");
  AddChatTemplateOption(cmd, &o.chat_template);
  AddMaxModelLenOption(cmd, &o.max_model_len);
  cmd->add_option("-t,--threads", o.threads, "Threads (default: all cores)");
  cmd->add_option("--adapter-path", o.adapter_path,
                  "LoRA adapter to run with (mlx_lm's flag): an mlx-lm or PEFT adapter folder, or a llama.cpp GGUF "
                  "LoRA file");
  AddKvCacheDtypeOption(cmd, &o.kv_cache_dtype);
}

}  // namespace

void AddGenerateCommands(CLI::App& app) {
  auto g = std::make_shared<GenerateOptions>();
  auto* gen = app.add_subcommand("generate", "Continue a prompt and report prefill/decode tokens per second");
  AddCommonOptions(gen, *g);
  gen->add_option("-n,--max-tokens", g->max_tokens, "Tokens to generate")->capture_default_str();
  gen->add_option("--temp,--temperature", g->temperature, "Sampling temperature (0: greedy)")->capture_default_str();
  gen->add_option("--top-p", g->top_p, "Nucleus sampling mass")->capture_default_str();
  gen->add_option("--top-k", g->top_k, "Keep the k most likely tokens (0: all)")->capture_default_str();
  gen->add_option("--seed", g->seed, "Random seed for sampling")->capture_default_str();
  gen->add_flag("--ignore-eos", g->ignore_eos, "Keep generating after the end-of-sequence token");
  gen->add_flag("--json", g->json, "Print one JSON object: ids, text, prompt_tokens, timings");
  AddSpeculativeOption(gen, &g->speculative);
  gen->callback([g] { ExitOnError(RunGenerate(*g)); });

  auto l = std::make_shared<GenerateOptions>();
  auto* logits = app.add_subcommand("logits", "Write the logits of every prompt position to a .npy file");
  AddCommonOptions(logits, *l);
  logits->add_option("-o,--output", l->output, "Output .npy file (float32 [prompt tokens, vocab])")->required();
  logits->add_option("--chunk", l->chunk, "Run the prompt in chunks of this many tokens (0: all at once)");
  logits->callback([l] { ExitOnError(RunLogits(*l)); });
}

}  // namespace parallm::cli
