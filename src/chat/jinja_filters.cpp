// Jinja filters (`x | name` and `x | name(args)`), ported from @huggingface/jinja's Interpreter.applyFilter: which
// filters exist depends on the operand's type, and the bare and called forms are distinct, as they are there.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "chat/jinja_builtins.h"
#include "chat/jinja_interpreter.h"
#include "chat/jinja_strings.h"

namespace parallm::chat {
namespace {

Value ArgOr(const ValueList& args, size_t i, const ObjectMap& kwargs, const char* name, Value fallback) {
  if (i < args.size()) return args[i];
  if (const Value* v = kwargs.Find(name)) return *v;
  return fallback;
}

Value KwargOr(const ObjectMap& kwargs, const char* name, Value fallback) {
  const Value* v = kwargs.Find(name);
  return v ? *v : fallback;
}

std::string Indent(const std::string& text, const std::string& indent, bool first, bool blank) {
  std::string out;
  size_t start = 0, line = 0;
  while (true) {
    size_t nl = text.find('\n', start);
    std::string_view part(text.data() + start, (nl == std::string::npos ? text.size() : nl) - start);
    if (line > 0) out += "\n";
    if ((!first && line == 0) || (!blank && part.empty())) {
      out.append(part);
    } else {
      out += indent;
      out.append(part);
    }
    if (nl == std::string::npos) break;
    start = nl + 1;
    ++line;
  }
  return out;
}

// An array's bare-name filters.
Value ArrayFilter(const Value& operand, const std::string& name) {
  const ValueList& items = operand.array();
  if (name == "list") return operand;
  if (name == "first") return items.empty() ? Value() : items.front();
  if (name == "last") return items.empty() ? Value() : items.back();
  if (name == "length") return Value::Integer(static_cast<double>(items.size()));
  if (name == "reverse") return Value::Array(ValueList(items.rbegin(), items.rend()));
  if (name == "sort") {
    ValueList sorted = items;
    std::stable_sort(sorted.begin(), sorted.end(), [](const Value& a, const Value& b) { return CompareValues(a, b, false) < 0; });
    return Value::Array(std::move(sorted));
  }
  if (name == "join") {
    std::string out;
    for (const Value& v : items) out += ToJoinString(v);
    return Value::String(std::move(out));
  }
  if (name == "string") return Value::String(ToJson(operand, JsonOptions{}, 0, false));
  if (name == "unique") {
    ValueList out;
    for (const Value& v : items) {
      if (std::none_of(out.begin(), out.end(), [&](const Value& seen) { return StrictEquals(seen, v); })) out.push_back(v);
    }
    return Value::Array(std::move(out));
  }
  ThrowError(fmt::format("Unknown ArrayValue filter: {}", name));
}

Value StringFilter(const Value& operand, const std::string& name) {
  const std::string& s = operand.str();
  if (name == "length") return Value::Integer(static_cast<double>(Utf16Length(s)));
  if (name == "upper") return Value::String(JsToUpper(s));
  if (name == "lower") return Value::String(JsToLower(s));
  if (name == "title") return Value::String(JsTitleCase(s));
  if (name == "capitalize") return Value::String(JsCapitalize(s));
  if (name == "trim") return Value::String(JsTrim(s));
  if (name == "indent") return Value::String(Indent(s, "    ", false, false));
  if (name == "join" || name == "string") return operand;
  if (name == "int") {
    double v = JsParseInt(s);
    return Value::Integer(std::isnan(v) ? 0 : v);
  }
  if (name == "float") {
    double v = JsParseFloat(s);
    return Value::Float(std::isnan(v) ? 0 : v);
  }
  ThrowError(fmt::format("Unknown StringValue filter: {}", name));
}

Value NumberFilter(const Value& operand, const std::string& name) {
  double n = operand.number();
  if (name == "abs") return operand.kind() == ValueKind::kInteger ? Value::Integer(std::fabs(n)) : Value::Float(std::fabs(n));
  if (name == "int") return Value::Integer(std::floor(n));
  if (name == "float") return Value::Float(n);
  if (name == "string") return Value::String(ToStringMethod(operand));
  ThrowError(fmt::format("Unknown NumericValue filter: {}", name));
}

Value BoolFilter(const Value& operand, const std::string& name) {
  bool b = operand.boolean();
  if (name == "bool") return operand;
  if (name == "int") return Value::Integer(b ? 1 : 0);
  if (name == "float") return Value::Float(b ? 1 : 0);
  if (name == "string") return Value::String(b ? "true" : "false");
  ThrowError(fmt::format("Unknown BooleanValue filter: {}", name));
}

Value ToJsonFilter(const Value& operand, const ObjectMap& kwargs) {
  JsonOptions options;
  Value indent = KwargOr(kwargs, "indent", Value::Null());
  if (indent.kind() != ValueKind::kInteger && !indent.is_null()) ThrowError("If set, indent must be a number");
  if (!indent.is_null()) options.indent = indent.number();
  Value ensure_ascii = KwargOr(kwargs, "ensure_ascii", Value::Bool(false));
  if (ensure_ascii.kind() != ValueKind::kBool) ThrowError("If set, ensure_ascii must be a boolean");
  options.ensure_ascii = ensure_ascii.boolean();
  Value sort_keys = KwargOr(kwargs, "sort_keys", Value::Bool(false));
  if (sort_keys.kind() != ValueKind::kBool) ThrowError("If set, sort_keys must be a boolean");
  options.sort_keys = sort_keys.boolean();
  Value separators = KwargOr(kwargs, "separators", Value::Null());
  if (separators.is_array_like()) {
    const ValueList& pair = separators.array();
    if (pair.size() != 2 || !pair[0].is_string() || !pair[1].is_string()) ThrowError("separators must be a tuple of two strings");
    options.separators = std::make_pair(pair[0].str(), pair[1].str());
  } else if (!separators.is_null()) {
    ThrowError("If set, separators must be a tuple of two strings");
  }
  return Value::String(ToJson(operand, options));
}

// Extension (Jinja2's escape/e): HTML-escapes the operand's string form as markupsafe does.
Value Escape(const Value& operand) {
  std::string s = operand.is_string() ? operand.str() : ToStringMethod(operand);
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  return Value::String(std::move(out));
}

// Extension (Jinja2's round): `common` rounds half to even like Python's round(); floor and ceil round down/up.
// Integers stay integers under `common`, as round(int, n) does in Python.
Value Round(const Value& operand, const ValueList& args, const ObjectMap& kwargs) {
  if (!operand.is_number()) ThrowError(fmt::format("Cannot apply filter \"round\" to type: {}", operand.TypeName()));
  Value precision = ArgOr(args, 0, kwargs, "precision", Value::Integer(0));
  Value method = ArgOr(args, 1, kwargs, "method", Value::String("common"));
  if (precision.kind() != ValueKind::kInteger || std::fabs(precision.number()) > 300) ThrowError("round precision must be an integer");
  if (!method.is_string() || (method.str() != "common" && method.str() != "floor" && method.str() != "ceil")) {
    ThrowError("round method must be 'common', 'floor' or 'ceil'");
  }
  double scale = std::pow(10.0, precision.number());
  double x = operand.number() * scale;
  if (method.str() == "common") {
    if (operand.kind() == ValueKind::kInteger) return operand;
    double r = std::nearbyint(x);  // the default rounding mode: half to even
    return Value::Float(r / scale);
  }
  return Value::Float((method.str() == "floor" ? std::floor(x) : std::ceil(x)) / scale);
}

}  // namespace

Value Interpreter::ApplyFilter(const Value& operand, const Node& filter_node, const EnvPtr& env) {
  if (filter_node.kind == NodeKind::kIdentifier) {
    const std::string& name = As<LiteralNode>(filter_node).text;
    // Extensions: bare `default`/`d` (default('')), `round`, `escape`/`e`.
    if (name == "default" || name == "d") return operand.is_undefined() ? Value::String("") : operand;
    if (name == "round") return Round(operand, {}, {});
    if (name == "escape" || name == "e") return Escape(operand);
    if (name == "safe") return operand;
    if (name == "tojson") return Value::String(ToJson(operand, JsonOptions{}));
    if (operand.is_array_like()) return ArrayFilter(operand, name);
    if (operand.is_string()) return StringFilter(operand, name);
    if (operand.is_number()) return NumberFilter(operand, name);
    if (operand.is_object_like()) {
      if (name == "items") return ObjectItems(operand);
      if (name == "length") return Value::Integer(static_cast<double>(operand.object().entries.size()));
      Value builtin = ObjectMember(operand, name);
      if (builtin.is_function()) {
        ValueList no_args;
        return builtin.function()(no_args, env);
      }
      ThrowError(fmt::format("Unknown ObjectValue filter: {}", name));
    }
    if (operand.kind() == ValueKind::kBool) return BoolFilter(operand, name);
    ThrowError(fmt::format("Cannot apply filter \"{}\" to type: {}", name, operand.TypeName()));
  }

  if (filter_node.kind != NodeKind::kCall) ThrowError("Unknown filter");
  const auto& call = As<CallExpressionNode>(filter_node);
  if (call.callee->kind != NodeKind::kIdentifier) ThrowError("Unknown filter");
  std::string name = As<LiteralNode>(*call.callee).text;
  if (name == "d") name = "default";  // extension: Jinja2's alias
  ValueList args;
  ObjectMap kwargs;
  auto evaluate_args = [&] { EvaluateArguments(call.args, env, &args, &kwargs); };

  if (name == "tojson") {
    evaluate_args();
    return ToJsonFilter(operand, kwargs);
  }
  if (name == "join") {
    ValueList items;
    if (operand.is_string()) {
      for (auto& cp : SplitCodePoints(operand.str())) items.push_back(Value::String(cp));
    } else if (operand.is_array_like()) {
      items = operand.array();
    } else {
      ThrowError(fmt::format("Cannot apply filter \"{}\" to type: {}", name, operand.TypeName()));
    }
    evaluate_args();
    Value separator = ArgOr(args, 0, kwargs, "separator", Value::String(""));
    if (!separator.is_string()) ThrowError("separator must be a string");
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) out += (i ? separator.str() : "") + ToJoinString(items[i]);
    return Value::String(std::move(out));
  }
  if (name == "int" || name == "float") {
    evaluate_args();
    bool is_int = name == "int";
    Value fallback = ArgOr(args, 0, kwargs, "default", is_int ? Value::Integer(0) : Value::Float(0));
    if (operand.is_string()) {
      double v = is_int ? JsParseInt(operand.str()) : JsParseFloat(operand.str());
      if (std::isnan(v)) return fallback;
      return is_int ? Value::Integer(v) : Value::Float(v);
    }
    if (operand.is_number()) return operand;
    if (operand.kind() == ValueKind::kBool) {
      return is_int ? Value::Integer(operand.boolean() ? 1 : 0) : Value::Float(operand.boolean() ? 1 : 0);
    }
    ThrowError(fmt::format("Cannot apply filter \"{}\" to type: {}", name, operand.TypeName()));
  }
  if (name == "round") {  // extension
    evaluate_args();
    return Round(operand, args, kwargs);
  }
  if (name == "escape" || name == "e") return Escape(operand);  // extension
  if (name == "default") {
    evaluate_args();
    Value fallback = args.size() > 0 ? args[0] : Value::String("");
    Value boolean = ArgOr(args, 1, kwargs, "boolean", Value::Bool(false));
    if (boolean.kind() != ValueKind::kBool) ThrowError("`default` filter flag must be a boolean");
    if (operand.is_undefined() || (boolean.boolean() && !Truthy(operand))) return fallback;
    return operand;
  }

