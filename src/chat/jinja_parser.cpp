// The Jinja parser, a port of @huggingface/jinja's parser.ts (recursive descent, same precedence ladder), with
// bounds checks and positioned messages where the original would throw a TypeError on malformed input.
#include "chat/jinja_parser.h"

#include <set>

#include "chat/jinja_lexer.h"

namespace parallm::chat {
namespace {

struct ParseError {
  uint32_t offset;
  std::string message;
};

class Parser {
 public:
  Parser(const std::string& source, std::vector<Token> tokens) : source_(source), tokens_(std::move(tokens)) {}

  NodeList ParseProgram() {
    NodeList body;
    while (current_ < tokens_.size()) body.push_back(ParseAny());
    return body;
  }

 private:
  // --- token helpers -------------------------------------------------------------------------------------------
  uint32_t Here() const {
    return current_ < tokens_.size() ? tokens_[current_].offset : static_cast<uint32_t>(source_.size());
  }
  std::string Describe(size_t index) const {
    if (index >= tokens_.size()) return "the end of the template";
    const Token& t = tokens_[index];
    if (t.type == TokenType::kIdentifier) return fmt::format("'{}'", t.value);
    if (t.type == TokenType::kStringLiteral || t.type == TokenType::kNumericLiteral ||
        t.type == TokenType::kAdditiveOperator || t.type == TokenType::kMultiplicativeOperator ||
        t.type == TokenType::kComparisonOperator || t.type == TokenType::kUnaryOperator) {
      return fmt::format("{} '{}'", TokenTypeName(t.type), t.value.substr(0, 40));
    }
    return TokenTypeName(t.type);
  }
  [[noreturn]] void Fail(const std::string& message) const { throw ParseError{Here(), message}; }
  [[noreturn]] void FailAt(uint32_t offset, const std::string& message) const { throw ParseError{offset, message}; }

  bool Is(TokenType type) const { return current_ < tokens_.size() && tokens_[current_].type == type; }
  bool IsIdentifier(std::string_view name, size_t ahead = 0) const {
    size_t i = current_ + ahead;
    return i < tokens_.size() && tokens_[i].type == TokenType::kIdentifier && tokens_[i].value == name;
  }
  bool IsStatement(std::initializer_list<std::string_view> names) const {
    if (!Is(TokenType::kOpenStatement) || current_ + 1 >= tokens_.size()) return false;
    const Token& t = tokens_[current_ + 1];
    if (t.type != TokenType::kIdentifier) return false;
    for (std::string_view n : names) {
      if (t.value == n) return true;
    }
    return false;
  }
  const Token& Expect(TokenType type, const char* context) {
    if (!Is(type)) Fail(fmt::format("expected {} {}, found {}", TokenTypeName(type), context, Describe(current_)));
    return tokens_[current_++];
  }
  void ExpectIdentifier(std::string_view name, const char* context) {
    if (!IsIdentifier(name)) Fail(fmt::format("expected '{}' {}, found {}", name, context, Describe(current_)));
    ++current_;
  }
  // Parses statements until one of `names` opens; the end of the template is an error naming the opener.
  void ParseBodyUntil(std::initializer_list<std::string_view> names, NodeList* body, const char* opener,
                      uint32_t opener_offset, const char* closer) {
    while (!IsStatement(names)) {
      if (current_ >= tokens_.size()) {
        Fail(fmt::format("expected {{% {} %}} to close the '{}' at {}, found the end of the template", closer, opener,
                         DescribePosition(source_, opener_offset)));
      }
      body->push_back(ParseAny());
    }
  }

  struct DepthGuard {
    explicit DepthGuard(Parser* p) : parser(p) {
      if (++parser->depth_ > kMaxParseDepth) parser->Fail(fmt::format("nesting deeper than {} levels", kMaxParseDepth));
    }
    ~DepthGuard() { --parser->depth_; }
    Parser* parser;
  };

  // --- statements ----------------------------------------------------------------------------------------------
  NodePtr ParseAny() {
    DepthGuard guard(this);
    const Token& t = tokens_[current_];
    switch (t.type) {
      case TokenType::kComment: {
        auto node = std::make_unique<LiteralNode>(NodeKind::kComment, t.offset);
        node->text = t.value;
        ++current_;
        return node;
      }
      case TokenType::kText: {
        auto node = std::make_unique<LiteralNode>(NodeKind::kStringLiteral, t.offset);
        node->text = t.value;
        ++current_;
        return node;
      }
      case TokenType::kOpenStatement: return ParseStatement();
      case TokenType::kOpenExpression: {
        ++current_;
        NodePtr expr = ParseExpression();
        Expect(TokenType::kCloseExpression, "to close the expression '{{'");
        return expr;
      }
      default: Fail(fmt::format("unexpected {} outside of a tag", Describe(current_)));
    }
  }

