// The grammar that tool_choice puts on an answer: "required" and a named function make it one or more valid calls
// in the tool parser's own format, whose `name` is one of the tools and whose `arguments` follow that function's
// `parameters` JSON Schema; with "auto", functions marked `strict` (hermes only, as vLLM's structural tags) leave
// the text free but constrain every call the model opens.
#pragma once

#include <optional>
#include <string>

#include "engine/sampling_params.h"
#include "openai/tool_parser.h"
#include "openai/tools.h"
#include "structured/structured_output.h"
#include "util/status.h"

namespace parallm::openai {

// The GBNF (start rule `root`) for what the model writes after the prompt, given that a forced choice's opening
// (ForcedCallOpening) ends the prompt:
// - named: the arguments, then the call's close (hermes `}` `\n`? `</tool_call>`, llama3_json `}`, mistral `}]`);
// - required: the rest of the first call from its name on, and with parallel_tool_calls more whole calls in the
//   same format (hermes blocks, llama3_json objects after ';', mistral array elements after ',');
// - auto with a strict function and the hermes parser: free text in which every `<tool_call>` must go on as a
//   complete call (strict functions' arguments follow their schema, the others' any JSON object);
// nullopt when the choice puts no constraint (none, auto without strict, or auto with another parser). Errors
// start with "'tools'" or "'tool_choice'" and name the function (a parameters schema that is not an object, or
// one the schema compiler refuses).
Result<std::optional<std::string>> ToolChoiceGbnf(ToolParser parser, const ToolsRequest& tools);

// Compiles ToolChoiceGbnf into params->grammar. A forced choice together with response_format or
// structured_outputs (params->grammar already set) is an error; so is a constraint without a compiler.
// With the mistral parser and calls to parse (tools given, tool_choice not "none") it also turns
// params->skip_special_tokens off, as vLLM's MistralToolParser.adjust_request does: a Mistral model's
// [TOOL_CALLS] marker is a special token, which the parser must see in the text.
Status ApplyToolChoiceGrammar(ToolParser parser, const ToolsRequest& tools, structured::GrammarCompiler* compiler,
                              SamplingParams* params);

}  // namespace parallm::openai
