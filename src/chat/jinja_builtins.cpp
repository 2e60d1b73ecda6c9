// Jinja built-ins other than filters (see jinja_builtins.h), ported from @huggingface/jinja's runtime.ts and utils.ts.
#include "chat/jinja_builtins.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>

#include <fmt/format.h>

#include "chat/jinja_strings.h"

namespace parallm::chat {
namespace {

// `positional.at(i) ?? kwargs.get(name) ?? fallback`, where the keyword arguments arrive as a trailing object.
Value ArgOr(const ValueList& positional, size_t i, const ObjectMap* kwargs, const char* name, Value fallback) {
  if (i < positional.size()) return positional[i];
  if (kwargs) {
    if (const Value* v = kwargs->Find(name)) return *v;
  }
  return fallback;
}

Value StartsOrEndsWith(const std::string& self, const ValueList& args, bool starts) {
  const char* name = starts ? "startswith" : "endswith";
  auto test = [&](const std::string& p) {
    if (p.size() > self.size()) return false;
    return starts ? self.compare(0, p.size(), p) == 0 : self.compare(self.size() - p.size(), p.size(), p) == 0;
  };
  if (args.empty()) ThrowError(fmt::format("{}() requires at least one argument", name));
  const Value& pattern = args[0];
  if (pattern.is_string()) return Value::Bool(test(pattern.str()));
  if (pattern.is_array_like()) {
    for (const Value& item : pattern.array()) {
      if (!item.is_string()) ThrowError(fmt::format("{}() tuple elements must be strings", name));
      if (test(item.str())) return Value::Bool(true);
    }
    return Value::Bool(false);
  }
  ThrowError(fmt::format("{}() argument must be a string or tuple of strings", name));
}

// Python's str.split(sep=None, maxsplit=-1) as @huggingface/jinja implements it.
Value Split(const std::string& self, const ValueList& args) {
  Value sep = args.size() > 0 ? args[0] : Value::Null();
  if (!sep.is_string() && !sep.is_null()) ThrowError("sep argument must be a string or null");
  Value maxsplit = args.size() > 1 ? args[1] : Value::Integer(-1);
  if (maxsplit.kind() != ValueKind::kInteger) ThrowError("maxsplit argument must be a number");
  double max = maxsplit.number();
  std::vector<std::string> parts;
  if (sep.is_null()) {
    std::string text = JsTrimStart(self);
    size_t i = 0;
    while (i < text.size()) {
      while (size_t n = JsWhitespaceLength(text, i)) i += n;
      if (i >= text.size()) break;
      size_t start = i;
      while (i < text.size() && JsWhitespaceLength(text, i) == 0) DecodeUtf8(text, &i);
      if (max != -1 && static_cast<double>(parts.size()) >= max) {
        parts.push_back(text.substr(start));
        break;
      }
      parts.push_back(text.substr(start, i - start));
    }
  } else {
    const std::string& s = sep.str();
    if (s.empty()) ThrowError("empty separator");
    size_t pos = 0;
    while (true) {
      size_t hit = self.find(s, pos);
      if (hit == std::string::npos) break;
      parts.push_back(self.substr(pos, hit - pos));
      pos = hit + s.size();
    }
    parts.push_back(self.substr(pos));
    if (max != -1 && static_cast<double>(parts.size()) > max) {
      // result.push(result.splice(maxsplit).join(sep))
      double n = static_cast<double>(parts.size());
      size_t from = static_cast<size_t>(max < 0 ? std::max(n + max, 0.0) : std::min(max, n));
      std::string rest;
      for (size_t k = from; k < parts.size(); ++k) rest += (k > from ? s : "") + parts[k];
      parts.resize(from);
      parts.push_back(rest);
    }
  }
  ValueList out;
  for (auto& p : parts) out.push_back(Value::String(std::move(p)));
  return Value::Array(std::move(out));
}

Value Replace(const std::string& self, const ValueList& args) {
  if (args.size() < 2) ThrowError("replace() requires at least two arguments");
  if (!args[0].is_string() || !args[1].is_string()) ThrowError("replace() arguments must be strings");
  Value count = Value::Null();
  if (args.size() > 2) {
    if (args[2].kind() == ValueKind::kKeywordArgs) {
      const Value* c = args[2].object().Find("count");
      count = c ? *c : Value::Null();
    } else {
      count = args[2];
    }
  }
  if (count.kind() != ValueKind::kInteger && !count.is_null()) ThrowError("replace() count argument must be a number or null");
  std::optional<double> n;
  if (!count.is_null()) n = count.number();
  return Value::String(JsReplace(self, args[0].str(), args[1].str(), n));
}

// Extension: Python's str.count(sub): non-overlapping occurrences (an empty `sub` counts code point gaps).
Value Count(const std::string& self, const ValueList& args) {
  if (args.empty() || !args[0].is_string()) ThrowError("count() needs a string argument");
  const std::string& sub = args[0].str();
  if (sub.empty()) return Value::Integer(static_cast<double>(SplitCodePoints(self).size() + 1));
  size_t n = 0;
  for (size_t pos = self.find(sub); pos != std::string::npos; pos = self.find(sub, pos + sub.size())) ++n;
  return Value::Integer(static_cast<double>(n));
}

// Extension: Python's str.find(sub): the code point index of the first occurrence, or -1.
Value Find(const std::string& self, const ValueList& args) {
  if (args.empty() || !args[0].is_string()) ThrowError("find() needs a string argument");
  size_t pos = self.find(args[0].str());
  if (pos == std::string::npos) return Value::Integer(-1);
  return Value::Integer(static_cast<double>(SplitCodePoints(std::string_view(self).substr(0, pos)).size()));
}

// Extension: Python's str.format with `{}` and `{0}` fields (no format specs); `{{` and `}}` are braces.
Value Format(const std::string& self, const ValueList& args) {
  std::string out;
  size_t next_auto = 0;
  for (size_t i = 0; i < self.size(); ++i) {
    char c = self[i];
    if ((c == '{' || c == '}') && i + 1 < self.size() && self[i + 1] == c) {
      out.push_back(c);
      ++i;
      continue;
    }
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    size_t close = self.find('}', i);
    if (close == std::string::npos) ThrowError("format(): single '{' encountered in format string");
    std::string field = self.substr(i + 1, close - i - 1);
    size_t index = next_auto++;
    if (!field.empty()) {
      if (field.size() > 6 || field.find_first_not_of("0123456789") != std::string::npos) ThrowError(fmt::format("format(): unsupported field '{{{}}}'", field));
      index = std::stoul(field);
    }
    if (index >= args.size()) ThrowError(fmt::format("format(): no argument for field {}", index));
    out += ToStringMethod(args[index]);
    i = close;
  }
  return Value::String(std::move(out));
}

Value Dictsort(const Value& object, const ValueList& args) {
  ValueList positional;
  const ObjectMap* kwargs = nullptr;
  for (const Value& a : args) {
    if (a.kind() == ValueKind::kKeywordArgs) {
      kwargs = &a.object();
    } else {
      positional.push_back(a);
    }
  }
  Value case_sensitive = ArgOr(positional, 0, kwargs, "case_sensitive", Value::Bool(false));
  if (case_sensitive.kind() != ValueKind::kBool) ThrowError("case_sensitive must be a boolean");
  Value by = ArgOr(positional, 1, kwargs, "by", Value::String("key"));
  if (!by.is_string()) ThrowError("by must be a string");
  if (by.str() != "key" && by.str() != "value") ThrowError("by must be either 'key' or 'value'");
  Value reverse = ArgOr(positional, 2, kwargs, "reverse", Value::Bool(false));
  if (reverse.kind() != ValueKind::kBool) ThrowError("reverse must be a boolean");
  ValueList items = ObjectItems(object).array();
  size_t index = by.str() == "key" ? 0 : 1;
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    int r = CompareValues(a.array()[index], b.array()[index], case_sensitive.boolean());
    return (reverse.boolean() ? -r : r) < 0;
  });
  return Value::Array(std::move(items));
}