  NodePtr ParseStatement() {
    uint32_t start = Here();
    ++current_;  // {%
    if (!Is(TokenType::kIdentifier)) Fail(fmt::format("expected a statement name after '{{%', found {}", Describe(current_)));
    std::string name = tokens_[current_].value;
    ++current_;
    if (name == "set") return ParseSet(start);
    if (name == "if") {
      NodePtr node = ParseIf(start);
      CloseBlock("endif", "if", start);
      return node;
    }
    if (name == "for") {
      NodePtr node = ParseFor(start);
      CloseBlock("endfor", "for", start);
      return node;
    }
    if (name == "macro") {
      NodePtr node = ParseMacro(start);
      CloseBlock("endmacro", "macro", start);
      return node;
    }
    if (name == "call") return ParseCallBlock(start);
    if (name == "filter") return ParseFilterBlock(start);
    if (name == "break" || name == "continue") {
      Expect(TokenType::kCloseStatement, fmt::format("after '{}'", name).c_str());
      return std::make_unique<Node>(name == "break" ? NodeKind::kBreak : NodeKind::kContinue, start);
    }
    static const std::set<std::string> kClosers = {"endif", "endfor", "endmacro", "endset", "endcall",
                                                   "endfilter", "else", "elif"};
    if (kClosers.count(name)) FailAt(start, fmt::format("unexpected {{% {} %}} without a matching opening tag", name));
    FailAt(start, fmt::format("unknown statement '{}'", name));
  }

  void CloseBlock(const char* closer, const char* opener, uint32_t opener_offset) {
    ++current_;  // {% (the body loop stopped on it)
    ExpectIdentifier(closer, fmt::format("to close the '{}' at {}", opener, DescribePosition(source_, opener_offset)).c_str());
    Expect(TokenType::kCloseStatement, fmt::format("after '{}'", closer).c_str());
  }

  NodePtr ParseSet(uint32_t start) {
    auto node = std::make_unique<SetNode>(start);
    node->assignee = ParseExpressionSequence(false);
    if (Is(TokenType::kEquals)) {
      ++current_;
      node->value = ParseExpressionSequence(false);
    } else {
      Expect(TokenType::kCloseStatement, "or '=' in the 'set' statement");
      ParseBodyUntil({"endset"}, &node->body, "set", start, "endset");
      ++current_;
      ExpectIdentifier("endset", "to close the block 'set'");
    }
    Expect(TokenType::kCloseStatement, "to close the 'set' statement");
    return node;
  }

  NodePtr ParseIf(uint32_t start) {
    auto node = std::make_unique<IfNode>(start);
    node->test = ParseExpression();
    Expect(TokenType::kCloseStatement, "after the 'if' condition");
    ParseBodyUntil({"elif", "else", "endif"}, &node->body, "if", start, "endif");
    if (IsStatement({"elif"})) {
      uint32_t elif_start = Here();
      current_ += 2;
      node->alternate.push_back(ParseIf(elif_start));
    } else if (IsStatement({"else"})) {
      current_ += 2;
      Expect(TokenType::kCloseStatement, "after 'else'");
      ParseBodyUntil({"endif"}, &node->alternate, "if", start, "endif");
    }
    return node;
  }

  NodePtr ParseMacro(uint32_t start) {
    auto node = std::make_unique<MacroNode>(start);
    NodePtr name = ParsePrimary();
    if (name->kind != NodeKind::kIdentifier) FailAt(name->offset, "expected a name after 'macro'");
    node->name = As<LiteralNode>(*name).text;
    node->params = ParseArgs(/*parameters=*/true);
    Expect(TokenType::kCloseStatement, "after the macro signature");
    ParseBodyUntil({"endmacro"}, &node->body, "macro", start, "endmacro");
    return node;
  }

