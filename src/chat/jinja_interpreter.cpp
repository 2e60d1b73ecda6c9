// The Jinja interpreter: statements, expressions, scoping and macros, following @huggingface/jinja's runtime.ts
// (Interpreter.evaluate and friends) construct by construct; filters live in jinja_filters.cpp.
#include "chat/jinja_interpreter.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "chat/jinja_builtins.h"
#include "chat/jinja_lexer.h"
#include "chat/jinja_strings.h"

namespace parallm::chat {
namespace {

// Loop control travels as exceptions, as in @huggingface/jinja: through if-blocks up to the nearest loop.
struct BreakSignal {};
struct ContinueSignal {};

const std::string& IdentifierName(const Node& node) { return As<LiteralNode>(node).text; }

// Which of the special macro arguments `kwargs` and `varargs` a macro body reads before declaring them
// (findAccessedSpecialMacroArguments): only then does the macro accept extra keyword or positional arguments.
class SpecialArgumentScanner {
 public:
  std::set<std::string> Scan(const NodeList& params, const NodeList& body) {
    for (const auto& p : params) DeclareParameter(*p);
    Visit(body);
    return accessed_;
  }

 private:
  static bool IsSpecial(const std::string& name) { return name == "kwargs" || name == "varargs"; }
  void DeclareName(const std::string& name) {
    if (IsSpecial(name)) declared_.insert(name);
  }
  void DeclareTarget(const Node& target) {
    if (target.kind == NodeKind::kIdentifier) DeclareName(IdentifierName(target));
    if (target.kind == NodeKind::kTupleLiteral) {
      for (const auto& item : As<ListNode>(target).items) DeclareTarget(*item);
    }
  }
  void DeclareParameter(const Node& p) {
    DeclareName(p.kind == NodeKind::kIdentifier ? IdentifierName(p) : As<KeywordArgumentNode>(p).key);
  }
  void VisitDefaults(const NodeList& params) {
    for (const auto& p : params) {
      if (p->kind == NodeKind::kKeywordArgument) Visit(As<KeywordArgumentNode>(*p).value.get());
    }
  }
  void VisitFilter(const Node& filter) {
    if (filter.kind == NodeKind::kCall) Visit(As<CallExpressionNode>(filter).args);
  }
  void Visit(const NodeList& nodes) {
    for (const auto& n : nodes) Visit(n.get());
  }
  void Visit(const Node* node) {
    if (!node) return;
    switch (node->kind) {
      case NodeKind::kFor: {
        const auto& n = As<ForNode>(*node);
        DeclareTarget(*n.loopvar);
        if (n.iterable->kind == NodeKind::kSelect) {
          const auto& select = As<SelectNode>(*n.iterable);
          Visit(select.lhs.get());
          Visit(n.body);
          Visit(n.default_block);
          Visit(select.test.get());
          return;
        }
        Visit(n.iterable.get());
        Visit(n.body);
        Visit(n.default_block);
        return;
      }
      case NodeKind::kSet: {
        const auto& n = As<SetNode>(*node);
        DeclareTarget(*n.assignee);
        Visit(n.value.get());
        Visit(n.body);
        return;
      }
      case NodeKind::kMacro: {
        const auto& n = As<MacroNode>(*node);
        for (const auto& p : n.params) DeclareParameter(*p);
        VisitDefaults(n.params);
        Visit(n.body);
        return;
      }
      case NodeKind::kCallBlock: {
        const auto& n = As<CallBlockNode>(*node);
        Visit(n.call.get());
        for (const auto& p : n.caller_params) DeclareParameter(*p);
        VisitDefaults(n.caller_params);
        Visit(n.body);
        return;
      }
      case NodeKind::kFilterBlock: {
        const auto& n = As<FilterBlockNode>(*node);
        Visit(n.body);
        VisitFilter(*n.filter);
        return;
      }
      case NodeKind::kIdentifier: {
        const std::string& name = IdentifierName(*node);
        if (IsSpecial(name) && !declared_.count(name)) accessed_.insert(name);
        return;
      }
      case NodeKind::kMember: {
        const auto& n = As<MemberNode>(*node);
        Visit(n.object.get());
        if (n.computed) Visit(n.property.get());
        return;
      }
      case NodeKind::kFilter: {
        const auto& n = As<FilterNode>(*node);
        Visit(n.operand.get());
        VisitFilter(*n.filter);
        return;
      }
      case NodeKind::kTest:
        Visit(As<TestNode>(*node).operand.get());
        Visit(As<TestNode>(*node).argument.get());
        return;
      case NodeKind::kSelect: {
        const auto& n = As<SelectNode>(*node);
        Visit(n.test.get());
        Visit(n.lhs.get());
        return;
      }
      case NodeKind::kKeywordArgument: Visit(As<KeywordArgumentNode>(*node).value.get()); return;
      case NodeKind::kIf: {
        const auto& n = As<IfNode>(*node);
        Visit(n.test.get());
        Visit(n.body);
        Visit(n.alternate);
        return;
      }
      case NodeKind::kArrayLiteral:
      case NodeKind::kTupleLiteral: Visit(As<ListNode>(*node).items); return;
      case NodeKind::kObjectLiteral:
        for (const auto& [k, v] : As<ObjectLiteralNode>(*node).entries) {
          Visit(k.get());
          Visit(v.get());
        }
        return;
      case NodeKind::kCall: {
        const auto& n = As<CallExpressionNode>(*node);
        Visit(n.callee.get());
        Visit(n.args);
        return;
      }
      case NodeKind::kBinary: {
        const auto& n = As<BinaryNode>(*node);
        Visit(n.left.get());
        Visit(n.right.get());
        return;
      }
      case NodeKind::kUnary: Visit(As<UnaryNode>(*node).argument.get()); return;
      case NodeKind::kTernary: {
        const auto& n = As<TernaryNode>(*node);
        Visit(n.condition.get());
        Visit(n.true_expr.get());
        Visit(n.false_expr.get());
        return;
      }
      case NodeKind::kSlice: {
        const auto& n = As<SliceNode>(*node);
        Visit(n.start.get());
        Visit(n.stop.get());
        Visit(n.step.get());
        return;
      }
      case NodeKind::kSpread:
      case NodeKind::kKeywordSpread: Visit(As<SpreadNode>(*node).argument.get()); return;
      default: return;
    }
  }

