// Small accessors for tokenizer.json values: defaults for absent keys, and "pattern" objects as regexes.
#pragma once

#include <string>

#include <boost/json.hpp>

#include "tokenizer/regex.h"
#include "util/status.h"

namespace parallm::json_util {

inline std::string String(const boost::json::object& o, const char* key, const std::string& fallback = "") {
  const boost::json::value* v = o.if_contains(key);
  return v != nullptr && v->is_string() ? std::string(v->as_string()) : fallback;
}

inline bool Bool(const boost::json::object& o, const char* key, bool fallback) {
  const boost::json::value* v = o.if_contains(key);
  return v != nullptr && v->is_bool() ? v->as_bool() : fallback;
}

// {"pattern": {"String": "x"}} or {"pattern": {"Regex": "..."}}.
inline Result<Regex> Pattern(const boost::json::object& o) {
  const boost::json::value* p = o.if_contains("pattern");
  if (p == nullptr || !p->is_object()) return Err("missing \"pattern\"");
  if (const boost::json::value* s = p->as_object().if_contains("String"); s && s->is_string())
    return Regex::Literal(std::string(s->as_string()));
  if (const boost::json::value* r = p->as_object().if_contains("Regex"); r && r->is_string())
    return Regex::FromOniguruma(std::string(r->as_string()));
  return Err("\"pattern\" is neither {{\"String\": ...}} nor {{\"Regex\": ...}}");
}

}  // namespace parallm::json_util