std::pair<std::string, Value> NamespaceEntry(const Value& pair) {
  ValueList values;
  if (pair.is_array_like()) {
    values = pair.array();
  } else if (pair.is_string()) {
    for (auto& cp : SplitCodePoints(pair.str())) values.push_back(Value::String(cp));
  }
  if (values.size() != 2) ThrowError("namespace expected an object or an iterable of [key, value] pairs");
  if (!values[0].is_string()) ThrowError("namespace keys must be strings");
  return {values[0].str(), values[1]};
}

LocalTime Now() {
  std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  localtime_r(&t, &tm);
  return LocalTime{tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min};
}

}  // namespace

Value StringMember(const Value& str, const std::string& name) {
  const std::string s = str.str();
  if (name == "length") return Value::Integer(static_cast<double>(Utf16Length(s)));
  using Method = Value (*)(const std::string&, const ValueList&);
  static const std::pair<const char*, Method> kMethods[] = {
      {"upper", [](const std::string& s, const ValueList&) { return Value::String(JsToUpper(s)); }},
      {"lower", [](const std::string& s, const ValueList&) { return Value::String(JsToLower(s)); }},
      // strip/lstrip/rstrip ignore their argument in @huggingface/jinja: they always trim whitespace.
      {"strip", [](const std::string& s, const ValueList&) { return Value::String(JsTrim(s)); }},
      {"lstrip", [](const std::string& s, const ValueList&) { return Value::String(JsTrimStart(s)); }},
      {"rstrip", [](const std::string& s, const ValueList&) { return Value::String(JsTrimEnd(s)); }},
      {"title", [](const std::string& s, const ValueList&) { return Value::String(JsTitleCase(s)); }},
      {"capitalize", [](const std::string& s, const ValueList&) { return Value::String(JsCapitalize(s)); }},
      {"startswith", [](const std::string& s, const ValueList& a) { return StartsOrEndsWith(s, a, true); }},
      {"endswith", [](const std::string& s, const ValueList& a) { return StartsOrEndsWith(s, a, false); }},
      {"split", Split},
      {"replace", Replace},
      // Extensions (Python str methods @huggingface/jinja lacks).
      {"count", Count},
      {"find", Find},
      {"format", Format},
  };
  for (const auto& [method_name, method] : kMethods) {
    if (name == method_name) {
      Method m = method;
      return Value::Function([s, m](ValueList& args, const EnvPtr&) { return m(s, args); });
    }
  }
  return Value();
}

