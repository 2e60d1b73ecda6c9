// `parallm tokenize`: text to token ids and pieces with a model's (or a given) tokenizer, ids back to text, and
// chat messages through the chat template.
#include <cstdio>
#include <iostream>
#include <iterator>

#include <boost/json.hpp>

#include "chat/model_text.h"
#include "cli/commands.h"
#include "cli/model_options.h"
#include "formats/hf_folder.h"
#include "util/mapped_file.h"
#include "util/strings.h"

namespace parallm::cli {
namespace {

struct TokenizeOptions {
  std::string model, tokenizer, text, decode, chat, chat_template;
  bool json = false, no_special = false, read_stdin = false;
};

int Run(const TokenizeOptions& o) {
  if (o.model.empty() && o.tokenizer.empty()) return Fail("pass --model or --tokenizer");
  auto text = LoadModelTextForCommand(o.model.empty() ? o.tokenizer : o.model, o.tokenizer, o.chat_template);
  if (!text.ok()) return Fail(text.status().message());
  if (!text->has_tokenizer()) return Fail(text->missing());
  const Tokenizer& tok = *text->tokenizer();
  if (!o.decode.empty()) {
    auto ids = ParseIdList(o.decode);
    if (!ids.ok()) return Fail(ids.status().message());
    std::string decoded = tok.Decode(*ids, /*skip_special=*/o.no_special);
    if (o.json) {
      std::printf("%s\n", boost::json::serialize(boost::json::object{{"text", decoded}}).c_str());
    } else {
      std::printf("%s\n", decoded.c_str());
    }
    return 0;
  }
  std::vector<int32_t> ids;
  if (!o.chat.empty()) {
    auto source = ReadTextFile(o.chat);
    if (!source.ok()) return Fail(source.status().message());
    auto messages = ParseJson(*source, o.chat);
    if (!messages.ok()) return Fail(messages.status().message());
    if (!messages->is_array()) return Fail(fmt::format("{}: expected a JSON array of messages", o.chat));
    auto prompt = text->RenderChat(messages->as_array());
    if (!prompt.ok()) return Fail(prompt.status().message());
    if (!o.json) std::printf("%s\n", prompt->c_str());
    ids = tok.Encode(*prompt, /*add_special=*/false, /*parse_special=*/true);
  } else {
    std::string input = o.text;
    if (o.read_stdin) input.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    ids = tok.Encode(input, /*add_special=*/!o.no_special, /*parse_special=*/!o.no_special);
  }
  boost::json::array jids, jpieces;
  for (int32_t id : ids) {
    jids.push_back(id);
    jpieces.push_back(boost::json::string(ToValidUtf8(tok.TokenText(id))));
  }
  if (o.json) {
    std::printf("%s\n", boost::json::serialize(boost::json::object{{"ids", jids}, {"pieces", jpieces}}).c_str());
  } else {
    for (size_t i = 0; i < ids.size(); ++i)
      std::printf("%6d  %s\n", ids[i], std::string(jpieces[i].as_string()).c_str());
    std::printf("%zu tokens\n", ids.size());
  }
  return 0;
}

}  // namespace

void AddTokenizeCommand(CLI::App& app) {
  auto o = std::make_shared<TokenizeOptions>();
  auto* cmd = app.add_subcommand("tokenize", "Text to token ids and pieces (and back with --decode)");
  cmd->add_option("text", o->text, "Text to tokenize");
  cmd->add_option("-m,--model", o->model, "Use this model's tokenizer (.gguf, or a folder with tokenizer.json)");
  cmd->add_option("--tokenizer", o->tokenizer, "A tokenizer.json (or its folder), a .gguf, or a llama2.c tokenizer.bin");
  cmd->add_flag("--json", o->json, "Print {\"ids\": [...], \"pieces\": [...]}");
  cmd->add_flag("--no-special", o->no_special, "No BOS/EOS, special-token text stays text (with --decode: skip specials)");
  cmd->add_flag("--stdin", o->read_stdin, "Read the text from standard input, byte for byte");
  cmd->add_option("--decode", o->decode, "Decode these comma-separated ids instead");
  cmd->add_option("--chat", o->chat, "Render a JSON file of messages with the chat template, then tokenize");
  AddChatTemplateOption(cmd, &o->chat_template);
  cmd->callback([o] { ExitOnError(Run(*o)); });
}

}  // namespace parallm::cli
