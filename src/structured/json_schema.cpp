// JSON Schema compiler: walks the schema once, writing one GBNF rule per object, array and $ref target; shared
// pieces (strings, numbers, whitespace, any value) are written once.
#include "structured/json_schema.h"

#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

#include "structured/gbnf.h"
#include "structured/regex_to_gbnf.h"

namespace parallm::structured {
namespace {

namespace json = boost::json;

// Whitespace is bounded so a model cannot spend its tokens on it (llama.cpp's choice too).
constexpr std::string_view kBaseRules = R"(ws ::= | " " | "\n" [ \t]{0,20}
json-char ::= [^"\\\x00-\x1F\x7F] | "\\" (["\\/bfnrt] | "u" json-u4)
json-u4 ::= [0-9a-cA-C] json-hex json-hex json-hex | [dD] [0-7] json-hex json-hex | [eEfF] json-hex json-hex json-hex
json-hex ::= [0-9a-fA-F]
json-string ::= "\"" json-char* "\""
json-integer ::= "-"? ("0" | [1-9] [0-9]{0,15})
json-number ::= json-integer ("." [0-9]{1,15})? ([eE] [-+]? [0-9]{1,3})?
json-boolean ::= "true" | "false"
json-null ::= "null"
json-value ::= json-object | json-array | json-string | json-number | json-boolean | json-null
json-object ::= "{" ws (json-string ws ":" ws json-value (ws "," ws json-string ws ":" ws json-value)*)? ws "}"
json-array ::= "[" ws (json-value (ws "," ws json-value)*)? ws "]"
)";

// String formats as regexes over the string's value (checked by python-jsonschema's format checker where it
// knows the format).
const std::map<std::string, std::string>& Formats() {
  static const std::map<std::string, std::string> kFormats = {
      {"date", R"([0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8]))"},
      {"time", R"(([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9]))"},
      {"date-time",
       R"([0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9]))"},
      {"email", R"([a-zA-Z0-9_+-]{1,20}(\.[a-zA-Z0-9_+-]{1,20}){0,2}@[a-zA-Z0-9]{1,20}(\.[a-zA-Z0-9]{1,20}){0,2}\.[a-zA-Z]{2,6})"},
      {"uuid", R"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})"},
      {"ipv4", R"(((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9]))"},
      {"hostname", R"([a-zA-Z0-9]{1,20}(\.[a-zA-Z0-9]{1,20}){0,3})"},
  };
  return kFormats;
}

// Keywords that only describe (no constraint): accepted and ignored.
const std::set<std::string>& Annotations() {
  static const std::set<std::string> kAnnotations = {"title", "description", "$schema", "$id", "$comment",
                                                     "default", "examples", "deprecated", "readOnly", "writeOnly",
                                                     "$defs", "definitions", "strict", "additionalItems"};
  return kAnnotations;
}

std::string Sanitize(std::string_view s) {
  std::string out;
  for (char c : s) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '-';
  if (out.size() > 40) out.resize(40);
  return out;
}

int Digits(int64_t v) { return v < 10 ? 1 : 1 + Digits(v / 10); }

int64_t Pow10(int n) {
  int64_t p = 1;
  while (n-- > 0) p *= 10;
  return p;
}

// Decimal strings of equal length x <= y: the GBNF for the integers in between.
std::string SameLength(const std::string& x, const std::string& y) {
  if (x == y) return GbnfLiteral(x);
  if (x.size() == 1) return fmt::format("[{}-{}]", x, y);
  if (x[0] == y[0]) return GbnfLiteral(x.substr(0, 1)) + " (" + SameLength(x.substr(1), y.substr(1)) + ")";
  const std::string rest_x = x.substr(1), rest_y = y.substr(1);
  const size_t n = rest_x.size();
  if (rest_x == std::string(n, '0') && rest_y == std::string(n, '9'))
    return fmt::format("[{}-{}] [0-9]{{{}}}", x[0], y[0], n);
  std::string out = GbnfLiteral(x.substr(0, 1)) + " (" + SameLength(rest_x, std::string(n, '9')) + ")";
  if (y[0] - x[0] > 1) out += fmt::format(" | [{}-{}] [0-9]{{{}}}", static_cast<char>(x[0] + 1), static_cast<char>(y[0] - 1), n);
  out += " | " + GbnfLiteral(y.substr(0, 1)) + " (" + SameLength(std::string(n, '0'), rest_y) + ")";
  return out;
}

