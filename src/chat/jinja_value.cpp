// Runtime values: conversions, equality, ordering and JSON, each following @huggingface/jinja's runtime.ts.
#include "chat/jinja_value.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "chat/jinja_strings.h"

namespace parallm::chat {

void ThrowError(std::string message) { throw JinjaError{std::move(message), std::nullopt}; }

Value Value::NewObject(ValueKind kind) { return Object(std::make_shared<ObjectMap>(), kind); }

const char* Value::TypeName() const {
  switch (kind_) {
    case ValueKind::kUndefined: return "UndefinedValue";
    case ValueKind::kNull: return "NullValue";
    case ValueKind::kBool: return "BooleanValue";
    case ValueKind::kInteger: return "IntegerValue";
    case ValueKind::kFloat: return "FloatValue";
    case ValueKind::kString: return "StringValue";
    case ValueKind::kArray: return "ArrayValue";
    case ValueKind::kTuple: return "TupleValue";
    case ValueKind::kObject: return "ObjectValue";
    case ValueKind::kKeywordArgs: return "KeywordArgumentsValue";
    case ValueKind::kNamespace: return "NamespaceValue";
    case ValueKind::kFunction: return "FunctionValue";
  }
  return "Value";
}

const void* Value::identity() const {
  if (auto* a = std::get_if<std::shared_ptr<ValueList>>(&data_)) return a->get();
  if (auto* o = std::get_if<std::shared_ptr<ObjectMap>>(&data_)) return o->get();
  if (auto* f = std::get_if<std::shared_ptr<NativeFunction>>(&data_)) return f->get();
  return nullptr;
}

const Value* ObjectMap::Find(std::string_view key) const {
  for (const auto& [k, v] : entries) {
    if (k == key) return &v;
  }
  return nullptr;
}

void ObjectMap::Set(const std::string& key, Value value) {
  for (auto& [k, v] : entries) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  entries.emplace_back(key, std::move(value));
}

bool ObjectMap::Erase(std::string_view key) {
  for (auto it = entries.begin(); it != entries.end(); ++it) {
    if (it->first == key) {
      entries.erase(it);
      return true;
    }
  }
  return false;
}

bool Truthy(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kArray:
    case ValueKind::kTuple: return !v.array().empty();
    case ValueKind::kObject:
    case ValueKind::kKeywordArgs: return !v.object().entries.empty();
    default: return RawTruthy(v);
  }
}

bool RawTruthy(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kUndefined:
    case ValueKind::kNull: return false;
    case ValueKind::kBool: return v.boolean();
    case ValueKind::kInteger:
    case ValueKind::kFloat: return v.number() != 0 && !std::isnan(v.number());
    case ValueKind::kString: return !v.str().empty();
    default: return true;  // arrays, Maps and functions are JavaScript objects
  }
}

std::string ToStringMethod(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kUndefined: return "undefined";
    case ValueKind::kNull: return "null";
    case ValueKind::kBool: return v.boolean() ? "true" : "false";
    case ValueKind::kInteger: return JsNumberToString(v.number());
    case ValueKind::kFloat: {
      double n = v.number();
      if (n == 0 && std::signbit(n)) return "-0.0";
      if (std::isfinite(n) && std::fmod(n, 1.0) == 0) {
        return std::fabs(n) < 1e21 ? fmt::format("{:.1f}", n) : JsNumberToString(n);  // toFixed(1)
      }
      return JsNumberToString(n);
    }
    case ValueKind::kString: return v.str();
    case ValueKind::kFunction: return "[function]";
    default: return ToJson(v, JsonOptions{}, 0, /*undefined_to_null=*/false);
  }
}

std::string ToJsString(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kInteger:
    case ValueKind::kFloat: return JsNumberToString(v.number());
    case ValueKind::kArray:
    case ValueKind::kTuple: {
      std::string out;
      for (size_t i = 0; i < v.array().size(); ++i) {
        if (i) out += ",";
        out += ToStringMethod(v.array()[i]);
      }
      return out;
    }
    case ValueKind::kObject:
    case ValueKind::kKeywordArgs:
    case ValueKind::kNamespace: return "[object Map]";
    default: return ToStringMethod(v);
  }
}

std::string ToJoinString(const Value& v) {
  if (v.is_null() || v.is_undefined()) return "";
  return ToJsString(v);
}

