// The Jinja interpreter: renders a parsed template against a JSON context with @huggingface/jinja's runtime
// semantics (scoping, loops, macros, filters, tests), so chat prompts come out byte-for-byte the same.
#pragma once

#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include <boost/json.hpp>

#include "chat/jinja_ast.h"
#include "chat/jinja_value.h"
#include "util/status.h"

namespace parallm::chat {

// A variable scope. Loops and macro calls open a child; `set` writes to the current one; lookups walk up.
class Environment {
 public:
  explicit Environment(EnvPtr parent = nullptr) : parent_(std::move(parent)) {}
  void Set(const std::string& name, Value value) { vars_[name] = std::move(value); }
  bool HasOwn(const std::string& name) const { return vars_.count(name) != 0; }
  // Undefined when no scope up the chain has `name`.
  Value Lookup(const std::string& name) const;

 private:
  EnvPtr parent_;
  std::unordered_map<std::string, Value> vars_;
};

// The wall-clock moment strftime_now() formats, as local broken-down time. Tests pin it for golden outputs.
struct LocalTime {
  int year = 2024, month = 1, day = 1, hour = 0, minute = 0;  // month and day from 1
};

struct RenderOptions {
  std::optional<LocalTime> now;  // unset: the system clock in the local time zone
};

inline constexpr int kMaxCallDepth = 64;           // nested macro calls
inline constexpr size_t kMaxRangeLength = 1 << 20;  // range() results

class Interpreter {
 public:
  Interpreter(const Program& program, RenderOptions options) : program_(program), options_(std::move(options)) {}

  // Renders the whole template; errors carry the line:column of the innermost construct that failed.
  Result<std::string> Render(const boost::json::object& context);

  // --- used by the filter and builtin files ----------------------------------------------------------------------
  Value Evaluate(const Node& node, const EnvPtr& env);
  // Positional values (with *spread expanded) and keyword values, evaluated in that order as Python does.
  void EvaluateArguments(const NodeList& args, const EnvPtr& env, ValueList* positional, ObjectMap* keywords);
  Value ApplyFilter(const Value& operand, const Node& filter, const EnvPtr& env);  // jinja_filters.cpp

 private:
  Value EvaluateInner(const Node& node, const EnvPtr& env);
  std::string EvaluateBlock(const NodeList& statements, const EnvPtr& env);
  Value EvaluateBinary(const BinaryNode& node, const EnvPtr& env);
  Value EvaluateUnary(const UnaryNode& node, const EnvPtr& env);
  Value EvaluateCall(const CallExpressionNode& node, const EnvPtr& env);
  Value EvaluateMember(const MemberNode& node, const EnvPtr& env);
  Value EvaluateSlice(const Value& object, const SliceNode& slice, const EnvPtr& env);
  Value EvaluateSet(const SetNode& node, const EnvPtr& env);
  Value EvaluateFor(const ForNode& node, const EnvPtr& env);
  Value EvaluateMacro(const MacroNode& node, const EnvPtr& env);
  Value EvaluateCallBlock(const CallBlockNode& node, const EnvPtr& env);
  void BindMacroArguments(const std::string& display_name, const NodeList& params, bool uses_kwargs,
                          bool uses_varargs, ValueList args, const EnvPtr& scope);

  const Program& program_;
  RenderOptions options_;
  int call_depth_ = 0;
};

}  // namespace parallm::chat