constexpr int kMaxDigits = 16;

// Non-negative integers in [a, b] (b < 0: unbounded), without leading zeros.
std::string NonNegativeRange(int64_t a, int64_t b) {
  std::vector<std::string> alts;
  const int max_len = b < 0 ? kMaxDigits : Digits(b);
  for (int len = Digits(a); len <= max_len; ++len) {
    const int64_t lo = std::max<int64_t>(a, len == 1 ? 0 : Pow10(len - 1));
    const int64_t hi = b < 0 || len < Digits(b) ? Pow10(len) - 1 : b;
    if (lo > hi) continue;
    if (b < 0 && lo == Pow10(len - 1) && len > 1) {  // every longer number: one alternative
      alts.push_back(fmt::format("[1-9] [0-9]{{{},{}}}", len - 1, kMaxDigits - 1));
      break;
    }
    alts.push_back(SameLength(std::to_string(lo), std::to_string(hi)));
  }
  std::string out;
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + ("(" + alts[i] + ")");
  return out;
}

class SchemaCompiler {
 public:
  SchemaCompiler(const json::value& root, std::string prefix) : root_(root), prefix_(std::move(prefix)) {}

  // The schema's own rules, its start rule `<prefix>root` first (without the shared base rules).
  Result<std::string> Compile() {
    PARALLM_ASSIGN_OR_RETURN(std::string root, Visit(root_, "#"));
    return prefix_ + "root ::= " + root + "\n" + rules_;
  }

 private:
  static Status Fail(const std::string& path, const std::string& what) { return Err("{} at {}", what, path); }

  std::string AddRule(const std::string& base, const std::string& body) {
    const std::string name = fmt::format("{}{}-{}", prefix_, Sanitize(base), counter_++);
    rules_ += name + " ::= " + body + "\n";
    return name;
  }

  Result<const json::value*> Resolve(const std::string& ref, const std::string& path) {
    if (ref.empty() || ref[0] != '#') return Fail(path + "/$ref", fmt::format("only local $ref ('#/...') is supported, got '{}'", ref));
    const json::value* v = &root_;
    size_t pos = 1;
    while (pos < ref.size()) {
      if (ref[pos] != '/') return Fail(path + "/$ref", fmt::format("bad $ref '{}'", ref));
      size_t next = ref.find('/', pos + 1);
      std::string token = ref.substr(pos + 1, next == std::string::npos ? std::string::npos : next - pos - 1);
      for (size_t i; (i = token.find("~1")) != std::string::npos;) token.replace(i, 2, "/");
      for (size_t i; (i = token.find("~0")) != std::string::npos;) token.replace(i, 2, "~");
      if (v->is_object() && v->as_object().contains(token)) {
        v = &v->as_object().at(token);
      } else if (v->is_array() && !token.empty() && token.find_first_not_of("0123456789") == std::string::npos &&
                 std::stoul(token) < v->as_array().size()) {
        v = &v->as_array()[std::stoul(token)];
      } else {
        return Fail(path + "/$ref", fmt::format("$ref '{}' does not resolve", ref));
      }
      pos = next == std::string::npos ? ref.size() : next;
    }
    return v;
  }