  std::set<std::string> declared_, accessed_;
};

// Python-style slicing as utils.ts slice() does it (including its reading of a negative step).
template <typename T>
std::vector<T> SliceItems(const std::vector<T>& items, std::optional<double> start, std::optional<double> stop,
                          std::optional<double> step_opt) {
  double len = static_cast<double>(items.size());
  double step = step_opt.value_or(1);
  double direction = step > 0 ? 1 : step < 0 ? -1 : 0;
  double s, e;
  if (direction >= 0) {
    s = start.value_or(0);
    s = s < 0 ? std::max(len + s, 0.0) : std::min(s, len);
    e = stop.value_or(len);
    e = e < 0 ? std::max(len + e, 0.0) : std::min(e, len);
  } else {
    s = start.value_or(len - 1);
    s = s < 0 ? std::max(len + s, -1.0) : std::min(s, len - 1);
    e = stop.value_or(-1);
    e = e < -1 ? std::max(len + e, -1.0) : std::min(e, len - 1);
  }
  std::vector<T> out;
  for (double i = s; direction * i < direction * e; i += step) out.push_back(items[static_cast<size_t>(i)]);
  return out;
}

class CallDepthGuard {
 public:
  explicit CallDepthGuard(int* depth) : depth_(depth) {
    if (++*depth_ > kMaxCallDepth) {
      --*depth_;
      ThrowError(fmt::format("macro calls nested deeper than {} (runaway recursion?)", kMaxCallDepth));
    }
  }
  ~CallDepthGuard() { --*depth_; }

