// GBNF: llama.cpp's grammar format (rules `name ::= ...`, "literals", [classes], [^negated], `.`, groups,
// `|`, `*` `+` `?` `{m}` `{m,}` `{m,n}` `{,n}`, `#` comments; the start rule is `root`), parsed into a Grammar.
#pragma once

#include <string_view>

#include "structured/grammar.h"
#include "util/status.h"

namespace parallm::structured {

// Errors give the line and column ("line 3, column 12: expected '::='").
Result<Grammar> ParseGbnf(std::string_view text, std::string_view root = "root");

// `s` as a GBNF string literal, quotes included (bytes above 0x7F are kept: literals are UTF-8).
std::string GbnfLiteral(std::string_view s);

}  // namespace parallm::structured