  Result<std::string> Visit(const json::value& schema, const std::string& path) {
    if (schema.is_bool()) {
      if (schema.as_bool()) return std::string("json-value");
      return Fail(path, "the schema 'false' accepts nothing");
    }
    if (!schema.is_object()) return Fail(path, "a schema must be an object or a boolean");
    const json::object& s = schema.as_object();
    if (++depth_ > 200) return Fail(path, "the schema nests too deeply");
    struct DepthGuard {
      int& d;
      ~DepthGuard() { --d; }
    } guard{depth_};

    if (const json::value* ref = s.if_contains("$ref")) {
      if (!ref->is_string()) return Fail(path + "/$ref", "$ref must be a string");
      const std::string target(ref->as_string());
      if (auto it = refs_.find(target); it != refs_.end()) return it->second;
      const std::string name =
          fmt::format("{}ref-{}-{}", prefix_, Sanitize(target.substr(target.rfind('/') + 1)), counter_++);
      refs_[target] = name;
      PARALLM_ASSIGN_OR_RETURN(const json::value* resolved, Resolve(target, path));
      PARALLM_ASSIGN_OR_RETURN(std::string body, Visit(*resolved, target));
      rules_ += name + " ::= " + body + "\n";
      return name;
    }
    static const std::set<std::string> kKnown = {
        "type", "properties", "required", "additionalProperties", "items", "prefixItems", "minItems", "maxItems",
        "enum", "const", "anyOf", "oneOf", "allOf", "minLength", "maxLength", "pattern", "format", "minimum",
        "maximum", "exclusiveMinimum", "exclusiveMaximum", "minProperties", "maxProperties", "multipleOf"};
    for (const auto& [key, value] : s) {
      const std::string k(key);
      if (!kKnown.count(k) && !Annotations().count(k))
        return Fail(path, fmt::format("unsupported JSON Schema keyword '{}'", k));
    }
    if (const json::value* c = s.if_contains("const")) return GbnfLiteral(json::serialize(*c));
    if (const json::value* e = s.if_contains("enum")) {
      if (!e->is_array() || e->as_array().empty()) return Fail(path + "/enum", "enum must be a non-empty array");
      std::string out;
      for (const json::value& v : e->as_array()) out += (out.empty() ? "" : " | ") + GbnfLiteral(json::serialize(v));
      return "(" + out + ")";
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (const json::value* list = s.if_contains(key)) {
        if (!list->is_array() || list->as_array().empty())
          return Fail(path + "/" + key, fmt::format("{} must be a non-empty array", key));
        std::string out;
        for (size_t i = 0; i < list->as_array().size(); ++i) {
          PARALLM_ASSIGN_OR_RETURN(std::string alt, Visit(list->as_array()[i], fmt::format("{}/{}/{}", path, key, i)));
          out += (i ? " | " : "") + alt;
        }
        return AddRule(key, out);
      }
    }
    if (const json::value* all = s.if_contains("allOf")) {
      if (!all->is_array() || all->as_array().size() != 1)
        return Fail(path + "/allOf", "allOf is supported only with one schema");
      return Visit(all->as_array()[0], path + "/allOf/0");
    }
    std::vector<std::string> types;
    if (const json::value* t = s.if_contains("type")) {
      if (t->is_string()) {
        types.emplace_back(t->as_string());
      } else if (t->is_array()) {
        for (const json::value& x : t->as_array()) {
          if (!x.is_string()) return Fail(path + "/type", "type must be a string or a list of strings");
          types.emplace_back(x.as_string());
        }
      } else {
        return Fail(path + "/type", "type must be a string or a list of strings");
      }
    } else if (s.contains("properties") || s.contains("required") || s.contains("additionalProperties")) {
      types.emplace_back("object");
    } else if (s.contains("items") || s.contains("prefixItems")) {
      types.emplace_back("array");
    } else if (s.contains("pattern") || s.contains("format") || s.contains("minLength") || s.contains("maxLength")) {
      types.emplace_back("string");
    } else if (s.contains("minimum") || s.contains("maximum")) {
      types.emplace_back("number");
    } else {
      return std::string("json-value");
    }
    std::string out;
    for (const std::string& type : types) {
      std::string alt;
      if (type == "object") {
        PARALLM_ASSIGN_OR_RETURN(alt, Object(s, path));
      } else if (type == "array") {
        PARALLM_ASSIGN_OR_RETURN(alt, Array(s, path));
      } else if (type == "string") {
        PARALLM_ASSIGN_OR_RETURN(alt, String(s, path));
      } else if (type == "integer" || type == "number") {
        PARALLM_ASSIGN_OR_RETURN(alt, Number(s, path, type == "integer"));
      } else if (type == "boolean") {
        alt = "json-boolean";
      } else if (type == "null") {
        alt = "json-null";
      } else {
        return Fail(path + "/type", fmt::format("unknown type '{}'", type));
      }
      out += (out.empty() ? "" : " | ") + alt;
    }
    return types.size() == 1 ? out : "(" + out + ")";
  }