  NodePtr ParseFor(uint32_t start) {
    auto node = std::make_unique<ForNode>(start);
    node->loopvar = ParseExpressionSequence(true);
    if (node->loopvar->kind != NodeKind::kIdentifier && node->loopvar->kind != NodeKind::kTupleLiteral) {
      FailAt(node->loopvar->offset, "expected a name or a tuple of names as the loop variable");
    }
    if (!IsIdentifier("in")) Fail(fmt::format("expected 'in' after the loop variable, found {}", Describe(current_)));
    ++current_;
    node->iterable = ParseExpression();
    Expect(TokenType::kCloseStatement, "after the 'for' header");
    ParseBodyUntil({"endfor", "else"}, &node->body, "for", start, "endfor");
    if (IsStatement({"else"})) {
      current_ += 2;
      Expect(TokenType::kCloseStatement, "after 'else'");
      ParseBodyUntil({"endfor"}, &node->default_block, "for", start, "endfor");
    }
    return node;
  }

  NodePtr ParseCallBlock(uint32_t start) {
    auto node = std::make_unique<CallBlockNode>(start);
    if (Is(TokenType::kOpenParen)) node->caller_params = ParseArgs(/*parameters=*/true);
    NodePtr callee = ParsePrimary();
    if (callee->kind != NodeKind::kIdentifier) FailAt(callee->offset, "expected a macro name after 'call'");
    node->call = std::make_unique<CallExpressionNode>(callee->offset);
    node->call->callee = std::move(callee);
    node->call->args = ParseArgs(/*parameters=*/false);
    Expect(TokenType::kCloseStatement, "after the 'call' statement");
    ParseBodyUntil({"endcall"}, &node->body, "call", start, "endcall");
    CloseBlock("endcall", "call", start);
    return node;
  }

  NodePtr ParseFilterBlock(uint32_t start) {
    auto node = std::make_unique<FilterBlockNode>(start);
    NodePtr filter = ParsePrimary();
    if (filter->kind == NodeKind::kIdentifier && Is(TokenType::kOpenParen)) filter = ParseCallExpression(std::move(filter));
    node->filter = std::move(filter);
    Expect(TokenType::kCloseStatement, "after the 'filter' statement");
    ParseBodyUntil({"endfilter"}, &node->body, "filter", start, "endfilter");
    CloseBlock("endfilter", "filter", start);
    return node;
  }

  // --- expressions ---------------------------------------------------------------------------------------------
  NodePtr ParseExpressionSequence(bool primary) {
    uint32_t start = Here();
    NodeList items;
    items.push_back(primary ? ParsePrimary() : ParseExpression());
    bool is_tuple = Is(TokenType::kComma);
    while (is_tuple) {
      ++current_;
      items.push_back(primary ? ParsePrimary() : ParseExpression());
      if (!Is(TokenType::kComma)) break;
    }
    if (!is_tuple) return std::move(items[0]);
    auto tuple = std::make_unique<ListNode>(NodeKind::kTupleLiteral, start);
    tuple->items = std::move(items);
    return tuple;
  }

  NodePtr ParseExpression() {
    DepthGuard guard(this);
    return ParseIfExpression();
  }

  NodePtr ParseIfExpression() {
    NodePtr a = ParseLogicalOr();
    if (!IsIdentifier("if")) return a;
    uint32_t at = Here();
    ++current_;
    NodePtr test = ParseLogicalOr();
    if (IsIdentifier("else")) {
      ++current_;
      auto node = std::make_unique<TernaryNode>(at);
      node->condition = std::move(test);
      node->true_expr = std::move(a);
      DepthGuard guard(this);
      node->false_expr = ParseIfExpression();
      return node;
    }
    auto node = std::make_unique<SelectNode>(at);
    node->lhs = std::move(a);
    node->test = std::move(test);
    return node;
  }

  NodePtr MakeBinary(uint32_t at, BinaryOp op, std::string text, NodePtr left, NodePtr right) {
    auto node = std::make_unique<BinaryNode>(at);
    node->op = op;
    node->op_text = std::move(text);
    node->left = std::move(left);
    node->right = std::move(right);
    return node;
  }

  NodePtr ParseLogicalOr() {
    NodePtr left = ParseLogicalAnd();
    while (IsIdentifier("or")) {
      uint32_t at = Here();
      ++current_;
      left = MakeBinary(at, BinaryOp::kOr, "or", std::move(left), ParseLogicalAnd());
    }
    return left;
  }

  NodePtr ParseLogicalAnd() {
    NodePtr left = ParseLogicalNot();
    while (IsIdentifier("and")) {
      uint32_t at = Here();
      ++current_;
      left = MakeBinary(at, BinaryOp::kAnd, "and", std::move(left), ParseLogicalNot());
    }
    return left;
  }

