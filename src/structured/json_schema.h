// JSON Schema -> GBNF: OpenAI's strict subset and more (type, properties, required, additionalProperties,
// items, prefixItems, minItems/maxItems, enum, const, anyOf, oneOf, $ref/$defs, string minLength/maxLength,
// pattern and format, integer and number ranges, minProperties/maxProperties, integer multipleOf). Output is
// compact-ish JSON with bounded whitespace.
#pragma once

#include <string>
#include <string_view>

#include <boost/json.hpp>

#include "util/status.h"

namespace parallm::structured {

// A GBNF grammar (start rule `root`) for the JSON documents the schema accepts: every string it matches
// validates against the schema (the converse holds except where noted: properties come in schema order, extra
// properties are never generated, patterns are anchored). Errors name the keyword and the schema path
// ("unsupported JSON Schema keyword 'uniqueItems' at #/properties/tags").
Result<std::string> JsonSchemaToGbnf(const boost::json::value& schema);
// The same from JSON text.
Result<std::string> JsonSchemaToGbnf(std::string_view schema_json);

// The same schema's rules for a larger grammar: every rule name starts with `prefix` (letters, digits, '-'), the
// start rule is `<prefix>root`, and the shared rules (ws, json-string, json-value, ...) are left out: the grammar
// that embeds one or more schemas adds JsonBaseGbnf() once.
Result<std::string> JsonSchemaRules(const boost::json::value& schema, const std::string& prefix);
std::string JsonBaseGbnf();

// Any JSON value (OpenAI's `json_object` response format): an object or array at the top level.
std::string JsonObjectGbnf();

// A fixed list of strings: the output is exactly one of them.
std::string ChoiceGbnf(const std::vector<std::string>& choices);

}  // namespace parallm::structured
