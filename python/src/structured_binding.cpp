// Structured outputs and tool calls for the Python package, through the same C++ the server uses: constraints
// (vLLM's structured_outputs, a tool_choice) compiled into the engine's SamplingParams, and tool-call parsing.
#include <memory>
#include <mutex>

#include <pybind11/stl.h>

#include "binding.h"
#include "chat/model_text.h"
#include "engine/sampling_params.h"
#include "openai/structured_request.h"
#include "openai/tool_grammar.h"
#include "openai/tool_parser.h"
#include "openai/tools.h"
#include "structured/structured_output.h"

namespace py = pybind11;

namespace parallm::python {
namespace {

boost::json::object ParseObject(const std::string& json) {
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(json, ec);
  if (ec || !v.is_object()) throw py::value_error("internal: not a JSON object: " + json);
  return std::move(v.as_object());
}

openai::ToolParser ParserByName(const std::string& name) {
  if (name.empty()) return openai::ToolParser::kNone;
  auto parser = openai::ToolParserByName(name);
  if (!parser) throw py::value_error("unknown tool_parser '" + name + "' (hermes, llama3_json or mistral)");
  return *parser;
}

// One model's grammar compiler; the vocabulary table (a trie over every token's bytes) is built on first use.
class Grammars {
 public:
  Grammars(std::shared_ptr<ModelText> text, int32_t vocab_size) : text_(std::move(text)), vocab_size_(vocab_size) {}

  // `request`: {"structured_outputs": {...}} (or guided_* fields) as the server reads them.
  void ApplyStructuredOutputs(SamplingParams& params, const std::string& request) {
    Status st = openai::ApplyStructuredOutput(ParseObject(request), Compiler(), &params);
    if (!st.ok()) throw py::value_error(st.message());
  }

  // `request`: {"tools", "tool_choice", "parallel_tool_calls"}. Constrains `params` as tool_choice asks and returns
  // the forced call's opening, which the prompt must end with ("" when the choice forces none).
  std::string ApplyTools(SamplingParams& params, const std::string& request, const std::string& parser_name) {
    const openai::ToolParser parser = ParserByName(parser_name);
    auto tools = openai::ParseTools(ParseObject(request));
    if (auto* e = std::get_if<openai::ToolsError>(&tools)) throw py::value_error(e->message);
    const openai::ToolsRequest& t = std::get<openai::ToolsRequest>(tools);
    if (!t.parses_calls()) return "";
    if (parser == openai::ToolParser::kNone)
      throw py::value_error("tools need a tool parser: none was recognized in the chat template; give tool_parser="
                            "'hermes', 'llama3_json' or 'mistral' (or tool_choice='none')");
    Status st = openai::ApplyToolChoiceGrammar(parser, t, Compiler(), &params);
    if (!st.ok()) throw py::value_error(st.message());
    const bool forced = t.choice == openai::ToolChoice::kRequired || t.choice == openai::ToolChoice::kNamed;
    return forced ? openai::ForcedCallOpening(parser, t.named) : "";
  }

 private:
  structured::GrammarCompiler* Compiler() {
    if (!text_->has_tokenizer()) return nullptr;
    std::call_once(once_, [&] {
      compiler_ = std::make_unique<structured::GrammarCompiler>(
          structured::TokenVocab::FromTokenizer(*text_->tokenizer(), vocab_size_));
    });
    return compiler_.get();
  }

  std::shared_ptr<ModelText> text_;
  int32_t vocab_size_;
  std::once_flag once_;
  std::unique_ptr<structured::GrammarCompiler> compiler_;
};

// The tool-call parser as the text streams in (AsyncLLM.chat): what became final content and the calls that
// became complete, with new ids; the pieces reassemble to what parse_tool_calls reports for the whole text.
class ToolCalls {
 public:
  ToolCalls(const std::string& parser, const std::string& opening, bool single_call)
      : parser_(ParserByName(parser)), stream_(parser_, opening, single_call) {}
  py::tuple Add(const std::string& text, bool final) {
    openai::ToolCallStream::Output out = stream_.Add(text, final);
    std::vector<std::tuple<std::string, std::string, std::string>> calls;
    for (const openai::ToolCall& c : out.calls) calls.emplace_back(openai::NewToolCallId(parser_), c.name, c.arguments);
    return py::make_tuple(out.content, calls);
  }

 private:
  openai::ToolParser parser_;
  openai::ToolCallStream stream_;
};

}  // namespace

void BindStructured(py::module_& m) {
  py::class_<Grammars>(m, "Grammars", "Compiles structured-output and tool-choice constraints for one model.")
      .def(py::init<std::shared_ptr<ModelText>, int32_t>(), py::arg("tokenizer"), py::arg("vocab_size"))
      .def("apply_structured_outputs", &Grammars::ApplyStructuredOutputs, py::arg("params"), py::arg("request"),
           "Compiles the request's structured_outputs / guided_* into params (ValueError naming what is wrong).")
      .def("apply_tools", &Grammars::ApplyTools, py::arg("params"), py::arg("request"), py::arg("parser"),
           "Constrains params as tool_choice asks; returns the forced call's opening the prompt must end with.");
  m.def("detect_tool_parser", [](const std::shared_ptr<ModelText>& text) {
        return std::string(openai::ToolParserName(openai::DetectToolParser(text->chat_template_source())));
      }, py::arg("tokenizer"), "The tool parser the chat template's format calls for ('none' when unclear).");
  m.def("parse_tool_calls",
        [](const std::string& parser, const std::string& text, const std::string& opening, bool single_call) {
          openai::ParsedToolCalls parsed = openai::ParseToolCalls(ParserByName(parser), text, opening, single_call);
          std::vector<std::tuple<std::string, std::string, std::string>> calls;
          for (const openai::ToolCall& c : parsed.calls)
            calls.emplace_back(openai::NewToolCallId(ParserByName(parser)), c.name, c.arguments);
          return py::make_tuple(parsed.content, calls);
        },
        py::arg("parser"), py::arg("text"), py::arg("opening") = "", py::arg("single_call") = false,
        "(content, [(id, name, arguments)]) found in a model's answer by the named tool parser.");
  py::class_<ToolCalls>(m, "ToolCallStream", "Tool calls parsed out of a model's answer as it streams.")
      .def(py::init<const std::string&, const std::string&, bool>(), py::arg("parser"), py::arg("opening") = "",
           py::arg("single_call") = false)
      .def("add", &ToolCalls::Add, py::arg("text"), py::arg("final"),
           "(new content, [(id, name, arguments)] of the calls `text` completed); `final` flushes the rest.");
}

}  // namespace parallm::python