 private:
  int* depth_;
};

}  // namespace

Value Environment::Lookup(const std::string& name) const {
  // Every scope starts with its own `namespace`, so the nearest scope's wins unless it was overwritten there.
  if (name == "namespace") {
    auto it = vars_.find(name);
    return it != vars_.end() ? it->second : NamespaceFunction();
  }
  for (const Environment* env = this; env; env = env->parent_.get()) {
    auto it = env->vars_.find(name);
    if (it != env->vars_.end()) return it->second;
  }
  return Value();
}

Result<std::string> Interpreter::Render(const boost::json::object& context) {
  auto global = std::make_shared<Environment>();
  InstallGlobals(global.get(), options_);
  for (const auto& kv : context) {
    std::string key(kv.key());
    if (global->HasOwn(key) || key == "namespace") return Err("chat template context: variable already declared: {}", key);
    global->Set(key, FromJson(kv.value()));
  }
  try {
    return EvaluateBlock(program_.body, global);
  } catch (const JinjaError& e) {
    if (!e.offset) return Err("chat template render error: {}", e.message);
    return Err("chat template render error at {}: {}", DescribePosition(program_.source, *e.offset), e.message);
  } catch (const BreakSignal&) {
    return Err("chat template render error: 'break' outside of a loop");
  } catch (const ContinueSignal&) {
    return Err("chat template render error: 'continue' outside of a loop");
  } catch (const std::exception& e) {  // e.g. std::bad_alloc: no failure may escape as an exception
    return Err("chat template render error: {}", e.what());
  }
}

Value Interpreter::Evaluate(const Node& node, const EnvPtr& env) {
  try {
    return EvaluateInner(node, env);
  } catch (JinjaError& e) {
    if (!e.offset) e.offset = node.offset;
    throw;
  }
}

std::string Interpreter::EvaluateBlock(const NodeList& statements, const EnvPtr& env) {
  std::string out;
  for (const auto& statement : statements) {
    Value v = Evaluate(*statement, env);
    if (!v.is_null() && !v.is_undefined()) out += ToStringMethod(v);
  }
  return out;
}

Value Interpreter::EvaluateInner(const Node& node, const EnvPtr& env) {
  switch (node.kind) {
    case NodeKind::kStringLiteral: return Value::String(As<LiteralNode>(node).text);
    case NodeKind::kIntegerLiteral: return Value::Integer(As<LiteralNode>(node).number);
    case NodeKind::kFloatLiteral: return Value::Float(As<LiteralNode>(node).number);
    case NodeKind::kIdentifier: return env->Lookup(IdentifierName(node));
    case NodeKind::kComment: return Value::Null();
    case NodeKind::kArrayLiteral:
    case NodeKind::kTupleLiteral: {
      ValueList items;
      for (const auto& item : As<ListNode>(node).items) items.push_back(Evaluate(*item, env));
      return Value::Array(std::move(items), node.kind == NodeKind::kArrayLiteral ? ValueKind::kArray : ValueKind::kTuple);
    }
    case NodeKind::kObjectLiteral: {
      Value object = Value::NewObject();
      for (const auto& [key_node, value_node] : As<ObjectLiteralNode>(node).entries) {
        Value key = Evaluate(*key_node, env);
        if (!key.is_string()) ThrowError(fmt::format("Object keys must be strings: got {}", key.TypeName()));
        object.object().Set(key.str(), Evaluate(*value_node, env));
      }
      return object;
    }
    case NodeKind::kCall: return EvaluateCall(As<CallExpressionNode>(node), env);
    case NodeKind::kMember: return EvaluateMember(As<MemberNode>(node), env);
    case NodeKind::kUnary: return EvaluateUnary(As<UnaryNode>(node), env);
    case NodeKind::kBinary: return EvaluateBinary(As<BinaryNode>(node), env);
    case NodeKind::kFilter: {
      const auto& n = As<FilterNode>(node);
      return ApplyFilter(Evaluate(*n.operand, env), *n.filter, env);
    }
    case NodeKind::kFilterBlock: {
      const auto& n = As<FilterBlockNode>(node);
      return ApplyFilter(Value::String(EvaluateBlock(n.body, env)), *n.filter, env);
    }
    case NodeKind::kTest: {
      const auto& n = As<TestNode>(node);
      Value operand = Evaluate(*n.operand, env);
      Value argument = n.argument ? Evaluate(*n.argument, env) : Value();
      std::optional<bool> result = RunTest(n.test, operand, n.argument ? &argument : nullptr);
      if (!result) ThrowError(fmt::format("Unknown test: {}", n.test));
      return Value::Bool(n.negate ? !*result : *result);
    }
    case NodeKind::kSelect: {
      const auto& n = As<SelectNode>(node);
      return Truthy(Evaluate(*n.test, env)) ? Evaluate(*n.lhs, env) : Value();
    }
    case NodeKind::kTernary: {
      const auto& n = As<TernaryNode>(node);
      return Truthy(Evaluate(*n.condition, env)) ? Evaluate(*n.true_expr, env) : Evaluate(*n.false_expr, env);
    }
    case NodeKind::kSet: return EvaluateSet(As<SetNode>(node), env);
    case NodeKind::kIf: {
      const auto& n = As<IfNode>(node);
      return Value::String(EvaluateBlock(Truthy(Evaluate(*n.test, env)) ? n.body : n.alternate, env));
    }
    case NodeKind::kFor: return EvaluateFor(As<ForNode>(node), env);
    case NodeKind::kMacro: return EvaluateMacro(As<MacroNode>(node), env);
    case NodeKind::kCallBlock: return EvaluateCallBlock(As<CallBlockNode>(node), env);
    case NodeKind::kBreak: throw BreakSignal{};
    case NodeKind::kContinue: throw ContinueSignal{};
    default: ThrowError("this construct cannot be evaluated here");
  }
}

Value Interpreter::EvaluateBinary(const BinaryNode& node, const EnvPtr& env) {
  Value left = Evaluate(*node.left, env);
  if (node.op == BinaryOp::kAnd) return Truthy(left) ? Evaluate(*node.right, env) : left;
  if (node.op == BinaryOp::kOr) return Truthy(left) ? left : Evaluate(*node.right, env);
  Value right = Evaluate(*node.right, env);
  BinaryOp op = node.op;
  if (op == BinaryOp::kEq) return Value::Bool(LooseEquals(left, right));
  if (op == BinaryOp::kNe) return Value::Bool(!LooseEquals(left, right));
  bool membership = op == BinaryOp::kIn || op == BinaryOp::kNotIn;
  if (left.is_undefined() || right.is_undefined()) {
    if (right.is_undefined() && membership) return Value::Bool(op == BinaryOp::kNotIn);  // x in undefined: false
    ThrowError(fmt::format("Cannot perform operation {} on undefined values", node.op_text));
  }
  if (left.is_null() || right.is_null()) ThrowError("Cannot perform operation on null values");
  if (op == BinaryOp::kConcat) return Value::String(ToJsString(left) + ToJsString(right));

  auto numeric_like = [](const Value& v) { return v.is_number() || v.kind() == ValueKind::kBool; };
  auto numeric_value = [](const Value& v) { return v.kind() == ValueKind::kBool ? (v.boolean() ? 1.0 : 0.0) : v.number(); };
  if (op == BinaryOp::kPow && numeric_like(left) && numeric_like(right)) {
    double a = numeric_value(left), b = numeric_value(right);
    if (a == 0 && b < 0) ThrowError("0.0 cannot be raised to a negative power");
    double result = std::pow(a, b);
    if (!std::isfinite(result)) ThrowError("Exponentiation result is not a finite real number");
    bool is_float = left.kind() == ValueKind::kFloat || right.kind() == ValueKind::kFloat || b < 0;
    return is_float ? Value::Float(result) : Value::Integer(result);
  }
  if (left.is_number() && right.is_number()) {
    double a = left.number(), b = right.number();
    bool is_float = left.kind() == ValueKind::kFloat || right.kind() == ValueKind::kFloat;
    auto number = [is_float](double r) { return is_float ? Value::Float(r) : Value::Integer(r); };
    switch (op) {
      case BinaryOp::kAdd: return number(a + b);
      case BinaryOp::kSub: return number(a - b);
      case BinaryOp::kMul: return number(a * b);
      case BinaryOp::kDiv: return Value::Float(a / b);
      case BinaryOp::kFloorDiv: return number(std::floor(a / b));
      case BinaryOp::kMod: return number(std::fmod(a, b));  // JavaScript %: the sign follows the dividend
      case BinaryOp::kLt: return Value::Bool(a < b);
      case BinaryOp::kGt: return Value::Bool(a > b);
      case BinaryOp::kGe: return Value::Bool(a >= b);
      case BinaryOp::kLe: return Value::Bool(a <= b);
      default: break;
    }
  } else if (left.is_array_like() && right.is_array_like()) {
    if (op == BinaryOp::kAdd) {
      ValueList items = left.array();
      items.insert(items.end(), right.array().begin(), right.array().end());
      return Value::Array(std::move(items));
    }
  } else if (right.is_array_like() && membership) {
    bool member = std::any_of(right.array().begin(), right.array().end(),
                              [&](const Value& x) { return StrictEquals(x, left); });
    return Value::Bool(op == BinaryOp::kIn ? member : !member);
  }
  if ((left.is_string() || right.is_string()) && op == BinaryOp::kAdd) {
    return Value::String(ToJsString(left) + ToJsString(right));
  }
  if (left.is_string() && right.is_string() && membership) {
    bool found = right.str().find(left.str()) != std::string::npos;
    return Value::Bool(op == BinaryOp::kIn ? found : !found);
  }
  if (left.is_string() && right.is_object_like() && membership) {
    bool found = right.object().Find(left.str()) != nullptr;
    return Value::Bool(op == BinaryOp::kIn ? found : !found);
  }
  ThrowError(fmt::format("Unknown operator \"{}\" between {} and {}", node.op_text, left.TypeName(), right.TypeName()));
}

Value Interpreter::EvaluateUnary(const UnaryNode& node, const EnvPtr& env) {
  Value argument = Evaluate(*node.argument, env);
  if (node.op == "not") return Value::Bool(!Truthy(argument));
  double sign = node.op == "-" ? -1 : 1;
  if (argument.is_number() || argument.kind() == ValueKind::kBool) {
    double v = argument.kind() == ValueKind::kBool ? (argument.boolean() ? 1 : 0) : argument.number();
    return argument.kind() == ValueKind::kFloat ? Value::Float(sign * v) : Value::Integer(sign * v);
  }
  ThrowError(fmt::format("Unknown operator \"{}\" for {}", node.op, argument.TypeName()));
}

void Interpreter::EvaluateArguments(const NodeList& args, const EnvPtr& env, ValueList* positional, ObjectMap* keywords) {
  for (const auto& arg : args) {
    if (arg->kind == NodeKind::kSpread) {
      Value v = Evaluate(*As<SpreadNode>(*arg).argument, env);
      if (!v.is_array_like()) ThrowError(fmt::format("Cannot unpack non-iterable type: {}", v.TypeName()));
      positional->insert(positional->end(), v.array().begin(), v.array().end());
    } else if (arg->kind != NodeKind::kKeywordArgument && arg->kind != NodeKind::kKeywordSpread) {
      positional->push_back(Evaluate(*arg, env));
    }
  }
  auto add = [&](const std::string& key, Value value) {
    if (keywords->Find(key)) ThrowError(fmt::format("Got multiple values for keyword argument '{}'", key));
    keywords->Set(key, std::move(value));
  };
  for (const auto& arg : args) {
    if (arg->kind == NodeKind::kKeywordArgument) {
      const auto& kw = As<KeywordArgumentNode>(*arg);
      add(kw.key, Evaluate(*kw.value, env));
    } else if (arg->kind == NodeKind::kKeywordSpread) {
      Value v = Evaluate(*As<SpreadNode>(*arg).argument, env);
      if (!v.is_object_like()) ThrowError(fmt::format("Argument after ** must be a mapping, not {}", v.TypeName()));
      for (const auto& [k, item] : v.object().entries) add(k, item);
    }
  }
}

Value Interpreter::EvaluateCall(const CallExpressionNode& node, const EnvPtr& env) {
  ValueList args;
  auto kwargs = std::make_shared<ObjectMap>();
  EvaluateArguments(node.args, env, &args, kwargs.get());
  if (!kwargs->entries.empty()) args.push_back(Value::Object(kwargs, ValueKind::kKeywordArgs));
  Value fn = Evaluate(*node.callee, env);
  if (!fn.is_function()) ThrowError(fmt::format("Cannot call something that is not a function: got {}", fn.TypeName()));
  return fn.function()(args, env);
}

Value Interpreter::EvaluateSlice(const Value& object, const SliceNode& slice, const EnvPtr& env) {
  if (!object.is_array_like() && !object.is_string()) ThrowError("Slice object must be an array or string");
  auto bound = [&](const NodePtr& n, const char* what) -> std::optional<double> {
    if (!n) return std::nullopt;
    Value v = Evaluate(*n, env);
    if (v.is_undefined()) return std::nullopt;
    if (v.kind() != ValueKind::kInteger) ThrowError(fmt::format("Slice {} must be numeric or undefined", what));
    return v.number();
  };
  std::optional<double> start = bound(slice.start, "start"), stop = bound(slice.stop, "stop"), step = bound(slice.step, "step");
  if (object.is_array_like()) return Value::Array(SliceItems(object.array(), start, stop, step));
  std::string out;
  for (const auto& cp : SliceItems(SplitCodePoints(object.str()), start, stop, step)) out += cp;
  return Value::String(std::move(out));
}

Value Interpreter::EvaluateMember(const MemberNode& node, const EnvPtr& env) {
  Value object = Evaluate(*node.object, env);
  Value property;
  if (node.computed) {
    if (node.property->kind == NodeKind::kSlice) return EvaluateSlice(object, As<SliceNode>(*node.property), env);
    property = Evaluate(*node.property, env);
  } else if (node.property->kind == NodeKind::kIntegerLiteral) {
    property = Value::Integer(As<LiteralNode>(*node.property).number);
  } else {
    property = Value::String(IdentifierName(*node.property));
  }

  if (object.is_attribute_container()) {
    if (!property.is_string()) ThrowError(fmt::format("Cannot access property with non-string: got {}", property.TypeName()));
    if (const Value* v = object.object().Find(property.str())) return *v;
    return object.is_object_like() ? ObjectMember(object, property.str()) : Value();
  }
  if (object.is_array_like() || object.is_string()) {
    if (property.kind() == ValueKind::kInteger) {
      double index = property.number();
      if (object.is_string()) {
        if (std::fabs(index) > 1e15) return Value();
        std::optional<std::string> ch = Utf16At(object.str(), static_cast<long long>(index));
        return ch ? Value::String(*ch) : Value();
      }
      double n = static_cast<double>(object.array().size());
      if (index < 0) index += n;
      if (index < 0 || index >= n) return Value();
      return object.array()[static_cast<size_t>(index)];
    }
    if (property.is_string()) {
      if (object.is_string()) return StringMember(object, property.str());
      if (property.str() == "length") return Value::Integer(static_cast<double>(object.array().size()));
      return Value();
    }
    ThrowError(fmt::format("Cannot access property with non-string/non-number: got {}", property.TypeName()));
  }
  if (!property.is_string()) ThrowError(fmt::format("Cannot access property with non-string: got {}", property.TypeName()));
  return Value();  // numbers, booleans, none, undefined and functions have no attributes
}

Value Interpreter::EvaluateSet(const SetNode& node, const EnvPtr& env) {
  Value rhs = node.value ? Evaluate(*node.value, env) : Value::String(EvaluateBlock(node.body, env));
  const Node& target = *node.assignee;
  if (target.kind == NodeKind::kIdentifier) {
    env->Set(IdentifierName(target), std::move(rhs));
  } else if (target.kind == NodeKind::kTupleLiteral) {
    const auto& names = As<ListNode>(target).items;
    if (!rhs.is_array_like()) ThrowError(fmt::format("Cannot unpack non-iterable type in set: {}", rhs.TypeName()));
    const ValueList& values = rhs.array();
    if (values.size() != names.size()) {
      ThrowError(fmt::format("Too {} items to unpack in set", names.size() > values.size() ? "few" : "many"));
    }
    for (size_t i = 0; i < names.size(); ++i) {
      if (names[i]->kind != NodeKind::kIdentifier) ThrowError("Cannot unpack to non-identifier in set");
      env->Set(IdentifierName(*names[i]), values[i]);
    }
  } else if (target.kind == NodeKind::kMember) {
    const auto& member = As<MemberNode>(target);
    Value object = Evaluate(*member.object, env);
    if (object.kind() != ValueKind::kNamespace) ThrowError("cannot assign attribute on non-namespace object");
    if (member.property->kind != NodeKind::kIdentifier) ThrowError("Cannot assign to member with non-identifier property");
    object.object().Set(IdentifierName(*member.property), std::move(rhs));
  } else {
    ThrowError("Invalid left-hand side in the 'set' statement");
  }
  return Value::Null();
}

Value Interpreter::EvaluateFor(const ForNode& node, const EnvPtr& env) {
  auto scope = std::make_shared<Environment>(env);
  const Node* test = nullptr;
  Value iterable;
  if (node.iterable->kind == NodeKind::kSelect) {
    const auto& select = As<SelectNode>(*node.iterable);
    iterable = Evaluate(*select.lhs, scope);
    test = select.test.get();
  } else {
    iterable = Evaluate(*node.iterable, scope);
  }
  if (!iterable.is_array_like() && !iterable.is_object_like()) {
    ThrowError(fmt::format("Expected iterable or object type in for loop: got {}", iterable.TypeName()));
  }
  if (iterable.is_object_like()) iterable = ObjectKeys(iterable);

  // Binds the loop variable(s) of one item into a scope.
  auto bind = [&node](const Value& current, Environment* target) {
    if (node.loopvar->kind == NodeKind::kIdentifier) {
      target->Set(IdentifierName(*node.loopvar), current);
      return;
    }
    const auto& names = As<ListNode>(*node.loopvar).items;
    for (size_t j = 0; j < names.size(); ++j) {
      if (names[j]->kind != NodeKind::kIdentifier) ThrowError("Cannot unpack non-identifier type in the loop variable");
      target->Set(IdentifierName(*names[j]), current.array()[j]);
    }
  };
  ValueList items;
  for (const Value& current : iterable.array()) {
    if (node.loopvar->kind == NodeKind::kTupleLiteral) {
      if (current.kind() != ValueKind::kArray) ThrowError(fmt::format("Cannot unpack non-iterable type: {}", current.TypeName()));
      size_t want = As<ListNode>(*node.loopvar).items.size();
      if (want != current.array().size()) {
        ThrowError(fmt::format("Too {} items to unpack", want > current.array().size() ? "few" : "many"));
      }
    }
    if (test) {
      auto loop_scope = std::make_shared<Environment>(scope);
      bind(current, loop_scope.get());
      if (!Truthy(Evaluate(*test, loop_scope))) continue;
    }
    items.push_back(current);
  }

  std::string result;
  bool no_iteration = true;
  const size_t n = items.size();
  for (size_t i = 0; i < n; ++i) {
    Value loop = Value::NewObject();
    ObjectMap& m = loop.object();
    m.Set("index", Value::Integer(static_cast<double>(i + 1)));
    m.Set("index0", Value::Integer(static_cast<double>(i)));
    m.Set("revindex", Value::Integer(static_cast<double>(n - i)));
    m.Set("revindex0", Value::Integer(static_cast<double>(n - i - 1)));
    m.Set("first", Value::Bool(i == 0));
    m.Set("last", Value::Bool(i == n - 1));
    m.Set("length", Value::Integer(static_cast<double>(n)));
    m.Set("previtem", i > 0 ? items[i - 1] : Value());
    m.Set("nextitem", i + 1 < n ? items[i + 1] : Value());
    scope->Set("loop", loop);
    bind(items[i], scope.get());
    try {
      result += EvaluateBlock(node.body, scope);
    } catch (const ContinueSignal&) {
      continue;
    } catch (const BreakSignal&) {
      break;
    }
    no_iteration = false;  // like @huggingface/jinja: a loop whose every pass ended in break/continue renders `else`
  }
  if (no_iteration) result += EvaluateBlock(node.default_block, scope);
  return Value::String(std::move(result));
}

void Interpreter::BindMacroArguments(const std::string& display_name, const NodeList& params, bool uses_kwargs,
                                     bool uses_varargs, ValueList args, const EnvPtr& scope) {
  ObjectMap keywords;
  if (!args.empty() && args.back().kind() == ValueKind::kKeywordArgs) {
    keywords = args.back().object();
    args.pop_back();
  }
  std::vector<std::pair<std::string, const Node*>> pending_defaults;
  for (size_t i = 0; i < params.size(); ++i) {
    const Node& p = *params[i];
    const std::string& name = p.kind == NodeKind::kIdentifier ? IdentifierName(p) : As<KeywordArgumentNode>(p).key;
    std::optional<Value> value;
    if (i < args.size()) value = args[i];
    if (!value) {
      if (const Value* kw = keywords.Find(name)) {
        value = *kw;
        keywords.Erase(name);
      }
    }
    if (!value && p.kind == NodeKind::kKeywordArgument) pending_defaults.emplace_back(name, As<KeywordArgumentNode>(p).value.get());
    scope->Set(name, value ? *value : Value());
  }
  if (uses_kwargs) {
    scope->Set("kwargs", Value::Object(std::make_shared<ObjectMap>(keywords)));
  } else if (!keywords.entries.empty()) {
    ThrowError(fmt::format("macro {} takes no keyword argument '{}'", display_name, keywords.entries.front().first));
  }
  if (uses_varargs) {
    ValueList rest;
    if (args.size() > params.size()) rest.assign(args.begin() + params.size(), args.end());
    scope->Set("varargs", Value::Array(std::move(rest)));
  } else if (args.size() > params.size()) {
    ThrowError(fmt::format("macro {} takes not more than {} argument(s)", display_name, params.size()));
  }
  for (const auto& [name, default_node] : pending_defaults) scope->Set(name, Evaluate(*default_node, scope));
}

Value Interpreter::EvaluateMacro(const MacroNode& node, const EnvPtr& env) {
  std::set<std::string> special = SpecialArgumentScanner().Scan(node.params, node.body);
  bool uses_kwargs = special.count("kwargs") > 0, uses_varargs = special.count("varargs") > 0;
  const MacroNode* macro = &node;
  env->Set(node.name, Value::Function([this, macro, uses_kwargs, uses_varargs](ValueList& args, const EnvPtr& scope) {
             CallDepthGuard guard(&call_depth_);
             auto macro_scope = std::make_shared<Environment>(scope);
             BindMacroArguments("'" + macro->name + "'", macro->params, uses_kwargs, uses_varargs, args, macro_scope);
             return Value::String(EvaluateBlock(macro->body, macro_scope));
           }));
  return Value::Null();
}

Value Interpreter::EvaluateCallBlock(const CallBlockNode& node, const EnvPtr& env) {
  std::set<std::string> special = SpecialArgumentScanner().Scan(node.caller_params, node.body);
  bool uses_kwargs = special.count("kwargs") > 0, uses_varargs = special.count("varargs") > 0;
  const CallBlockNode* block = &node;
  std::weak_ptr<Environment> weak_env = env;  // caller() must not keep its scope alive (no reference cycles)
  Value caller = Value::Function([this, block, weak_env, uses_kwargs, uses_varargs](ValueList& args, const EnvPtr&) {
    EnvPtr outer = weak_env.lock();
    if (!outer) ThrowError("caller() used after its call block ended");
    CallDepthGuard guard(&call_depth_);
    auto block_env = std::make_shared<Environment>(outer);
    BindMacroArguments("None", block->caller_params, uses_kwargs, uses_varargs, args, block_env);
    return Value::String(EvaluateBlock(block->body, block_env));
  });
  ValueList args;
  auto kwargs = std::make_shared<ObjectMap>();
  EvaluateArguments(node.call->args, env, &args, kwargs.get());
  args.push_back(Value::Object(kwargs, ValueKind::kKeywordArgs));
  Value fn = Evaluate(*node.call->callee, env);
  if (!fn.is_function()) ThrowError(fmt::format("Cannot call something that is not a function: got {}", fn.TypeName()));
  auto call_env = std::make_shared<Environment>(env);
  call_env->Set("caller", caller);
  return fn.function()(args, call_env);
}

}  // namespace parallm::chat