  Result<int64_t> Count(const json::object& s, const char* key, const std::string& path, int64_t fallback) {
    const json::value* v = s.if_contains(key);
    if (v == nullptr) return fallback;
    if (!v->is_int64() || v->as_int64() < 0 || v->as_int64() > 100000)
      return Fail(path + "/" + key, fmt::format("{} must be an integer between 0 and 100000", key));
    return v->as_int64();
  }

  Result<std::string> Object(const json::object& s, const std::string& path) {
    std::vector<std::pair<std::string, const json::value*>> props;  // in schema order
    if (const json::value* p = s.if_contains("properties")) {
      if (!p->is_object()) return Fail(path + "/properties", "properties must be an object");
      for (const auto& [k, v] : p->as_object()) props.emplace_back(std::string(k), &v);
    }
    std::set<std::string> required;
    if (const json::value* r = s.if_contains("required")) {
      if (!r->is_array()) return Fail(path + "/required", "required must be an array of names");
      for (const json::value& name : r->as_array()) {
        if (!name.is_string()) return Fail(path + "/required", "required must be an array of names");
        required.insert(std::string(name.as_string()));
      }
    }
    const json::value* additional = s.if_contains("additionalProperties");
    const bool no_additional = additional && additional->is_bool() && !additional->as_bool();
    // Required names the properties do not list take the additionalProperties schema.
    for (const std::string& name : required) {
      bool listed = false;
      for (const auto& p : props) listed |= p.first == name;
      if (listed) continue;
      if (no_additional)
        return Fail(path + "/required", fmt::format("required property '{}' is not allowed by additionalProperties: false", name));
      static const json::value kAny = true;
      props.emplace_back(name, additional && additional->is_object() ? additional : &kAny);
    }
    std::vector<std::string> req_items, opt_items;
    for (const auto& [name, sub] : props) {
      PARALLM_ASSIGN_OR_RETURN(std::string value, Visit(*sub, path + "/properties/" + name));
      std::string item = GbnfLiteral(json::serialize(json::value(name))) + " ws \":\" ws " + value;
      (required.count(name) ? req_items : opt_items).push_back(item);
    }
    PARALLM_ASSIGN_OR_RETURN(int64_t min_props, Count(s, "minProperties", path, 0));
    PARALLM_ASSIGN_OR_RETURN(int64_t max_props, Count(s, "maxProperties", path, -1));
    if (max_props >= 0 && max_props < min_props)
      return Fail(path + "/maxProperties", "maxProperties is below minProperties");
    const bool counted = min_props > 0 || max_props >= 0;
    if (props.empty() && ((additional && additional->is_object()) || (!no_additional && !s.contains("properties")))) {
      // A map: any keys, each value of the additionalProperties schema (any value without one).
      std::string value = "json-value";
      if (additional && additional->is_object()) {
        PARALLM_ASSIGN_OR_RETURN(value, Visit(*additional, path + "/additionalProperties"));
      } else if (!counted) {
        return std::string("json-object");
      }
      const std::string kv = "json-string ws \":\" ws " + value;
      if (!counted) return AddRule("map", "\"{\" ws (" + kv + " (ws \",\" ws " + kv + ")*)? ws \"}\"");
      // The keys are not checked to be distinct: a model that repeats one makes fewer properties than it wrote.
      const int64_t more_min = std::max<int64_t>(0, min_props - 1);
      const std::string more = max_props < 0 ? fmt::format("{{{},}}", more_min)
                                             : fmt::format("{{{},{}}}", more_min, std::max<int64_t>(0, max_props - 1));
      const std::string list = kv + " (ws \",\" ws " + kv + ")" + more;
      if (max_props == 0) return std::string("\"{\" ws \"}\"");
      return AddRule("map", "\"{\" ws " + (min_props > 0 ? list : "(" + list + ")?") + " ws \"}\"");
    }
    if (counted) return CountedObject(req_items, opt_items, min_props, max_props, path);
    std::string body;
    for (size_t i = 0; i < req_items.size(); ++i) body += (i ? " ws \",\" ws " : "") + req_items[i];
    if (!req_items.empty()) {
      for (const std::string& item : opt_items) body += " (ws \",\" ws " + item + ")?";
    } else if (!opt_items.empty()) {
      // No required property: the first present optional one has no comma before it. tail_i: the properties
      // after i, each optional, each after a comma.
      std::vector<std::string> tails(opt_items.size());
      std::string tail_expr;
      for (size_t i = opt_items.size(); i-- > 0;) {
        tails[i] = tail_expr;
        tail_expr = "(ws \",\" ws " + opt_items[i] + ")? " + tail_expr;
      }
      std::string any;
      for (size_t i = 0; i < opt_items.size(); ++i)
        any += (i ? " | " : "") + AddRule("props", opt_items[i] + " " + tails[i]);
      body = "(" + any + ")?";
    }
    return AddRule("object", "\"{\" ws " + body + " ws \"}\"");
  }