  NodePtr ParseLogicalNot() {
    NodePtr result;
    while (IsIdentifier("not")) {
      DepthGuard guard(this);
      auto node = std::make_unique<UnaryNode>(Here());
      ++current_;
      node->op = "not";
      node->argument = ParseLogicalNot();
      result = std::move(node);
    }
    return result ? std::move(result) : ParseComparison();
  }

  NodePtr ParseComparison() {
    NodePtr left = ParseAdditive();
    while (true) {
      uint32_t at = Here();
      BinaryOp op;
      std::string text;
      if (IsIdentifier("not") && IsIdentifier("in", 1)) {
        op = BinaryOp::kNotIn;
        text = "not in";
        current_ += 2;
      } else if (IsIdentifier("in")) {
        op = BinaryOp::kIn;
        text = "in";
        ++current_;
      } else if (Is(TokenType::kComparisonOperator)) {
        text = tokens_[current_++].value;
        op = text == "==" ? BinaryOp::kEq : text == "!=" ? BinaryOp::kNe : text == "<" ? BinaryOp::kLt
           : text == ">" ? BinaryOp::kGt : text == "<=" ? BinaryOp::kLe : BinaryOp::kGe;
      } else {
        break;
      }
      left = MakeBinary(at, op, std::move(text), std::move(left), ParseAdditive());
    }
    return left;
  }

  NodePtr ParseAdditive() {
    NodePtr left = ParseMultiplicative();
    while (Is(TokenType::kAdditiveOperator)) {
      uint32_t at = Here();
      std::string text = tokens_[current_++].value;
      BinaryOp op = text == "+" ? BinaryOp::kAdd : text == "-" ? BinaryOp::kSub : BinaryOp::kConcat;
      left = MakeBinary(at, op, std::move(text), std::move(left), ParseMultiplicative());
    }
    return left;
  }

  NodePtr ParseMultiplicative() {
    NodePtr left = ParsePower();
    while (Is(TokenType::kMultiplicativeOperator)) {
      uint32_t at = Here();
      std::string text = tokens_[current_++].value;
      BinaryOp op = text == "*" ? BinaryOp::kMul : text == "/" ? BinaryOp::kDiv : text == "//" ? BinaryOp::kFloorDiv
                  : BinaryOp::kMod;
      left = MakeBinary(at, op, std::move(text), std::move(left), ParsePower());
    }
    return left;
  }

  // `**` is left-associative in Jinja: 2 ** 3 ** 2 == (2 ** 3) ** 2.
  NodePtr ParsePower() {
    NodePtr left = ParseTest();
    while (Is(TokenType::kExponentiationOperator)) {
      uint32_t at = Here();
      ++current_;
      left = MakeBinary(at, BinaryOp::kPow, "**", std::move(left), ParseTest());
    }
    return left;
  }

  NodePtr ParseTest() {
    NodePtr operand = ParseFilter();
    while (IsIdentifier("is")) {
      auto node = std::make_unique<TestNode>(Here());
      ++current_;
      if (IsIdentifier("not")) {
        node->negate = true;
        ++current_;
      }
      NodePtr test = ParsePrimary();
      if (test->kind != NodeKind::kIdentifier) FailAt(test->offset, "expected the name of a test after 'is'");
      node->test = As<LiteralNode>(*test).text;
      // Extension (Jinja2): one argument, in parentheses or bare when it is a literal. @huggingface/jinja
      // rejects both forms, so no template it accepts changes meaning.
      if (Is(TokenType::kOpenParen)) {
        ++current_;
        node->argument = ParseExpression();
        Expect(TokenType::kCloseParen, "after the test's argument");
      } else if (Is(TokenType::kNumericLiteral) || Is(TokenType::kStringLiteral) || Is(TokenType::kOpenSquareBracket) || IsIdentifier("none") ||
                 IsIdentifier("true") || IsIdentifier("false")) {
        node->argument = ParsePrimary();
      }
      node->operand = std::move(operand);
      operand = std::move(node);
    }
    return operand;
  }

  NodePtr ParseFilter() {
    NodePtr operand = ParseUnarySign();
    while (Is(TokenType::kPipe)) {
      auto node = std::make_unique<FilterNode>(Here());
      ++current_;
      NodePtr filter = ParsePrimary();
      if (filter->kind != NodeKind::kIdentifier) FailAt(filter->offset, "expected the name of a filter after '|'");
      if (Is(TokenType::kOpenParen)) filter = ParseCallExpression(std::move(filter));
      node->operand = std::move(operand);
      node->filter = std::move(filter);
      operand = std::move(node);
    }
    return operand;
  }