namespace {

// The JavaScript type of `x.value`.
enum class JsType { kUndefined, kNull, kBoolean, kNumber, kString, kObject };
JsType TypeOf(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kUndefined: return JsType::kUndefined;
    case ValueKind::kNull: return JsType::kNull;
    case ValueKind::kBool: return JsType::kBoolean;
    case ValueKind::kInteger:
    case ValueKind::kFloat: return JsType::kNumber;
    case ValueKind::kString: return JsType::kString;
    default: return JsType::kObject;
  }
}

// StringToNumber: "" is 0, surrounding whitespace is ignored, anything else that is not a number is NaN.
double JsStringToNumber(std::string_view text) {
  std::string s = JsTrim(text);
  if (s.empty()) return 0;
  if (s == "Infinity" || s == "+Infinity") return INFINITY;
  if (s == "-Infinity") return -INFINITY;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    char* end = nullptr;
    double v = static_cast<double>(std::strtoull(s.c_str() + 2, &end, 16));
    return *end == 0 ? v : NAN;
  }
  for (char c : s) {
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-')) return NAN;
  }
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  return *end == 0 ? v : NAN;
}

}  // namespace

bool StrictEquals(const Value& a, const Value& b) {
  JsType ta = TypeOf(a), tb = TypeOf(b);
  if (ta != tb) return false;
  switch (ta) {
    case JsType::kUndefined:
    case JsType::kNull: return true;
    case JsType::kBoolean: return a.boolean() == b.boolean();
    case JsType::kNumber: return a.number() == b.number();
    case JsType::kString: return a.str() == b.str();
    case JsType::kObject: return a.identity() == b.identity();
  }
  return false;
}

bool LooseEquals(const Value& a, const Value& b) {
  JsType ta = TypeOf(a), tb = TypeOf(b);
  if (ta == tb) return StrictEquals(a, b);
  bool a_nullish = ta == JsType::kNull || ta == JsType::kUndefined;
  bool b_nullish = tb == JsType::kNull || tb == JsType::kUndefined;
  if (a_nullish || b_nullish) return a_nullish && b_nullish;
  if (ta == JsType::kBoolean) return LooseEquals(Value::Integer(a.boolean() ? 1 : 0), b);
  if (tb == JsType::kBoolean) return LooseEquals(a, Value::Integer(b.boolean() ? 1 : 0));
  if (ta == JsType::kNumber && tb == JsType::kString) return a.number() == JsStringToNumber(b.str());
  if (ta == JsType::kString && tb == JsType::kNumber) return JsStringToNumber(a.str()) == b.number();
  // An object against a primitive compares its primitive form: arrays join, Maps are "[object Map]".
  if (ta == JsType::kObject) return LooseEquals(Value::String(ToJsString(a)), b);
  if (tb == JsType::kObject) return LooseEquals(a, Value::String(ToJsString(b)));
  return false;
}

int CompareValues(const Value& a, const Value& b, bool case_sensitive) {
  if (a.is_null() && b.is_null()) return 0;
  if (a.is_null() || b.is_null()) ThrowError(fmt::format("Cannot compare {} with {}", a.TypeName(), b.TypeName()));
  if (a.is_undefined() && b.is_undefined()) return 0;
  if (a.is_undefined() || b.is_undefined()) ThrowError(fmt::format("Cannot compare {} with {}", a.TypeName(), b.TypeName()));
  auto numeric = [](const Value& v) { return v.is_number() || v.kind() == ValueKind::kBool; };
  if (numeric(a) && numeric(b)) {
    double x = a.kind() == ValueKind::kBool ? a.boolean() : a.number();
    double y = b.kind() == ValueKind::kBool ? b.boolean() : b.number();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.kind() != b.kind()) ThrowError(fmt::format("Cannot compare different types: {} and {}", a.TypeName(), b.TypeName()));
  if (a.is_string()) {
    if (case_sensitive) return CompareUtf16(a.str(), b.str());
    return CompareUtf16(JsToLower(a.str()), JsToLower(b.str()));
  }
  ThrowError(fmt::format("Cannot compare type: {}", a.TypeName()));
}

namespace {

// An approximation of String.prototype.localeCompare (ICU root collation) for sort_keys: case-insensitive first,
// lowercase before uppercase on ties.
bool LocaleLess(const std::string& a, const std::string& b) {
  int c = CompareUtf16(JsToLower(a), JsToLower(b));
  if (c != 0) return c < 0;
  return CompareUtf16(b, a) < 0;
}

}  // namespace