  // An object whose listed properties (required first, then the optional ones in schema order, as Object writes
  // them) number between min_props and max_props (-1: no maximum): one rule per (optional index, count so far).
  // Properties the schema does not list are never written, so they cannot make up a minimum.
  Result<std::string> CountedObject(const std::vector<std::string>& req, const std::vector<std::string>& opt,
                                    int64_t min_props, int64_t max_props, const std::string& path) {
    const int64_t n_req = static_cast<int64_t>(req.size()), n_opt = static_cast<int64_t>(opt.size());
    const int64_t k_min = std::max<int64_t>(0, min_props - n_req);
    const int64_t k_max = max_props < 0 ? n_opt : std::min(n_opt, max_props - n_req);
    if (k_max < 0) return Fail(path + "/maxProperties", "maxProperties is below the number of required properties");
    if (k_min > n_opt)
      return Fail(path + "/minProperties", "minProperties needs more properties than the schema lists (properties it "
                                           "does not list are never generated)");
    if (n_opt * (k_max + 1) > 4000) return Fail(path, "minProperties/maxProperties over this many properties");
    std::string body;
    for (size_t i = 0; i < req.size(); ++i) body += (i ? " ws \",\" ws " : "") + req[i];
    // rule(i, c): optional properties from i on, c of them written so far; built from the last index back.
    std::map<std::pair<int64_t, int64_t>, std::string> names;
    for (int64_t i = n_opt; i >= 0; --i) {
      for (int64_t c = std::min(i, k_max); c >= 0; --c) {
        if (c + (n_opt - i) < k_min) continue;  // cannot reach the minimum any more
        std::string alts;
        if (i == n_opt) {
          alts = "\"\"";
        } else {
          const std::string sep = n_req + c > 0 ? "ws \",\" ws " : "";
          if (c + 1 <= k_max && names.count({i + 1, c + 1}))
            alts = sep + opt[static_cast<size_t>(i)] + " " + names[{i + 1, c + 1}];
          if (names.count({i + 1, c})) alts += (alts.empty() ? "" : " | ") + names[{i + 1, c}];
        }
        if (alts.empty()) continue;
        names[{i, c}] = AddRule("props", alts);
      }
    }
    body += (body.empty() ? "" : " ") + names.at({0, 0});
    return AddRule("object", "\"{\" ws " + body + " ws \"}\"");
  }

