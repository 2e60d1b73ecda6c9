// Tool-choice grammars: the parser's call format around each function's parameters schema, written as GBNF.
#include "openai/tool_grammar.h"

#include <fmt/format.h>

#include "structured/gbnf.h"
#include "structured/json_schema.h"

namespace parallm::openai {
namespace {

using structured::GbnfLiteral;

// A call's shape in one parser's format, as GBNF pieces. The model writes `head` NAME `args_key` ARGUMENTS
// `close`; further calls (parallel_tool_calls) follow after `more`, and `end` closes the list.
struct CallFormat {
  std::string head;      // what a call starts with, up to its name's opening quote
  std::string args_key;  // from the name's closing quote to the arguments
  std::string close;     // GBNF after the arguments
  std::string more;      // GBNF before each further call's head
  std::string end;       // GBNF after the last call
};

CallFormat FormatOf(ToolParser parser) {
  switch (parser) {
    case ToolParser::kHermes:
      // Qwen writes `}\n</tool_call>` and `</tool_call>\n<tool_call>`; some fine-tunes leave the newlines out.
      return {"<tool_call>\n{\"name\": \"", "\", \"arguments\": ", R"("}" "\n"? "</tool_call>")", R"("\n"?)", ""};
    case ToolParser::kLlama3Json:
      return {"{\"name\": \"", "\", \"parameters\": ", R"("}")", R"(";" " "?)", ""};
    case ToolParser::kMistral:
      return {"{\"name\": \"", "\", \"arguments\": ", R"("}")", R"("," " "?)", R"("]")"};
    case ToolParser::kNone: break;
  }
  return {};
}

// Whether a parameters schema can only accept objects (the parsers read a call's arguments as an object).
bool ObjectSchema(const boost::json::value& schema) {
  const boost::json::object* s = schema.if_object();
  if (s == nullptr) return false;
  if (const boost::json::value* t = s->if_contains("type")) return t->is_string() && t->as_string() == "object";
  return s->contains("properties") || s->contains("required") || s->contains("additionalProperties");
}

// The rules for function `index`'s arguments, start rule `tool-<index>-root`: its parameters schema when
// `constrained`, else (or without parameters) any JSON object.
Result<std::string> ArgumentRules(const ToolFunction& f, size_t index, bool constrained) {
  const std::string prefix = fmt::format("tool-{}-", index);
  if (!constrained || f.parameters.is_null()) return prefix + "root ::= json-object\n";
  if (!ObjectSchema(f.parameters))
    return Err("'tools': function '{}': parameters must be a JSON Schema of type \"object\" (a call's arguments are "
               "an object)",
               f.name);
  auto rules = structured::JsonSchemaRules(f.parameters, prefix);
  if (!rules.ok()) return Err("'tools': function '{}': JSON schema: {}", f.name, rules.status().message());
  return std::move(*rules);
}

// Free text in which the hermes trigger `<tool_call>` may only go on as a call: the trigger's prefix automaton
// (Knuth-Morris-Pratt; '<' occurs once in it, so a mismatch falls back to state 1 on '<' and to 0 otherwise),
// one rule per matched length, every state a possible end.
std::string TriggeredText(std::string_view trigger, const std::string& call) {
  std::string out;
  const size_t n = trigger.size();
  for (size_t k = 0; k < n; ++k) {
    const std::string next = k + 1 == n ? call + " tool-text-0" : fmt::format("tool-text-{}", k + 1);
    out += fmt::format("tool-text-{} ::= \"\" | {} {}", k, GbnfLiteral(trigger.substr(k, 1)), next);
    if (k == 0) {
      out += " | [^<] tool-text-0\n";
    } else {
      out += fmt::format(" | \"<\" tool-text-1 | [^<{}] tool-text-0\n", trigger[k]);
    }
  }
  return out;
}

}  // namespace

