// `parallm batch`: one request per JSONL input line (OpenAI field names), all run together through the
// continuous-batching engine, one result per output line as each finishes; resumable (ids already in the
// output are skipped) and tolerant (a bad line is reported with its number and the others still run).
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <boost/json.hpp>

#include "cli/commands.h"
#include "cli/model_options.h"
#include "cli/kv_cache_dtype_option.h"
#include "cli/speculative_option.h"
#include "engine/llm.h"
#include "engine/lora_registry.h"
#include "openai/request_json.h"
#include "util/progress.h"
#include "util/strings.h"

namespace parallm::cli {
namespace {

using openai::BatchRequest;
using openai::ParseBatchLine;

struct BatchOptions {
  std::string model, input, output, tokenizer, chat_template;
  std::string tool_call_parser;  // empty: what the chat template's tool format calls for
  int max_model_len = 0;  // 0: the file's context (up to the engine's default)
  int threads = 0;
  double kv_cache_gb = 2.0;
  std::optional<KvDtype> kv_cache_dtype;  // nullopt: auto (the model's type)
  int num_kv_blocks = 0;
  int block_size = 16;
  int max_num_seqs = 64;
  int max_num_batched_tokens = 512;
  bool no_prefix_caching = false;
  SpeculativeConfig speculative;
  std::vector<std::string> lora_modules;  // NAME=PATH: lines choose one by "model"
};

// Ids of results already written without error (resume skips them).
std::set<std::string> DoneIds(const std::string& path) {
  std::set<std::string> done;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    boost::system::error_code ec;
    boost::json::value v = boost::json::parse(line, ec);
    if (ec || !v.is_object()) continue;  // a line cut short by an interruption: redo it
    const auto& o = v.as_object();
    if (o.contains("error") || !o.contains("id") || !o.at("id").is_string()) continue;
    done.insert(std::string(o.at("id").as_string()));
  }
  return done;
}

int Run(const BatchOptions& o) {
  EngineConfig config;
  config.kv_cache_gb = o.kv_cache_gb;
  config.kv_cache_dtype = o.kv_cache_dtype;
  config.num_kv_blocks = o.num_kv_blocks;
  config.block_size = o.block_size;
  config.threads = o.threads;
  config.enable_prefix_caching = !o.no_prefix_caching;
  config.scheduler.max_num_seqs = o.max_num_seqs;
  config.scheduler.max_num_batched_tokens = o.max_num_batched_tokens;
  config.scheduler.speculative = o.speculative;
  if (o.max_model_len > 0) config.scheduler.max_model_len = o.max_model_len;
  auto model = LoadModelForCommand(o.model, o.max_model_len);
  if (!model.ok()) return Fail(model.status().message());
  // LoRA adapters by name; a line's "model" picks one (the base model: no "model", or the --model path).
  LoraRegistry loras((*model)->config(), std::max<int>(1, static_cast<int>(o.lora_modules.size())));
  for (const std::string& module : o.lora_modules) {
    const size_t eq = module.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == module.size())
      return Fail(fmt::format("--lora-modules {}: expected NAME=PATH", module));
    if (Status st = loras.Add(module.substr(0, eq), module.substr(eq + 1)); !st.ok()) return Fail(st.message());
  }
  if (Status st = LoadDraftModelFor(**model, &config); !st.ok()) return Fail(st.message());
  auto llm = std::make_unique<LLM>(std::move(*model), config);
  auto text = LoadModelTextForCommand(o.model, o.tokenizer, o.chat_template);
  if (!text.ok()) return Fail(text.status().message());
  const std::optional<Vocab>& vocab = llm->model().loaded().vocab;
  // With a tokenizer the engine's frontend streams text and applies stop strings; otherwise the vocabulary
  // decodes the ids at the end.
  if (text->has_tokenizer()) llm->SetTokenizer(text->shared_tokenizer());
  auto decode = [&](const Choice& choice) {
    if (text->has_tokenizer()) return choice.text;
    return vocab ? ToValidUtf8(vocab->Decode(choice.ids)) : std::string();
  };

  const openai::ToolParser tool_parser = o.tool_call_parser.empty()
                                             ? openai::DetectToolParser(text->chat_template_source())
                                             : *openai::ToolParserByName(o.tool_call_parser);