Value ObjectItems(const Value& object) {
  ValueList items;
  for (const auto& [k, v] : object.object().entries) items.push_back(Value::Array({Value::String(k), v}));
  return Value::Array(std::move(items));
}

Value ObjectKeys(const Value& object) {
  ValueList keys;
  for (const auto& [k, v] : object.object().entries) keys.push_back(Value::String(k));
  return Value::Array(std::move(keys));
}

Value ObjectMember(const Value& object, const std::string& name) {
  if (name == "get") {
    return Value::Function([object](ValueList& args, const EnvPtr&) {
      if (args.empty() || !args[0].is_string()) {
        ThrowError(fmt::format("Object key must be a string: got {}", args.empty() ? "undefined" : args[0].TypeName()));
      }
      if (const Value* v = object.object().Find(args[0].str())) return *v;
      return args.size() > 1 ? args[1] : Value::Null();
    });
  }
  if (name == "items") return Value::Function([object](ValueList&, const EnvPtr&) { return ObjectItems(object); });
  if (name == "keys") return Value::Function([object](ValueList&, const EnvPtr&) { return ObjectKeys(object); });
  if (name == "values") {
    return Value::Function([object](ValueList&, const EnvPtr&) {
      ValueList values;
      for (const auto& [k, v] : object.object().entries) values.push_back(v);
      return Value::Array(std::move(values));
    });
  }
  if (name == "dictsort") {
    return Value::Function([object](ValueList& args, const EnvPtr&) { return Dictsort(object, args); });
  }
  return Value();
}