  NodePtr ParseUnarySign() {
    if (current_ < tokens_.size()) {
      const Token& t = tokens_[current_];
      if ((t.type == TokenType::kUnaryOperator || t.type == TokenType::kAdditiveOperator) &&
          (t.value == "-" || t.value == "+")) {
        DepthGuard guard(this);
        auto node = std::make_unique<UnaryNode>(t.offset);
        node->op = t.value;
        ++current_;
        node->argument = ParseUnarySign();
        return node;
      }
    }
    return ParseCallMember();
  }

  NodePtr ParseCallMember() {
    NodePtr member = ParseMember(ParsePrimary());
    if (Is(TokenType::kOpenParen)) return ParseCallExpression(std::move(member));
    return member;
  }

  NodePtr ParseCallExpression(NodePtr callee) {
    DepthGuard guard(this);
    auto call = std::make_unique<CallExpressionNode>(callee->offset);  // errors point at what is called
    call->callee = std::move(callee);
    call->args = ParseArgs(/*parameters=*/false);
    NodePtr expression = ParseMember(std::move(call));
    if (Is(TokenType::kOpenParen)) expression = ParseCallExpression(std::move(expression));
    return expression;
  }

  NodeList ParseArgs(bool parameters) {
    Expect(TokenType::kOpenParen, parameters ? "to open the parameter list" : "to open the argument list");
    NodeList args;
    std::set<std::string> names;
    bool saw_keyword = false, saw_spread = false;
    while (!Is(TokenType::kCloseParen)) {
      uint32_t at = Here();
      bool keyword_spread = Is(TokenType::kExponentiationOperator);
      bool positional_spread = Is(TokenType::kMultiplicativeOperator) && tokens_[current_].value == "*";
      if (parameters && (keyword_spread || positional_spread)) Fail("argument unpacking is not allowed in parameter declarations");
      if (keyword_spread) {
        ++current_;
        auto node = std::make_unique<SpreadNode>(NodeKind::kKeywordSpread, at);
        node->argument = ParseExpression();
        args.push_back(std::move(node));
        if (Is(TokenType::kComma)) ++current_;
        if (!Is(TokenType::kCloseParen)) Fail("expected ')': `**` must be applied to the final argument");
        break;
      }
      NodePtr argument;
      if (positional_spread) {
        if (saw_spread) Fail("only one `*` argument unpacking is allowed");
        saw_spread = true;
        ++current_;
        auto node = std::make_unique<SpreadNode>(NodeKind::kSpread, at);
        node->argument = ParseExpression();
        argument = std::move(node);
      } else {
        argument = ParseExpression();
        if (Is(TokenType::kEquals)) {
          ++current_;
          if (argument->kind != NodeKind::kIdentifier) {
            FailAt(argument->offset, parameters ? "expected a name for the parameter" : "expected a name for the keyword argument");
          }
          auto kw = std::make_unique<KeywordArgumentNode>(at);
          kw->key = As<LiteralNode>(*argument).text;
          kw->value = ParseExpression();
          argument = std::move(kw);
        }
        if (parameters) {
          if (argument->kind != NodeKind::kIdentifier && argument->kind != NodeKind::kKeywordArgument) {
            FailAt(argument->offset, "expected a name for the parameter");
          }
          std::string name = argument->kind == NodeKind::kIdentifier ? As<LiteralNode>(*argument).text
                                                                     : As<KeywordArgumentNode>(*argument).key;
          if (!names.insert(name).second) FailAt(at, fmt::format("duplicate parameter name '{}'", name));
        }
        if (argument->kind == NodeKind::kKeywordArgument) {
          saw_keyword = true;
        } else if (saw_keyword) {
          FailAt(at, parameters ? "non-default parameter follows a default parameter"
                                : "positional arguments must come before keyword arguments");
        } else if (saw_spread) {
          FailAt(at, "positional arguments must not follow `*` argument unpacking");
        }
      }
      args.push_back(std::move(argument));
      if (Is(TokenType::kComma)) ++current_;
    }
    ++current_;  // )
    return args;
  }