  std::ifstream in(o.input);
  if (!in) return Fail(fmt::format("{}: cannot open the input file", o.input));
  const std::set<std::string> done = DoneIds(o.output);
  // A run cut short may have left half a line: start on a fresh line so no result is glued to it.
  bool ends_mid_line = false;
  if (std::ifstream prev(o.output, std::ios::binary | std::ios::ate); prev && prev.tellg() > 0) {
    prev.seekg(-1, std::ios::end);
    ends_mid_line = prev.get() != '\n';
  }
  std::ofstream out(o.output, std::ios::app);
  if (!out) return Fail(fmt::format("{}: cannot open the output file for appending", o.output));
  if (ends_mid_line) out << '\n';

  // Parse every line first: a bad line is reported and written as an error record; good ones queue.
  struct Job {
    BatchRequest request;
    int line;
    std::shared_ptr<const LoraAdapter> adapter;
  };
  std::vector<Job> jobs;
  // Structured outputs (response_format, structured_outputs, guided_*) compile against the model's vocabulary.
  std::unique_ptr<structured::GrammarCompiler> grammars;
  if (text->has_tokenizer())
    grammars = std::make_unique<structured::GrammarCompiler>(
        structured::TokenVocab::FromTokenizer(*text->tokenizer(), llm->model().config().vocab));
  int bad = 0, skipped = 0, line_no = 0;
  std::string line;
  std::set<std::string> seen;
  auto write = [&](const boost::json::object& record) {
    out << boost::json::serialize(record) << '\n';
    out.flush();  // each finished request survives an interruption
  };
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto parsed = ParseBatchLine(line, line_no, llm->model().config().vocab, &*text, tool_parser, grammars.get());
    if (parsed.ok() && seen.contains(parsed->id)) parsed = Err("duplicate id '{}'", parsed->id);
    std::shared_ptr<const LoraAdapter> adapter;
    if (parsed.ok() && !parsed->model.empty() && parsed->model != o.model) {
      auto acquired = loras.Acquire(parsed->model);
      if (acquired.ok()) {
        adapter = std::move(*acquired);
      } else {
        parsed = Err("'model' {}: not the base model and not one of --lora-modules", parsed->model);
      }
    }
    if (!parsed.ok()) {
      ++bad;
      std::fprintf(stderr, "%s:%d: %s\n", o.input.c_str(), line_no, parsed.status().message().c_str());
      boost::json::object record;
      record["id"] = fmt::format("line-{}", line_no);
      record["error"] = boost::json::object{{"line", line_no}, {"message", parsed.status().message()}};
      write(record);
      continue;
    }
    seen.insert(parsed->id);
    if (done.contains(parsed->id)) {
      ++skipped;
      continue;
    }
    jobs.push_back(Job{std::move(*parsed), line_no, std::move(adapter)});
  }
  if (skipped > 0) std::fprintf(stderr, "resuming: %d requests already in %s\n", skipped, o.output.c_str());

  std::vector<std::vector<int32_t>> prompts;
  std::vector<SamplingParams> params;
  std::vector<std::shared_ptr<const LoraAdapter>> adapters;
  for (const Job& j : jobs) {
    prompts.push_back(j.request.prompt);
    params.push_back(j.request.params);
    adapters.push_back(j.adapter);
  }
  ProgressBar progress("batch", static_cast<double>(jobs.size()), "req");
  int64_t generated = 0;
  auto start = std::chrono::steady_clock::now();
  auto result = llm->Generate(prompts, params, [&](const StreamEvent& e) {
    generated += static_cast<int64_t>(e.new_tokens.size());
    if (e.completion == nullptr) return;  // written once every choice of the prompt is done
    const Completion& c = *e.completion;
    const BatchRequest& r = jobs[e.index].request;
    auto choice_json = [&](const Choice& choice) {
      boost::json::object j;
      j["text"] = decode(choice);
      boost::json::array ids;
      for (int32_t t : choice.ids) ids.push_back(t);
      j["token_ids"] = ids;
      j["finish_reason"] = FinishReasonName(choice.finish_reason);
      if (r.tool_parser != openai::ToolParser::kNone) {
        // As the chat API: the text becomes the content, the calls {id, type, function: {name, arguments}}.
        auto parsed = openai::ParseToolCalls(r.tool_parser, j["text"].as_string(), r.tool_opening,
                                             !r.tools.parallel_tool_calls);
        boost::json::array calls;
        for (const openai::ToolCall& call : parsed.calls)
          calls.push_back(boost::json::object{
              {"id", openai::NewToolCallId(r.tool_parser)},
              {"type", "function"},
              {"function", boost::json::object{{"name", call.name}, {"arguments", call.arguments}}}});
        if (!calls.empty()) {
          j["text"] = r.tool_opening.empty() ? parsed.content : std::string();  // forced: calls only
          j["tool_calls"] = std::move(calls);
          j["finish_reason"] = "tool_calls";
        } else if (!r.tool_opening.empty()) {
          j["error"] = "tool_choice asked for a call, but the answer ended before a complete tool call (max_tokens or "
                       "a stop string cut it)";
        }
      }
      return j;
    };
    // The first choice is flat in the record; with n > 1 all of them are also under "choices".
    boost::json::object record{{"id", r.id}};
    if (!r.model.empty()) record["model"] = r.model;
    for (const auto& [key, value] : choice_json(c.choices[0])) record[key] = value;
    int64_t completion_tokens = 0;
    boost::json::array choices;
    for (const Choice& choice : c.choices) {
      completion_tokens += static_cast<int64_t>(choice.ids.size());
      choices.push_back(choice_json(choice));
    }
    if (c.choices.size() > 1) record["choices"] = choices;
    record["usage"] = boost::json::object{
        {"prompt_tokens", c.prompt_tokens},
        {"completion_tokens", completion_tokens},
        {"total_tokens", c.prompt_tokens + completion_tokens},
        {"prompt_tokens_details", boost::json::object{{"cached_tokens", c.cached_tokens}}}};
    record["ttft_s"] = c.choices[0].ttft_seconds;
    record["latency_s"] = c.choices[0].total_seconds;
    write(record);
    progress.Add(1);
  }, adapters);
  progress.Finish();
  if (!result.ok()) return Fail(result.status().message());
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr, "%zu requests, %lld tokens generated in %.2f s (%.1f tokens/s); %d bad lines\n", jobs.size(),
               static_cast<long long>(generated), secs, static_cast<double>(generated) / std::max(secs, 1e-9), bad);
  return bad > 0 ? 1 : 0;
}

}  // namespace

void AddBatchCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "batch", "Run a JSONL file of requests through the batching engine, one JSON result per line");
  auto o = std::make_shared<BatchOptions>();
  cmd->add_option("-m,--model", o->model, "Model: .gguf file, llama2.c .bin, or Hugging Face / MLX folder")->required();
  cmd->add_option("--input", o->input,
                  "JSONL requests: {\"id\": \"q1\", \"prompt\": \"...\" | \"messages\": [...] | \"prompt_ids\": [...], "
                  "\"max_tokens\": ..., ...}")
      ->required();
  cmd->add_option("--output", o->output, "JSONL results, appended; ids already there are skipped (resume)")->required();
  cmd->add_option("--lora-modules", o->lora_modules,
                  "LoRA adapters as NAME=PATH; a line's \"model\" names the one it runs with (none: the base model)")
      ->expected(1, -1);
  cmd->add_option("--tokenizer", o->tokenizer, "Tokenizer instead of the model's (tokenizer.json or folder, .gguf, tokenizer.bin)");
  AddChatTemplateOption(cmd, &o->chat_template);
  cmd->add_option("--tool-call-parser", o->tool_call_parser,
                  "How tool calls are found in answers to requests with tools: hermes, llama3_json, mistral (default: "
                  "what the chat template's tool format calls for, when it is unambiguous)")
      ->check(CLI::IsMember({"hermes", "llama3_json", "mistral"}));
  AddMaxModelLenOption(cmd, &o->max_model_len);
  cmd->add_option("-t,--threads", o->threads, "Threads (default: all cores)");
  cmd->add_option("--kv-cache-gb", o->kv_cache_gb, "KV cache size in GiB")->capture_default_str();
  cmd->add_option("--num-kv-blocks", o->num_kv_blocks, "KV cache size in blocks (overrides --kv-cache-gb)");
  cmd->add_option("--block-size", o->block_size, "Tokens per KV block")->capture_default_str();
  cmd->add_option("--max-num-seqs", o->max_num_seqs, "Requests running at once")->capture_default_str();
  cmd->add_option("--max-num-batched-tokens", o->max_num_batched_tokens, "Tokens per engine step")->capture_default_str();
  AddSpeculativeOption(cmd, &o->speculative);
  AddKvCacheDtypeOption(cmd, &o->kv_cache_dtype);
  cmd->add_flag("--no-prefix-caching", o->no_prefix_caching, "Do not share KV blocks between requests with a common prefix");
  cmd->callback([o] { ExitOnError(Run(*o)); });
}

}  // namespace parallm::cli