std::optional<bool> RunTest(const std::string& name, const Value& v, const Value* other) {
  ValueKind k = v.kind();
  if (name == "boolean") return k == ValueKind::kBool;
  if (name == "callable") return v.is_function();
  if (name == "odd" || name == "even") {
    if (k != ValueKind::kInteger) ThrowError(fmt::format("cannot {} on {}", name, v.TypeName()));
    bool odd = std::fmod(v.number(), 2) != 0;
    return name == "odd" ? odd : !odd;
  }
  if (name == "false") return k == ValueKind::kBool && !v.boolean();
  if (name == "true") return k == ValueKind::kBool && v.boolean();
  if (name == "none") return v.is_null();
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_number();
  if (name == "integer") return k == ValueKind::kInteger;
  if (name == "iterable") return k == ValueKind::kArray || k == ValueKind::kString;
  if (name == "mapping") return v.is_object_like();
  if (name == "sequence") return v.is_array_like() || v.is_object_like() || v.is_string();
  if (name == "lower") return v.is_string() && v.str() == JsToLower(v.str());
  if (name == "upper") return v.is_string() && v.str() == JsToUpper(v.str());
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "equalto" || name == "eq") {
    if (!other) ThrowError(fmt::format("the '{}' test needs a value to compare with", name));
    return StrictEquals(v, *other);
  }
  // Extensions (Jinja2 tests that take an argument; @huggingface/jinja has no syntax for them).
  if (name == "divisibleby" || name == "sameas" || name == "ne" || name == "in") {
    if (!other) ThrowError(fmt::format("the '{}' test needs an argument", name));
    if (name == "sameas") return StrictEquals(v, *other);
    if (name == "ne") return !StrictEquals(v, *other);
    if (name == "divisibleby") {
      if (!v.is_number() || !other->is_number()) ThrowError("divisibleby needs numbers");
      if (other->number() == 0) ThrowError("divisibleby(0)");
      return std::fmod(v.number(), other->number()) == 0;
    }
    if (other->is_array_like()) {
      return std::any_of(other->array().begin(), other->array().end(), [&](const Value& x) { return StrictEquals(x, v); });
    }
    if (other->is_string() && v.is_string()) return other->str().find(v.str()) != std::string::npos;
    if (other->is_object_like() && v.is_string()) return other->object().Find(v.str()) != nullptr;
    ThrowError(fmt::format("the 'in' test cannot look for {} in {}", v.TypeName(), other->TypeName()));
  }
  return std::nullopt;
}

Value GetAttributeValue(const Value& item, const std::string& path) {
  Value value = item;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (value.is_attribute_container()) {
      const Value* found = value.object().Find(part);
      value = found ? *found : Value();
    } else if (value.is_array_like()) {
      double index = JsParseInt(part);
      if (std::isnan(index) || index < 0 || index >= static_cast<double>(value.array().size())) return Value();
      value = value.array()[static_cast<size_t>(index)];
    } else {
      return Value();
    }
    if (dot == std::string::npos) return value;
    start = dot + 1;
  }
}