std::string ToJson(const Value& v, const JsonOptions& options, int depth, bool undefined_to_null) {
  std::string item_sep = ", ", key_sep = ": ";
  bool indented = options.indent && *options.indent != 0 && !std::isnan(*options.indent);
  if (options.separators) {
    item_sep = options.separators->first;
    key_sep = options.separators->second;
  } else if (indented) {
    item_sep = ",";
  }
  switch (v.kind()) {
    case ValueKind::kNull: return "null";
    case ValueKind::kUndefined: return undefined_to_null ? "null" : "undefined";
    case ValueKind::kBool: return v.boolean() ? "true" : "false";
    case ValueKind::kInteger:
    case ValueKind::kFloat: return JsonNumber(v.number());
    case ValueKind::kString: return JsonQuote(v.str(), options.ensure_ascii);
    case ValueKind::kArray:
    case ValueKind::kObject:
    case ValueKind::kNamespace: break;
    default: ThrowError(fmt::format("Cannot convert to JSON: {}", v.TypeName()));
  }
  std::string indent_unit;
  if (indented) {
    if (*options.indent < 0 || *options.indent > 1000) ThrowError(fmt::format("Invalid count value: {}", JsNumberToString(*options.indent)));
    indent_unit.assign(static_cast<size_t>(*options.indent), ' ');
  }
  std::string base = "\n";
  for (int i = 0; i < depth; ++i) base += indent_unit;
  std::string child = base + indent_unit;
  std::vector<std::string> core;
  if (v.kind() == ValueKind::kArray) {
    for (const Value& item : v.array()) core.push_back(ToJson(item, options, depth + 1, undefined_to_null));
    std::string out = "[";
    if (indented && !core.empty()) {
      out += child;
      for (size_t i = 0; i < core.size(); ++i) out += (i ? item_sep + child : "") + core[i];
      out += base;
    } else {
      for (size_t i = 0; i < core.size(); ++i) out += (i ? item_sep : "") + core[i];
    }
    return out + "]";
  }
  std::vector<const std::pair<std::string, Value>*> entries;
  for (const auto& e : v.object().entries) entries.push_back(&e);
  if (options.sort_keys) {
    std::stable_sort(entries.begin(), entries.end(), [](auto* x, auto* y) { return LocaleLess(x->first, y->first); });
  }
  std::string out = "{";
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i) out += item_sep;
    if (indented) out += child;
    out += JsonQuote(entries[i]->first, options.ensure_ascii) + key_sep +
           ToJson(entries[i]->second, options, depth + 1, undefined_to_null);
  }
  if (indented && !entries.empty()) out += base;
  return out + "}";
}

namespace {

// An array index in JavaScript's property order: a canonical decimal below 2^32 - 1.
std::optional<uint64_t> ArrayIndexKey(std::string_view key) {
  if (key.empty() || key.size() > 10 || (key.size() > 1 && key[0] == '0')) return std::nullopt;
  uint64_t n = 0;
  for (char c : key) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + (c - '0');
  }
  if (n >= 4294967295ull) return std::nullopt;
  return n;
}

}  // namespace

Value FromJson(const boost::json::value& json) {
  switch (json.kind()) {
    case boost::json::kind::null: return Value::Null();
    case boost::json::kind::bool_: return Value::Bool(json.get_bool());
    case boost::json::kind::int64: return Value::Integer(static_cast<double>(json.get_int64()));
    case boost::json::kind::uint64: return Value::Integer(static_cast<double>(json.get_uint64()));
    case boost::json::kind::double_: {
      double d = json.get_double();
      return std::isfinite(d) && std::trunc(d) == d ? Value::Integer(d) : Value::Float(d);
    }
    case boost::json::kind::string: return Value::String(std::string(json.get_string()));
    case boost::json::kind::array: {
      ValueList items;
      items.reserve(json.get_array().size());
      for (const auto& item : json.get_array()) items.push_back(FromJson(item));
      return Value::Array(std::move(items));
    }
    case boost::json::kind::object: {
      auto map = std::make_shared<ObjectMap>();
      std::vector<std::pair<uint64_t, const boost::json::key_value_pair*>> indices;
      for (const auto& kv : json.get_object()) {
        if (auto n = ArrayIndexKey(kv.key())) indices.emplace_back(*n, &kv);
      }
      std::sort(indices.begin(), indices.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
      for (const auto& [n, kv] : indices) map->Set(std::string(kv->key()), FromJson(kv->value()));
      for (const auto& kv : json.get_object()) {
        if (!ArrayIndexKey(kv.key())) map->Set(std::string(kv.key()), FromJson(kv.value()));
      }
      return Value::Object(std::move(map));
    }
  }
  return Value();
}

}  // namespace parallm::chat