  Result<std::string> Array(const json::object& s, const std::string& path) {
    PARALLM_ASSIGN_OR_RETURN(int64_t min_items, Count(s, "minItems", path, 0));
    PARALLM_ASSIGN_OR_RETURN(int64_t max_items, Count(s, "maxItems", path, -1));
    if (max_items >= 0 && max_items < min_items) return Fail(path + "/maxItems", "maxItems is below minItems");
    std::vector<std::string> prefix;
    if (const json::value* p = s.if_contains("prefixItems")) {
      if (!p->is_array()) return Fail(path + "/prefixItems", "prefixItems must be an array of schemas");
      for (size_t i = 0; i < p->as_array().size(); ++i) {
        PARALLM_ASSIGN_OR_RETURN(std::string item, Visit(p->as_array()[i], fmt::format("{}/prefixItems/{}", path, i)));
        prefix.push_back(item);
      }
    }
    std::string item = "json-value";
    bool more_allowed = true;
    if (const json::value* it = s.if_contains("items")) {
      if (it->is_bool() && !it->as_bool()) {
        more_allowed = false;
      } else {
        PARALLM_ASSIGN_OR_RETURN(item, Visit(*it, path + "/items"));
      }
    }
    if (!prefix.empty()) {
      // A tuple: the prefix items in order (all of them, to keep the grammar simple), then more when allowed.
      const int64_t n = static_cast<int64_t>(prefix.size());
      if (max_items >= 0 && max_items < n) return Fail(path + "/maxItems", "maxItems shorter than prefixItems is not supported");
      std::string body = prefix[0];
      for (size_t i = 1; i < prefix.size(); ++i) body += " ws \",\" ws " + prefix[i];
      if (more_allowed && max_items != n) {
        const std::string extra = max_items < 0 ? "*" : fmt::format("{{0,{}}}", max_items - n);
        body += " (ws \",\" ws " + item + ")" + extra;
      }
      return AddRule("tuple", "\"[\" ws " + body + " ws \"]\"");
    }
    if (!more_allowed) return std::string("\"[\" ws \"]\"");
    std::string rest;
    if (max_items < 0)
      rest = fmt::format("(ws \",\" ws {}){{{},}}", item, std::max<int64_t>(0, min_items - 1));
    else if (max_items > 0)
      rest = fmt::format("(ws \",\" ws {}){{{},{}}}", item, std::max<int64_t>(0, min_items - 1), max_items - 1);
    std::string body;
    if (max_items == 0) body = "";
    else if (min_items == 0) body = "(" + item + " " + rest + ")?";
    else body = item + " " + rest;
    return AddRule("array", "\"[\" ws " + body + " ws \"]\"");
  }

  Result<std::string> String(const json::object& s, const std::string& path) {
    PARALLM_ASSIGN_OR_RETURN(int64_t min_len, Count(s, "minLength", path, 0));
    PARALLM_ASSIGN_OR_RETURN(int64_t max_len, Count(s, "maxLength", path, -1));
    if (max_len >= 0 && max_len < min_len) return Fail(path + "/maxLength", "maxLength is below minLength");
    const json::value* pattern = s.if_contains("pattern");
    const json::value* format = s.if_contains("format");
    if ((pattern || format) && (s.contains("minLength") || s.contains("maxLength")))
      return Fail(path, fmt::format("minLength/maxLength together with '{}' is not supported", pattern ? "pattern" : "format"));
    if (pattern && format) return Fail(path, "pattern together with format is not supported");
    if (pattern) {
      if (!pattern->is_string()) return Fail(path + "/pattern", "pattern must be a string");
      auto gbnf = RegexToGbnf(std::string(pattern->as_string()), /*json_string=*/true);
      if (!gbnf.ok()) return Fail(path + "/pattern", fmt::format("pattern: {}", gbnf.status().message()));
      return AddRule("pattern", "\"\\\"\" (" + *gbnf + ") \"\\\"\"");
    }
    if (format) {
      if (!format->is_string()) return Fail(path + "/format", "format must be a string");
      auto it = Formats().find(std::string(format->as_string()));
      if (it == Formats().end())
        return Fail(path + "/format", fmt::format("unsupported string format '{}'", std::string(format->as_string())));
      PARALLM_ASSIGN_OR_RETURN(std::string gbnf, RegexToGbnf(it->second, /*json_string=*/true));
      return AddRule(it->first, "\"\\\"\" (" + gbnf + ") \"\\\"\"");
    }
    if (min_len == 0 && max_len < 0) return std::string("json-string");
    const std::string rep = max_len < 0 ? fmt::format("{{{},}}", min_len) : fmt::format("{{{},{}}}", min_len, max_len);
    return AddRule("string", "\"\\\"\" json-char" + rep + " \"\\\"\"");
  }