const Value& NamespaceFunction() {
  static const Value kNamespace = Value::Function([](ValueList& args, const EnvPtr&) {
    ValueList positional = args;
    const ObjectMap* kwargs = nullptr;
    Value kwargs_holder;
    if (!positional.empty() && positional.back().kind() == ValueKind::kKeywordArgs) {
      kwargs_holder = positional.back();
      kwargs = &kwargs_holder.object();
      positional.pop_back();
    }
    if (positional.size() > 1) ThrowError(fmt::format("namespace expected at most 1 argument, got {}", positional.size()));
    Value ns = Value::NewObject(ValueKind::kNamespace);
    if (positional.size() == 1) {
      const Value& source = positional[0];
      if (source.is_object_like()) {
        for (const auto& [k, v] : source.object().entries) ns.object().Set(k, v);
      } else if (source.is_array_like()) {
        for (const Value& pair : source.array()) {
          auto [k, v] = NamespaceEntry(pair);
          ns.object().Set(k, v);
        }
      } else {
        ThrowError(fmt::format("'{}' object is not iterable", source.TypeName()));
      }
    }
    if (kwargs) {
      for (const auto& [k, v] : kwargs->entries) ns.object().Set(k, v);
    }
    return ns;
  });
  return kNamespace;
}

std::string Strftime(const std::string& format, const LocalTime& t) {
  static const char* kMonths[] = {"January", "February", "March",     "April",   "May",      "June",
                                  "July",    "August",   "September", "October", "November", "December"};
  std::string month = t.month >= 1 && t.month <= 12 ? kMonths[t.month - 1] : "";
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%' || i + 1 >= format.size()) {
      out.push_back(format[i]);
      continue;
    }
    char d = format[i + 1];
    switch (d) {
      case 'Y': out += std::to_string(t.year); break;
      case 'm': out += fmt::format("{:02d}", t.month); break;
      case 'd': out += fmt::format("{:02d}", t.day); break;
      case 'b': out += month.substr(0, 3); break;
      case 'B': out += month; break;
      case 'H': out += fmt::format("{:02d}", t.hour); break;
      case 'M': out += fmt::format("{:02d}", t.minute); break;
      case '%': out += "%"; break;
      default: out.push_back('%'); continue;  // not a directive: keep it and read on from the next character
    }
    ++i;
  }
  return out;
}

void InstallGlobals(Environment* env, const RenderOptions& options) {
  env->Set("false", Value::Bool(false));
  env->Set("true", Value::Bool(true));
  env->Set("none", Value::Null());
  env->Set("raise_exception", Value::Function([](ValueList& args, const EnvPtr&) -> Value {
             ThrowError(args.empty() || args[0].is_undefined() ? "" : ToJsString(args[0]));
           }));
  env->Set("range", Value::Function([](ValueList& args, const EnvPtr&) {
             std::vector<double> n;
             for (const Value& a : args) {
               if (a.is_number()) {
                 n.push_back(a.number());
               } else if (a.kind() == ValueKind::kBool) {
                 n.push_back(a.boolean());
               } else {
                 ThrowError(fmt::format("range() arguments must be numbers, got {}", a.TypeName()));
               }
             }
             if (n.empty() || n.size() > 3) ThrowError("range() takes 1 to 3 arguments");
             double start = n.size() == 1 ? 0 : n[0], stop = n.size() == 1 ? n[0] : n[1];
             double step = n.size() == 3 ? n[2] : 1;
             if (step == 0) ThrowError("range() step must not be zero");
             double count = std::ceil((stop - start) / step);
             if (!(count <= static_cast<double>(kMaxRangeLength))) {
               ThrowError(fmt::format("range() longer than {} items", kMaxRangeLength));
             }
             ValueList out;
             for (double i = start; step > 0 ? i < stop : i > stop; i += step) {
               out.push_back(std::trunc(i) == i ? Value::Integer(i) : Value::Float(i));
             }
             return Value::Array(std::move(out));
           }));
  std::optional<LocalTime> fixed = options.now;
  env->Set("strftime_now", Value::Function([fixed](ValueList& args, const EnvPtr&) {
             if (args.empty() || !args[0].is_string()) ThrowError("strftime_now() expects a format string");
             return Value::String(Strftime(args[0].str(), fixed ? *fixed : Now()));
           }));
  env->Set("True", Value::Bool(true));
  env->Set("False", Value::Bool(false));
  env->Set("None", Value::Null());
}

}  // namespace parallm::chat
