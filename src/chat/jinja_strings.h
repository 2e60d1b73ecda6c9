// JavaScript string and number semantics on UTF-8 text, so the Jinja interpreter formats, trims, cases and
// measures strings exactly as @huggingface/jinja (a JavaScript library working on UTF-16) does.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace parallm::chat {

// Reads one code point at `*pos` and advances past it; an invalid byte reads as U+FFFD and advances by one.
char32_t DecodeUtf8(std::string_view text, size_t* pos);
void AppendUtf8(std::string* out, char32_t cp);

// JavaScript's WhiteSpace + LineTerminator set: what /\s/, trim(), trimStart() and trimEnd() use.
bool IsJsWhitespace(char32_t cp);
// The length in bytes of the JS whitespace code point starting at `pos`, or 0 when there is none.
size_t JsWhitespaceLength(std::string_view text, size_t pos);
// The length in bytes of the JS whitespace run ending right before `end`.
size_t JsWhitespaceRunBefore(std::string_view text, size_t end);
std::string JsTrim(std::string_view text);
std::string JsTrimStart(std::string_view text);
std::string JsTrimEnd(std::string_view text);

// String length and indexing count UTF-16 code units, as `str.length` and `str.at(i)` do.
size_t Utf16Length(std::string_view text);
// `str.at(index)`: negative counts from the end; a lone surrogate half comes back as U+FFFD.
std::optional<std::string> Utf16At(std::string_view text, long long index);
// `Array.from(str)`: one string per code point.
std::vector<std::string> SplitCodePoints(std::string_view text);
// Compares as JavaScript's `<` does on strings: by UTF-16 code units. Returns <0, 0 or >0.
int CompareUtf16(std::string_view a, std::string_view b);

// Full Unicode case mapping of String.prototype.toUpperCase/toLowerCase (tables generated from Node).
std::string JsToUpper(std::string_view text);
std::string JsToLower(std::string_view text);
// `str.replace(/\b\w/g, c => c.toUpperCase())`: \b and \w are ASCII-only in JavaScript.
std::string JsTitleCase(std::string_view text);
// `str.charAt(0).toUpperCase() + str.slice(1)`: the rest is left as it is.
std::string JsCapitalize(std::string_view text);

// `String(number)`: shortest round-trip digits, exponent form outside [1e-7, 1e21).
std::string JsNumberToString(double value);
// `JSON.stringify(number)`: like String(number), but NaN and the infinities are `null`.
std::string JsonNumber(double value);
// `parseInt(text, 10)` and `parseFloat(text)`: NaN when no number prefix is found.
double JsParseInt(std::string_view text);
double JsParseFloat(std::string_view text);

// `JSON.stringify(string)`, optionally followed by @huggingface/jinja's ensure_ascii pass, which escapes every
// UTF-16 code unit in [0x7f, 0xffff] as \uXXXX (so astral characters become surrogate pairs).
std::string JsonQuote(std::string_view text, bool ensure_ascii);

// Python-style str.replace as @huggingface/jinja implements it: `count` < 0 or absent replaces all; an empty
// `from` matches at every code point boundary.
std::string JsReplace(std::string_view text, std::string_view from, std::string_view to,
                      std::optional<double> count);

}  // namespace parallm::chat
