// The Jinja parser: tokens to a syntax tree with @huggingface/jinja's grammar and operator precedence.
#pragma once

#include <memory>
#include <string>

#include "chat/jinja_ast.h"
#include "util/status.h"

namespace parallm::chat {

// Tokenizes and parses a template. Errors name the construct and its line:column, e.g.
// "chat template syntax error at 3:5: expected {% endfor %} to close the 'for' at 1:1, found the end of the template".
// Nesting deeper than kMaxParseDepth is an error rather than a stack overflow.
Result<std::shared_ptr<const Program>> ParseTemplate(std::string source);

inline constexpr int kMaxParseDepth = 100;

}  // namespace parallm::chat
