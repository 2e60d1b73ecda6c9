// The Jinja syntax tree: one struct per construct, mirroring @huggingface/jinja's ast.ts so the interpreter can
// follow its runtime.ts case by case. Every node remembers where it starts in the template source.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace parallm::chat {

enum class NodeKind {
  // Statements
  kIf,           // If
  kFor,          // For
  kSet,          // Set
  kMacro,        // Macro
  kCallBlock,    // {% call %}
  kFilterBlock,  // {% filter %}
  kBreak,
  kContinue,
  kComment,
  // Expressions (text between tags is a kStringLiteral, as in @huggingface/jinja)
  kIntegerLiteral,
  kFloatLiteral,
  kStringLiteral,
  kArrayLiteral,
  kTupleLiteral,
  kObjectLiteral,
  kIdentifier,
  kMember,          // a.b, a[b], a[1:2]
  kCall,            // f(x, y=z)
  kBinary,          // a + b, a and b, a in b ...
  kUnary,           // not a, -a
  kFilter,          // a | f, a | f(x)
  kTest,            // a is defined, a is not none
  kSelect,          // `a if c` without else: undefined when c is false
  kTernary,         // a if c else b
  kSlice,           // start:stop:step inside []
  kKeywordArgument, // name=value in calls and parameter lists
  kSpread,          // *args
  kKeywordSpread,   // **kwargs
};

struct Node {
  explicit Node(NodeKind k, uint32_t off) : kind(k), offset(off) {}
  virtual ~Node() = default;
  NodeKind kind;
  uint32_t offset;  // byte offset in the original template source
};
using NodePtr = std::unique_ptr<Node>;
using NodeList = std::vector<NodePtr>;

template <typename T>
const T& As(const Node& node) {
  return static_cast<const T&>(node);
}

struct IfNode : Node {
  IfNode(uint32_t off) : Node(NodeKind::kIf, off) {}
  NodePtr test;
  NodeList body;
  NodeList alternate;  // an elif is a nested IfNode here
};

struct ForNode : Node {
  ForNode(uint32_t off) : Node(NodeKind::kFor, off) {}
  NodePtr loopvar;   // identifier or tuple of identifiers
  NodePtr iterable;  // a SelectNode here filters items (`for x in xs if cond`)
  NodeList body;
  NodeList default_block;  // {% else %}: rendered when no iteration completed
};

struct SetNode : Node {
  SetNode(uint32_t off) : Node(NodeKind::kSet, off) {}
  NodePtr assignee;  // identifier, tuple or member (namespace attribute)
  NodePtr value;     // null for a block set, whose value is the rendered body
  NodeList body;
};

struct MacroNode : Node {
  MacroNode(uint32_t off) : Node(NodeKind::kMacro, off) {}
  std::string name;
  NodeList params;  // identifiers and keyword arguments (defaults)
  NodeList body;
};

struct CallExpressionNode;
struct CallBlockNode : Node {
  CallBlockNode(uint32_t off) : Node(NodeKind::kCallBlock, off) {}
  std::unique_ptr<CallExpressionNode> call;
  NodeList caller_params;
  NodeList body;
};

struct FilterBlockNode : Node {
  FilterBlockNode(uint32_t off) : Node(NodeKind::kFilterBlock, off) {}
  NodePtr filter;  // identifier or call
  NodeList body;
};

struct LiteralNode : Node {  // integer, float and string literals, identifiers, comments
  LiteralNode(NodeKind k, uint32_t off) : Node(k, off) {}
  double number = 0;
  std::string text;
};

struct ListNode : Node {  // array and tuple literals
  ListNode(NodeKind k, uint32_t off) : Node(k, off) {}
  NodeList items;
};

struct ObjectLiteralNode : Node {
  ObjectLiteralNode(uint32_t off) : Node(NodeKind::kObjectLiteral, off) {}
  std::vector<std::pair<NodePtr, NodePtr>> entries;
};

struct MemberNode : Node {
  MemberNode(uint32_t off) : Node(NodeKind::kMember, off) {}
  NodePtr object;
  NodePtr property;  // identifier or integer literal after '.', any expression or slice inside []
  bool computed = false;
};

struct CallExpressionNode : Node {
  CallExpressionNode(uint32_t off) : Node(NodeKind::kCall, off) {}
  NodePtr callee;
  NodeList args;
};

enum class BinaryOp { kAnd, kOr, kEq, kNe, kLt, kGt, kLe, kGe, kIn, kNotIn, kAdd, kSub, kConcat, kMul, kDiv, kFloorDiv, kMod, kPow };

struct BinaryNode : Node {
  BinaryNode(uint32_t off) : Node(NodeKind::kBinary, off) {}
  BinaryOp op;
  std::string op_text;  // as written, for error messages
  NodePtr left, right;
};

struct UnaryNode : Node {
  UnaryNode(uint32_t off) : Node(NodeKind::kUnary, off) {}
  std::string op;  // "not", "-" or "+"
  NodePtr argument;
};

struct FilterNode : Node {
  FilterNode(uint32_t off) : Node(NodeKind::kFilter, off) {}
  NodePtr operand;
  NodePtr filter;  // identifier or call
};

struct TestNode : Node {
  TestNode(uint32_t off) : Node(NodeKind::kTest, off) {}
  NodePtr operand;
  bool negate = false;
  std::string test;
  NodePtr argument;  // parallm extension: `is divisibleby(3)`, `is eq 2` (null when absent)
};

struct SelectNode : Node {
  SelectNode(uint32_t off) : Node(NodeKind::kSelect, off) {}
  NodePtr lhs, test;
};

struct TernaryNode : Node {
  TernaryNode(uint32_t off) : Node(NodeKind::kTernary, off) {}
  NodePtr condition, true_expr, false_expr;
};

struct SliceNode : Node {
  SliceNode(uint32_t off) : Node(NodeKind::kSlice, off) {}
  NodePtr start, stop, step;  // each may be null
};

struct KeywordArgumentNode : Node {
  KeywordArgumentNode(uint32_t off) : Node(NodeKind::kKeywordArgument, off) {}
  std::string key;
  NodePtr value;
};

struct SpreadNode : Node {  // *x and **x
  SpreadNode(NodeKind k, uint32_t off) : Node(k, off) {}
  NodePtr argument;
};

// A parsed template: its statements, and the source they point into (for error positions).
struct Program {
  std::string source;
  NodeList body;
};

}  // namespace parallm::chat
