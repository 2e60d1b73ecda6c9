// Runtime values of the Jinja interpreter, with @huggingface/jinja's types (IntegerValue, ObjectValue, ...) and
// its JavaScript-flavoured semantics: truthiness, `==`, string conversion and JSON serialization.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <boost/json.hpp>

namespace parallm::chat {

// A render or evaluation failure. `offset` (into the template source) is filled in by the innermost node that
// sees the error pass, so helpers can throw without knowing where they are.
struct JinjaError {
  std::string message;
  std::optional<uint32_t> offset;
};
[[noreturn]] void ThrowError(std::string message);

enum class ValueKind {
  kUndefined,
  kNull,
  kBool,
  kInteger,  // a JavaScript number that @huggingface/jinja types as an integer
  kFloat,
  kString,   // UTF-8
  kArray,
  kTuple,    // an array that some checks treat differently (its type name is "TupleValue")
  kObject,   // insertion-ordered string keys
  kKeywordArgs,  // the object of keyword arguments passed as a call's last argument
  kNamespace,    // namespace(): mutable attributes, no methods
  kFunction,
};

class Value;
class Environment;
struct ObjectMap;
using ValueList = std::vector<Value>;
using EnvPtr = std::shared_ptr<Environment>;
// A callable: macros, caller(), built-in functions and methods. `scope` is the caller's environment.
using NativeFunction = std::function<Value(ValueList& args, const EnvPtr& scope)>;

class Value {
 public:
  Value() = default;  // undefined
  static Value Null() { return Value(ValueKind::kNull, std::monostate{}); }
  static Value Bool(bool b) { return Value(ValueKind::kBool, b); }
  static Value Integer(double n) { return Value(ValueKind::kInteger, n); }
  static Value Float(double n) { return Value(ValueKind::kFloat, n); }
  static Value String(std::string s) { return Value(ValueKind::kString, std::move(s)); }
  static Value Array(ValueList items, ValueKind kind = ValueKind::kArray) {
    return Value(kind, std::make_shared<ValueList>(std::move(items)));
  }
  static Value Object(std::shared_ptr<ObjectMap> map, ValueKind kind = ValueKind::kObject) {
    return Value(kind, std::move(map));
  }
  static Value NewObject(ValueKind kind = ValueKind::kObject);
  static Value Function(NativeFunction fn) { return Value(ValueKind::kFunction, std::make_shared<NativeFunction>(std::move(fn))); }

  ValueKind kind() const { return kind_; }
  // @huggingface/jinja's type name ("StringValue", "ArrayValue"...), as its error messages spell it.
  const char* TypeName() const;

  bool is_undefined() const { return kind_ == ValueKind::kUndefined; }
  bool is_null() const { return kind_ == ValueKind::kNull; }
  bool is_string() const { return kind_ == ValueKind::kString; }
  bool is_number() const { return kind_ == ValueKind::kInteger || kind_ == ValueKind::kFloat; }
  bool is_array_like() const { return kind_ == ValueKind::kArray || kind_ == ValueKind::kTuple; }  // instanceof ArrayValue
  bool is_object_like() const { return kind_ == ValueKind::kObject || kind_ == ValueKind::kKeywordArgs; }  // instanceof ObjectValue
  bool is_attribute_container() const { return is_object_like() || kind_ == ValueKind::kNamespace; }
  bool is_function() const { return kind_ == ValueKind::kFunction; }

  bool boolean() const { return std::get<bool>(data_); }
  double number() const { return std::get<double>(data_); }
  const std::string& str() const { return std::get<std::string>(data_); }
  const ValueList& array() const { return *std::get<std::shared_ptr<ValueList>>(data_); }
  ObjectMap& object() const { return *std::get<std::shared_ptr<ObjectMap>>(data_); }
  const NativeFunction& function() const { return *std::get<std::shared_ptr<NativeFunction>>(data_); }
  // Identity of arrays, objects and functions (JavaScript compares those by reference).
  const void* identity() const;

 private:
  using Data = std::variant<std::monostate, bool, double, std::string, std::shared_ptr<ValueList>,
                            std::shared_ptr<ObjectMap>, std::shared_ptr<NativeFunction>>;
  Value(ValueKind kind, Data data) : kind_(kind), data_(std::move(data)) {}
  ValueKind kind_ = ValueKind::kUndefined;
  Data data_;
};

// An insertion-ordered map (a JavaScript Map). Objects here are small, so lookups scan.
struct ObjectMap {
  std::vector<std::pair<std::string, Value>> entries;

  const Value* Find(std::string_view key) const;
  void Set(const std::string& key, Value value);  // replaces in place, or appends
  bool Erase(std::string_view key);
};

// __bool__: empty strings, arrays and objects, zero, none and undefined are false (a namespace is always true).
bool Truthy(const Value& v);
// JavaScript truthiness of the wrapped value (`!!x.value`): every array and object is true.
bool RawTruthy(const Value& v);
// RuntimeValue.toString(): what `{{ x }}` prints. Arrays and objects print as JSON with `undefined` kept.
std::string ToStringMethod(const Value& v);
// `x.value.toString()`: the operand conversion of `~` and string `+` (numbers without ".0", arrays joined by ",").
std::string ToJsString(const Value& v);
// An element of Array.prototype.join: null and undefined become "".
std::string ToJoinString(const Value& v);

// `a.value === b.value` and `a.value == b.value` in JavaScript.
bool StrictEquals(const Value& a, const Value& b);
bool LooseEquals(const Value& a, const Value& b);

// compareRuntimeValues: numbers (and booleans) with numbers, strings with strings (optionally case-folded),
// none with none; anything else throws.
int CompareValues(const Value& a, const Value& b, bool case_sensitive);

struct JsonOptions {
  std::optional<double> indent;  // spaces; 0 or none means single-line
  bool ensure_ascii = false;
  std::optional<std::pair<std::string, std::string>> separators;  // (item, key)
  bool sort_keys = false;
};
// @huggingface/jinja's toJSON: Python json.dumps layout with JavaScript number formatting.
std::string ToJson(const Value& v, const JsonOptions& options, int depth = 0, bool undefined_to_null = true);

// JSON as JavaScript's JSON.parse + @huggingface/jinja's convertToRuntimeValues would see it: integral numbers
// become integers, and object keys that are array indices come first in ascending order.
Value FromJson(const boost::json::value& json);

}  // namespace parallm::chat
