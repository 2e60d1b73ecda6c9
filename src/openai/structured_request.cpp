// Structured-output request fields: the OpenAI and vLLM spellings of the same five kinds of constraint.
#include "openai/structured_request.h"

#include <set>

#include <fmt/format.h>

namespace parallm::openai {
namespace {

using structured::StructuredOutput;
using Kind = StructuredOutput::Kind;

struct Found {
  std::string field;  // where it came from, for errors
  StructuredOutput spec;
};

// A schema given as an object (or, as some clients send it, as JSON text).
Result<std::string> SchemaText(const boost::json::value& v, const std::string& field) {
  if (v.is_object() || v.is_bool()) return boost::json::serialize(v);
  if (v.is_string()) {
    boost::system::error_code ec;
    boost::json::value parsed = boost::json::parse(v.as_string(), ec);
    if (ec || !(parsed.is_object() || parsed.is_bool())) return Err("'{}' must be a JSON Schema object", field);
    return boost::json::serialize(parsed);
  }
  return Err("'{}' must be a JSON Schema object", field);
}

Result<std::vector<std::string>> Choices(const boost::json::value& v, const std::string& field) {
  if (!v.is_array() || v.as_array().empty()) return Err("'{}' must be a non-empty list of strings", field);
  std::vector<std::string> out;
  for (const auto& c : v.as_array()) {
    if (!c.is_string()) return Err("'{}' must be a non-empty list of strings", field);
    out.emplace_back(c.as_string());
  }
  return out;
}

Result<std::string> Text(const boost::json::value& v, const std::string& field) {
  if (!v.is_string()) return Err("'{}' must be a string", field);
  return std::string(v.as_string());
}

Status ResponseFormat(const boost::json::value& v, std::vector<Found>* found) {
  if (!v.is_object()) return Err("'response_format' must be an object with a 'type'");
  const boost::json::object& rf = v.as_object();
  const boost::json::value* type = rf.if_contains("type");
  if (type == nullptr || !type->is_string())
    return Err("'response_format' must be an object with a 'type' ('text', 'json_object' or 'json_schema')");
  const std::string t(type->as_string());
  if (t == "text") return Status::Ok();
  if (t == "json_object") {
    found->push_back({"response_format", {Kind::kJsonObject, "", {}, "", ""}});
    return Status::Ok();
  }
  if (t != "json_schema")
    return Err("'response_format' type must be 'text', 'json_object' or 'json_schema', got '{}'", t);
  const boost::json::value* js = rf.if_contains("json_schema");
  if (js == nullptr || !js->is_object())
    return Err("'response_format' of type 'json_schema' needs a 'json_schema' object with a 'schema'");
  const boost::json::object& j = js->as_object();
  if (const boost::json::value* strict = j.if_contains("strict"); strict && !strict->is_null() && !strict->is_bool())
    return Err("'response_format' json_schema.strict must be true or false");
  // OpenAI: `schema` is optional (then any JSON object); vLLM accepts the same.
  const boost::json::value* schema = j.if_contains("schema");
  if (schema == nullptr || schema->is_null()) {
    found->push_back({"response_format", {Kind::kJsonObject, "", {}, "", ""}});
    return Status::Ok();
  }
  PARALLM_ASSIGN_OR_RETURN(std::string text, SchemaText(*schema, "response_format"));
  found->push_back({"response_format", {Kind::kJsonSchema, std::move(text), {}, "", ""}});
  return Status::Ok();
}

Status Guided(const boost::json::object& o, const std::string& prefix, const std::string& field_of_errors,
              std::vector<Found>* found) {
  auto field = [&](const char* name) { return prefix + name; };
  for (const char* name : {"json", "regex", "choice", "grammar", "json_object"}) {
    const boost::json::value* v = o.if_contains(field(name));
    if (v == nullptr || v->is_null()) continue;
    const std::string label = field_of_errors.empty() ? field(name) : field_of_errors + "." + name;
    const std::string n = name;
    StructuredOutput spec;
    if (n == "json") {
      spec.kind = Kind::kJsonSchema;
      PARALLM_ASSIGN_OR_RETURN(spec.text, SchemaText(*v, label));
    } else if (n == "regex") {
      spec.kind = Kind::kRegex;
      PARALLM_ASSIGN_OR_RETURN(spec.text, Text(*v, label));
    } else if (n == "choice") {
      spec.kind = Kind::kChoice;
      PARALLM_ASSIGN_OR_RETURN(spec.choices, Choices(*v, label));
    } else if (n == "grammar") {
      spec.kind = Kind::kGbnf;
      PARALLM_ASSIGN_OR_RETURN(spec.text, Text(*v, label));
    } else {
      if (!v->is_bool()) return Err("'{}' must be true or false", label);
      if (!v->as_bool()) continue;
      spec.kind = Kind::kJsonObject;
    }
    found->push_back({field_of_errors.empty() ? field(name) : field_of_errors, std::move(spec)});
  }
  return Status::Ok();
}

}  // namespace

Result<std::optional<StructuredOutput>> ParseStructuredOutput(const boost::json::object& o) {
  std::vector<Found> found;
  if (const boost::json::value* rf = o.if_contains("response_format"); rf && !rf->is_null())
    PARALLM_RETURN_IF_ERROR(ResponseFormat(*rf, &found));
  if (const boost::json::value* so = o.if_contains("structured_outputs"); so && !so->is_null()) {
    if (!so->is_object()) return Err("'structured_outputs' must be an object");
    for (const auto& [key, value] : so->as_object()) {
      static const std::set<std::string> kKnown = {"json", "regex", "choice", "grammar", "json_object",
                                                   "disable_fallback", "disable_any_whitespace",
                                                   "disable_additional_properties", "whitespace_pattern",
                                                   "structural_tag"};
      if (!kKnown.count(std::string(key)))
        return Err("'structured_outputs' has an unknown field '{}'", std::string(key));
      if (key == "structural_tag" && !value.is_null())
        return Err("'structured_outputs' structural_tag is not supported");
    }
    PARALLM_RETURN_IF_ERROR(Guided(so->as_object(), "", "structured_outputs", &found));
  }
  PARALLM_RETURN_IF_ERROR(Guided(o, "guided_", "", &found));
  if (found.empty()) return std::optional<StructuredOutput>();
  if (found.size() > 1)
    return Err("'{}' and '{}' both constrain the output; give only one", found[0].field, found[1].field);
  return std::optional<StructuredOutput>(std::move(found[0].spec));
}

Status ApplyStructuredOutput(const boost::json::object& o, structured::GrammarCompiler* compiler,
                             SamplingParams* params) {
  PARALLM_ASSIGN_OR_RETURN(std::optional<StructuredOutput> spec, ParseStructuredOutput(o));
  if (!spec) return Status::Ok();
  // The field that asked, for the error's first word.
  std::string field = o.contains("response_format") && !o.at("response_format").is_null() ? "response_format"
                      : o.contains("structured_outputs")                                   ? "structured_outputs"
                                                                                           : "";
  if (field.empty())
    for (const char* g : {"guided_json", "guided_regex", "guided_choice", "guided_grammar", "guided_json_object"})
      if (o.contains(g) && !o.at(g).is_null()) field = g;
  if (compiler == nullptr) return Err("'{}' needs the model's tokenizer, and this model has none", field);
  auto grammar = compiler->Compile(*spec);
  if (!grammar.ok()) return Err("'{}': {}", field, grammar.status().message());
  params->grammar = std::move(*grammar);
  return Status::Ok();
}

}  // namespace parallm::openai
