// The Jinja lexer: turns chat-template source into tokens exactly as @huggingface/jinja's tokenize() does,
// including its preprocessing (lstrip_blocks, trim_blocks, `{% generation %}` removal) and whitespace control.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace parallm::chat {

enum class TokenType {
  kText,                // text between tags
  kNumericLiteral,      // 123, 1.5, and -1 when the minus is unary
  kStringLiteral,       // 'text' or "text", escapes resolved
  kIdentifier,          // names and keywords alike: if, for, in, not, true...
  kEquals,              // =
  kOpenParen,           // (
  kCloseParen,          // )
  kOpenStatement,       // {% and {%-
  kCloseStatement,      // %} and -%}
  kOpenExpression,      // {{ and {{-
  kCloseExpression,     // }} and -}}
  kOpenSquareBracket,   // [
  kCloseSquareBracket,  // ]
  kOpenCurlyBracket,    // {
  kCloseCurlyBracket,   // }
  kComma,               // ,
  kDot,                 // .
  kColon,               // :
  kPipe,                // |
  kAdditiveOperator,    // + - ~
  kMultiplicativeOperator,  // * / // %
  kExponentiationOperator,  // **
  kComparisonOperator,  // < > <= >= == !=
  kUnaryOperator,       // - or + before an operand
  kComment,             // {# ... #}
};

const char* TokenTypeName(TokenType type);

struct Token {
  TokenType type;
  std::string value;
  uint32_t offset;  // byte offset of the token's first character in the original template source
};

// Tokenizes with lstrip_blocks and trim_blocks on, as @huggingface/jinja's Template does. Errors carry the
// line:column of the offending character.
Result<std::vector<Token>> Tokenize(std::string_view source);

// "line:column" (both from 1; the column counts code points) of a byte offset into `source`.
std::string DescribePosition(std::string_view source, uint32_t offset);

}  // namespace parallm::chat