  if (operand.is_array_like()) {
    const ValueList& items = operand.array();
    if (name == "sort") {
      evaluate_args();
      Value reverse = ArgOr(args, 0, kwargs, "reverse", Value::Bool(false));
      if (reverse.kind() != ValueKind::kBool) ThrowError("reverse must be a boolean");
      Value case_sensitive = ArgOr(args, 1, kwargs, "case_sensitive", Value::Bool(false));
      if (case_sensitive.kind() != ValueKind::kBool) ThrowError("case_sensitive must be a boolean");
      Value attribute = ArgOr(args, 2, kwargs, "attribute", Value::Null());
      if (!attribute.is_string() && attribute.kind() != ValueKind::kInteger && !attribute.is_null()) {
        ThrowError("attribute must be a string, integer, or null");
      }
      auto key = [&](const Value& item) {
        if (attribute.is_null()) return item;
        return GetAttributeValue(item, attribute.is_string() ? attribute.str() : JsNumberToString(attribute.number()));
      };
      ValueList sorted = items;
      std::stable_sort(sorted.begin(), sorted.end(), [&](const Value& a, const Value& b) {
        int r = CompareValues(key(a), key(b), case_sensitive.boolean());
        return (reverse.boolean() ? -r : r) < 0;
      });
      return Value::Array(std::move(sorted));
    }
    if (name == "selectattr" || name == "rejectattr") {
      bool select = name == "selectattr";
      for (const Value& item : items) {
        if (!item.is_attribute_container()) ThrowError(fmt::format("`{}` can only be applied to array of objects", name));
      }
      for (const auto& a : call.args) {
        if (a->kind != NodeKind::kStringLiteral) ThrowError(fmt::format("arguments of `{}` must be strings", name));
      }
      ValueList literal;
      for (const auto& a : call.args) literal.push_back(Evaluate(*a, env));
      if (literal.empty()) ThrowError(fmt::format("`{}` needs the name of an attribute", name));
      const std::string& attr = literal[0].str();
      const Value* other = literal.size() > 2 ? &literal[2] : nullptr;
      ValueList out;
      for (const Value& item : items) {
        const Value* a = item.object().Find(attr);
        bool result = false;
        if (a) {
          if (literal.size() > 1) {
            std::optional<bool> r = RunTest(literal[1].str(), *a, other);
            if (!r) ThrowError(fmt::format("Unknown test: {}", literal[1].str()));
            result = *r;
          } else {
            result = Truthy(*a);
          }
        }
        if (result == select) out.push_back(item);
      }
      return Value::Array(std::move(out));
    }
    if (name == "map") {
      evaluate_args();
      const Value* attr = kwargs.Find("attribute");
      if (!attr) ThrowError("`map` expressions without `attribute` set are not currently supported.");
      if (!attr->is_string()) ThrowError("attribute must be a string");
      const Value* fallback = kwargs.Find("default");
      ValueList out;
      for (const Value& item : items) {
        if (!item.is_attribute_container()) ThrowError("items in map must be an object");
        Value v = GetAttributeValue(item, attr->str());
        out.push_back(v.is_undefined() && fallback ? *fallback : v);
      }
      return Value::Array(std::move(out));
    }
    ThrowError(fmt::format("Unknown ArrayValue filter: {}", name));
  }
  if (operand.is_string()) {
    if (name == "indent") {
      evaluate_args();
      Value width = ArgOr(args, 0, kwargs, "width", Value::Integer(4));
      if (width.kind() != ValueKind::kInteger) ThrowError("width must be a number");
      if (width.number() < 0 || width.number() > 1000) ThrowError(fmt::format("Invalid count value: {}", JsNumberToString(width.number())));
      Value first = ArgOr(args, 1, kwargs, "first", Value::Bool(false));
      Value blank = ArgOr(args, 2, kwargs, "blank", Value::Bool(false));
      std::string indent(static_cast<size_t>(width.number()), ' ');
      return Value::String(Indent(operand.str(), indent, RawTruthy(first), RawTruthy(blank)));
    }
    if (name == "replace") {
      evaluate_args();
      args.push_back(Value::Object(std::make_shared<ObjectMap>(kwargs), ValueKind::kKeywordArgs));
      return StringMember(operand, "replace").function()(args, env);
    }
    ThrowError(fmt::format("Unknown StringValue filter: {}", name));
  }
  if (operand.is_object_like()) {
    Value builtin = ObjectMember(operand, name);
    if (builtin.is_function()) {
      evaluate_args();
      if (!kwargs.entries.empty()) args.push_back(Value::Object(std::make_shared<ObjectMap>(kwargs), ValueKind::kKeywordArgs));
      return builtin.function()(args, env);
    }
    ThrowError(fmt::format("Unknown ObjectValue filter: {}", name));
  }
  ThrowError(fmt::format("Cannot apply filter \"{}\" to type: {}", name, operand.TypeName()));
}

}  // namespace parallm::chat
