// Regular expressions (the common ECMAScript/Python subset: literals, classes, `.`, groups, `|`, greedy or lazy
// quantifiers, \d \w \s and escapes; ^ and $ only at the ends) translated to one GBNF expression.
#pragma once

#include <string>
#include <string_view>

#include "util/status.h"

namespace parallm::structured {

// The whole pattern is matched (anchored at both ends). `json_string`: the expression matches the *text inside a
// JSON string* whose value matches the pattern: quotes, backslashes and control characters appear escaped.
// Errors name the offending position ("at 7: lookahead is not supported").
Result<std::string> RegexToGbnf(std::string_view pattern, bool json_string = false);

// The GBNF expression for one code point of `cls` (see RegexToGbnf's json_string).
struct CharClass;
std::string CharClassToGbnf(const CharClass& cls, bool json_string);

}  // namespace parallm::structured
