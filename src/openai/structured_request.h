// Structured-output fields of a request: OpenAI's `response_format` (json_object, json_schema), vLLM's
// `structured_outputs` {json, regex, choice, grammar, json_object} and its older guided_json, guided_regex,
// guided_choice, guided_grammar; read and compiled into SamplingParams::grammar.
#pragma once

#include <optional>

#include <boost/json.hpp>

#include "engine/sampling_params.h"
#include "structured/structured_output.h"
#include "util/status.h"

namespace parallm::openai {

// The one structured-output request in `o`, if any (two different ones are an error). Errors start with the
// field ("'response_format' ...") so ParamOfMessage finds it.
Result<std::optional<structured::StructuredOutput>> ParseStructuredOutput(const boost::json::object& o);

// Reads the fields and, when one is present, compiles it with `compiler` into params->grammar. Without a
// compiler (a model without tokenizer) a structured-output request is an error.
Status ApplyStructuredOutput(const boost::json::object& o, structured::GrammarCompiler* compiler,
                             SamplingParams* params);

}  // namespace parallm::openai