  // Inside []: an index/key, or a slice with up to three colon-separated parts.
  NodePtr ParseSubscript() {
    uint32_t start = Here();
    std::vector<NodePtr> slices;
    bool is_slice = false;
    while (!Is(TokenType::kCloseSquareBracket)) {
      if (Is(TokenType::kColon)) {
        slices.push_back(nullptr);
        ++current_;
        is_slice = true;
      } else {
        slices.push_back(ParseExpression());
        if (Is(TokenType::kColon)) {
          ++current_;
          is_slice = true;
        }
      }
    }
    if (slices.empty()) Fail("expected an index, key or slice inside '[]'");
    if (!is_slice) return std::move(slices[0]);
    if (slices.size() > 3) FailAt(start, "a slice takes at most 3 parts (start:stop:step)");
    auto node = std::make_unique<SliceNode>(start);
    slices.resize(3);
    node->start = std::move(slices[0]);
    node->stop = std::move(slices[1]);
    node->step = std::move(slices[2]);
    return node;
  }

  NodePtr ParseMember(NodePtr object) {
    while (Is(TokenType::kDot) || Is(TokenType::kOpenSquareBracket)) {
      auto node = std::make_unique<MemberNode>(Here());
      node->computed = Is(TokenType::kOpenSquareBracket);
      ++current_;
      if (node->computed) {
        node->property = ParseSubscript();
        Expect(TokenType::kCloseSquareBracket, "to close the subscript");
      } else {
        node->property = ParsePrimary();
        if (node->property->kind != NodeKind::kIdentifier && node->property->kind != NodeKind::kIntegerLiteral) {
          FailAt(node->property->offset, "expected a name or an integer after '.'");
        }
      }
      node->object = std::move(object);
      object = std::move(node);
    }
    return object;
  }

  NodePtr ParsePrimary() {
    if (current_ >= tokens_.size()) Fail("unexpected end of the template inside an expression");
    const Token& t = tokens_[current_++];
    switch (t.type) {
      case TokenType::kNumericLiteral: {
        bool is_float = t.value.find('.') != std::string::npos;
        auto node = std::make_unique<LiteralNode>(is_float ? NodeKind::kFloatLiteral : NodeKind::kIntegerLiteral, t.offset);
        node->number = std::strtod(t.value.c_str(), nullptr);
        return node;
      }
      case TokenType::kStringLiteral: {
        auto node = std::make_unique<LiteralNode>(NodeKind::kStringLiteral, t.offset);
        node->text = t.value;
        while (Is(TokenType::kStringLiteral)) node->text += tokens_[current_++].value;  // 'a' 'b' is 'ab'
        return node;
      }
      case TokenType::kIdentifier: {
        auto node = std::make_unique<LiteralNode>(NodeKind::kIdentifier, t.offset);
        node->text = t.value;
        return node;
      }
      case TokenType::kOpenParen: {
        DepthGuard guard(this);
        NodePtr expression = ParseExpressionSequence(false);
        Expect(TokenType::kCloseParen, "to close the parenthesis");
        return expression;
      }
      case TokenType::kOpenSquareBracket: {
        DepthGuard guard(this);
        auto node = std::make_unique<ListNode>(NodeKind::kArrayLiteral, t.offset);
        while (!Is(TokenType::kCloseSquareBracket)) {
          node->items.push_back(ParseExpression());
          if (Is(TokenType::kComma)) ++current_;
        }
        ++current_;
        return node;
      }
      case TokenType::kOpenCurlyBracket: {
        DepthGuard guard(this);
        auto node = std::make_unique<ObjectLiteralNode>(t.offset);
        while (!Is(TokenType::kCloseCurlyBracket)) {
          NodePtr key = ParseExpression();
          Expect(TokenType::kColon, "between key and value in the object literal");
          NodePtr value = ParseExpression();
          node->entries.emplace_back(std::move(key), std::move(value));
          if (Is(TokenType::kComma)) ++current_;
        }
        ++current_;
        return node;
      }
      default:
        --current_;
        Fail(fmt::format("unexpected {} in an expression", Describe(current_)));
    }
  }

  const std::string& source_;
  std::vector<Token> tokens_;
  size_t current_ = 0;
  int depth_ = 0;
};

}  // namespace

Result<std::shared_ptr<const Program>> ParseTemplate(std::string source) {
  auto program = std::make_shared<Program>();
  program->source = std::move(source);
  PARALLM_ASSIGN_OR_RETURN(std::vector<Token> tokens, Tokenize(program->source));
  try {
    Parser parser(program->source, std::move(tokens));
    program->body = parser.ParseProgram();
  } catch (const ParseError& e) {
    return Err("chat template syntax error at {}: {}", DescribePosition(program->source, e.offset), e.message);
  } catch (const std::exception& e) {
    return Err("chat template syntax error: {}", e.what());
  }
  return std::shared_ptr<const Program>(std::move(program));
}

}  // namespace parallm::chat