  Result<std::string> Number(const json::object& s, const std::string& path, bool integer) {
    std::optional<double> lo, hi;
    bool lo_open = false, hi_open = false;
    for (const char* key : {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"}) {
      const json::value* v = s.if_contains(key);
      if (v == nullptr) continue;
      if (!v->is_number()) return Fail(path + "/" + key, fmt::format("{} must be a number", key));
      const double d = v->to_number<double>();
      if (std::abs(d) > 1e15) return Fail(path + "/" + key, fmt::format("{} beyond 1e15 is not supported", key));
      const std::string k = key;
      if (k == "minimum" || k == "exclusiveMinimum") {
        if (!lo || d > *lo || (d == *lo && k == "exclusiveMinimum")) {
          lo = d;
          lo_open = k == "exclusiveMinimum";
        }
      } else if (!hi || d < *hi || (d == *hi && k == "exclusiveMaximum")) {
        hi = d;
        hi_open = k == "exclusiveMaximum";
      }
    }
    int64_t multiple = 1;
    if (const json::value* m = s.if_contains("multipleOf")) {
      const double k = m->is_number() ? m->to_number<double>() : 0;
      if (!(k >= 1 && k <= 1e15 && k == std::floor(k)))
        return Fail(path + "/multipleOf", "multipleOf is supported only as a positive integer");
      multiple = static_cast<int64_t>(k);
      integer = true;  // a multiple of an integer is an integer (and a valid number)
    }
    if (!lo && !hi) {
      if (multiple > 1) return Multiples(multiple, path);
      return std::string(integer ? "json-integer" : "json-number");
    }
    // Integers in the range; for numbers also x.fraction with x in [lo, hi - 1] when lo >= 0 (then x.fraction
    // lies in [x, x + 1), inside the range).
    const int64_t kInf = INT64_MAX;
    int64_t a = lo ? static_cast<int64_t>(std::ceil(*lo)) : -kInf;
    if (lo && lo_open && static_cast<double>(a) == *lo) ++a;
    int64_t b = hi ? static_cast<int64_t>(std::floor(*hi)) : kInf;
    if (hi && hi_open && static_cast<double>(b) == *hi) --b;
    if (a > b) return Fail(path, "the numeric range holds no integer, which is not supported");
    if (multiple > 1) {
      // A bounded range: its multiples listed outright.
      if (a == -kInf || b == kInf)
        return Fail(path + "/multipleOf", "multipleOf with a range open on one side is not supported");
      const int64_t first = a >= 0 ? (a + multiple - 1) / multiple : -((-a) / multiple);
      const int64_t last = b >= 0 ? b / multiple : -((-b + multiple - 1) / multiple);
      if (first > last) return Fail(path + "/multipleOf", "the range holds no multiple of multipleOf");
      if (last - first >= 1000) return Fail(path + "/multipleOf", "multipleOf with over 1000 values in the range");
      std::string out;
      for (int64_t q = first; q <= last; ++q)
        out += (q == first ? "" : " | ") + GbnfLiteral(std::to_string(q * multiple));
      return AddRule("multiple", out);
    }
    std::vector<std::string> alts;
    if (a < 0) {  // negative part: "-" then magnitudes in [max(1, -b), -a]
      const int64_t mag_lo = b >= 0 ? 1 : -b;
      const int64_t mag_hi = a == -kInf ? -1 : -a;
      alts.push_back("\"-\" (" + NonNegativeRange(mag_lo, mag_hi) + ")");
    }
    if (b >= 0) alts.push_back(NonNegativeRange(std::max<int64_t>(a, 0), b == kInf ? -1 : b));
    if (!integer && a >= 0 && (b == kInf || b - 1 >= a))
      alts.push_back("(" + NonNegativeRange(a, b == kInf ? -1 : b - 1) + ") \".\" [0-9]{1,6}");
    std::string out;
    for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + ("(" + alts[i] + ")");
    return AddRule(integer ? "integer" : "number", out);
  }

  // The integers divisible by k (up to 16 digits), by the remainder of the digits read so far: one rule per
  // (digits written, remainder) from which a multiple can still be finished.
  Result<std::string> Multiples(int64_t k, const std::string& path) {
    if (k > 100) return Fail(path + "/multipleOf", "multipleOf above 100 without a bounded range is not supported");
    const size_t n = static_cast<size_t>(k), digits = kMaxDigits;
    // live[l][r]: with l digits written and remainder r, a multiple can still be finished.
    std::vector<std::vector<bool>> live(digits + 1, std::vector<bool>(n, false));
    for (size_t l = digits; l >= 1; --l)
      for (size_t r = 0; r < n; ++r) {
        bool ok = r == 0;
        for (size_t d = 0; d < 10 && !ok && l < digits; ++d) ok = live[l + 1][(r * 10 + d) % n];
        live[l][r] = ok;
      }
    const int id = counter_++;
    auto name = [&](size_t l, size_t r) {
      return live[l][r] ? fmt::format("{}mult-{}-{}-{}-{}", prefix_, k, id, l, r) : std::string();
    };
    // The digits [from, 9] after remainder r (l digits written), grouped by the state they lead to.
    auto steps = [&](size_t l, size_t r, int from) {
      std::map<std::string, std::string> by_target;
      for (int d = from; d < 10; ++d) {
        const std::string target = name(l + 1, (r * 10 + static_cast<size_t>(d)) % n);
        if (!target.empty()) by_target[target] += static_cast<char>('0' + d);
      }
      std::string out;
      for (const auto& [target, ds] : by_target) out += (out.empty() ? "" : " | ") + fmt::format("[{}] {}", ds, target);
      return out;
    };
    for (size_t l = 1; l <= digits; ++l)
      for (size_t r = 0; r < n; ++r) {
        if (!live[l][r]) continue;
        std::string alts = r == 0 ? "\"\"" : "";
        const std::string more = l < digits ? steps(l, r, 0) : "";
        if (!more.empty()) alts += (alts.empty() ? "" : " | ") + more;
        rules_ += name(l, r) + " ::= " + alts + "\n";
      }
    // The first digit is 1-9 (no leading zeros): a step from 0 digits written, remainder 0.
    return AddRule("multiple", "\"0\" | \"-\"? (" + steps(0, 0, 1) + ")");
  }

  const json::value& root_;
  const std::string prefix_;  // before every rule name, so that several schemas can share one grammar
  std::string rules_;
  std::map<std::string, std::string> refs_;
  int counter_ = 0;
  int depth_ = 0;
};

}  // namespace

Result<std::string> JsonSchemaToGbnf(const json::value& schema) {
  PARALLM_ASSIGN_OR_RETURN(std::string rules, SchemaCompiler(schema, "").Compile());
  return rules + std::string(kBaseRules);
}

Result<std::string> JsonSchemaRules(const json::value& schema, const std::string& prefix) {
  return SchemaCompiler(schema, prefix).Compile();
}

std::string JsonBaseGbnf() { return std::string(kBaseRules); }

Result<std::string> JsonSchemaToGbnf(std::string_view schema_json) {
  boost::system::error_code ec;
  json::value v = json::parse(schema_json, ec);
  if (ec) return Err("the JSON schema is not valid JSON: {}", ec.message());
  return JsonSchemaToGbnf(v);
}

std::string JsonObjectGbnf() { return "root ::= json-object | json-array\n" + std::string(kBaseRules); }

std::string ChoiceGbnf(const std::vector<std::string>& choices) {
  std::string out = "root ::= ";
  for (size_t i = 0; i < choices.size(); ++i) out += (i ? " | " : "") + GbnfLiteral(choices[i]);
  return out + "\n";
}

}  // namespace parallm::structured