Result<std::optional<std::string>> ToolChoiceGbnf(ToolParser parser, const ToolsRequest& tools) {
  const bool forced = tools.choice == ToolChoice::kRequired || tools.choice == ToolChoice::kNamed;
  bool any_strict = false;
  for (const ToolFunction& f : tools.functions) any_strict |= f.strict;
  // As vLLM: "auto" is constrained only when a function asks for strict arguments, and only where the call's
  // start is plain text the grammar can see (hermes' <tool_call>; mistral's [TOOL_CALLS] and llama's
  // <|python_tag|> are special tokens no grammar allows).
  const bool strict_auto = tools.choice == ToolChoice::kAuto && any_strict && parser == ToolParser::kHermes;
  if (parser == ToolParser::kNone || tools.functions.empty() || (!forced && !strict_auto))
    return std::optional<std::string>();
  const CallFormat format = FormatOf(parser);

  std::string rules;
  std::string calls;  // the alternatives of tool-call-rest: NAME", "arguments": ARGS close
  for (size_t i = 0; i < tools.functions.size(); ++i) {
    const ToolFunction& f = tools.functions[i];
    if (tools.choice == ToolChoice::kNamed && f.name != tools.named) continue;
    PARALLM_ASSIGN_OR_RETURN(std::string args, ArgumentRules(f, i, forced || f.strict));
    rules += args;
    calls += fmt::format("{}{} tool-{}-root {}", calls.empty() ? "" : " | ", GbnfLiteral(f.name + format.args_key), i,
                         format.close);
  }
  rules += "tool-call-rest ::= " + calls + "\n";

  std::string root;
  if (tools.choice == ToolChoice::kNamed) {
    // The opening in the prompt ends just before the arguments.
    root = fmt::format("root ::= tool-call-rest-named {}\n", format.end);
    const ToolFunction* f = tools.Find(tools.named);
    const size_t i = static_cast<size_t>(f - tools.functions.data());
    rules += fmt::format("tool-call-rest-named ::= tool-{}-root {}\n", i, format.close);
  } else if (tools.choice == ToolChoice::kRequired) {
    // The opening in the prompt ends with the first call's head (up to the name's quote).
    root = fmt::format("root ::= tool-call-rest {} {}\n",
                       tools.parallel_tool_calls
                           ? fmt::format("({} {} tool-call-rest)*", format.more, GbnfLiteral(format.head))
                           : "",
                       format.end);
  } else {
    // Hermes' head is `<tool_call>\n{"name": "`: the trigger, then (newline optional, as vLLM's tags) the rest.
    root = "root ::= tool-text-0\n";
    rules += TriggeredText("<tool_call>", "tool-call-open");
    rules += "tool-call-open ::= \"\\n\"? " + GbnfLiteral("{\"name\": \"") + " tool-call-rest\n";
  }
  return std::optional<std::string>(root + rules + structured::JsonBaseGbnf());
}

Status ApplyToolChoiceGrammar(ToolParser parser, const ToolsRequest& tools, structured::GrammarCompiler* compiler,
                              SamplingParams* params) {
  if (parser == ToolParser::kMistral && tools.parses_calls()) params->skip_special_tokens = false;
  PARALLM_ASSIGN_OR_RETURN(std::optional<std::string> gbnf, ToolChoiceGbnf(parser, tools));
  if (!gbnf) return Status::Ok();
  const bool forced = tools.choice != ToolChoice::kAuto;
  if (params->grammar != nullptr)
    return Err("'{}' constrains the answer to tool calls, so it cannot be combined with response_format or "
               "structured_outputs",
               forced ? "tool_choice" : "tools");
  if (compiler == nullptr) return Err("'tool_choice' needs the model's tokenizer to constrain the calls");
  structured::StructuredOutput spec;
  spec.kind = structured::StructuredOutput::Kind::kGbnf;
  spec.text = std::move(*gbnf);
  auto grammar = compiler->Compile(spec);
  if (!grammar.ok()) return Err("'tool_choice': {}", grammar.status().message());
  params->grammar = std::move(*grammar);
  return Status::Ok();
}

}  // namespace parallm::openai
