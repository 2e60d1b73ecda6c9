// JavaScript string and number semantics on UTF-8 text (see jinja_strings.h for why they are needed).
#include "chat/jinja_strings.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>

namespace parallm::chat {
namespace {

struct CaseRun {
  uint32_t first;
  uint32_t count;
  uint32_t stride;
  int32_t delta;
};
struct CaseSpecial {
  uint32_t cp;
  uint32_t to[3];
};
#include "chat/jinja_unicode_case.inc"

template <size_t R, size_t S>
void MapCase(char32_t cp, const CaseRun (&runs)[R], const CaseSpecial (&specials)[S], std::string* out) {
  for (const CaseSpecial& s : specials) {
    if (s.cp == cp) {
      for (uint32_t to : s.to) {
        if (to != 0) AppendUtf8(out, to);
      }
      return;
    }
  }
  for (const CaseRun& r : runs) {
    if (cp >= r.first && cp < r.first + r.count * r.stride && (cp - r.first) % r.stride == 0) {
      AppendUtf8(out, static_cast<char32_t>(static_cast<int64_t>(cp) + r.delta));
      return;
    }
  }
  AppendUtf8(out, cp);
}

bool ChangesCase(char32_t cp) {
  std::string s;
  AppendUtf8(&s, cp);
  return JsToUpper(s) != s || JsToLower(s) != s;
}

// Unicode Case_Ignorable, the common part: apostrophes, word-internal punctuation, modifier letters, combining
// marks and format characters (enough for the final-sigma rule below).
bool IsCaseIgnorable(char32_t cp) {
  switch (cp) {
    case 0x27: case 0x2e: case 0x3a: case 0x5e: case 0x60: case 0xa8: case 0xad: case 0xaf: case 0xb4:
    case 0xb7: case 0xb8: case 0x2018: case 0x2019: case 0x2024: case 0x2027: case 0xfeff: return true;
    default: break;
  }
  return (cp >= 0x2b0 && cp <= 0x36f) || (cp >= 0x483 && cp <= 0x489) || (cp >= 0x200b && cp <= 0x200f) ||
         (cp >= 0x2060 && cp <= 0x2064);
}

// Greek capital sigma lowercases to the final form at the end of a word (String.prototype.toLowerCase does this):
// after a cased letter and not before one, case-ignorable characters skipped on both sides.
bool IsFinalSigma(std::string_view text, size_t start, size_t end) {
  std::vector<char32_t> before;
  for (size_t i = 0; i < start;) before.push_back(DecodeUtf8(text, &i));
  bool cased_before = false;
  for (size_t k = before.size(); k-- > 0;) {
    if (IsCaseIgnorable(before[k])) continue;
    cased_before = ChangesCase(before[k]);
    break;
  }
  if (!cased_before) return false;
  for (size_t i = end; i < text.size();) {
    char32_t cp = DecodeUtf8(text, &i);
    if (IsCaseIgnorable(cp)) continue;
    return !ChangesCase(cp);
  }
  return true;
}

std::u16string ToUtf16(std::string_view text) {
  std::u16string out;
  for (size_t i = 0; i < text.size();) {
    char32_t cp = DecodeUtf8(text, &i);
    if (cp >= 0x10000) {
      cp -= 0x10000;
      out.push_back(static_cast<char16_t>(0xd800 + (cp >> 10)));
      out.push_back(static_cast<char16_t>(0xdc00 + (cp & 0x3ff)));
    } else {
      out.push_back(static_cast<char16_t>(cp));
    }
  }
  return out;
}

bool IsAsciiWord(unsigned char c) { return std::isalnum(c) || c == '_'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

void AppendHex4(std::string* out, unsigned value) {
  static const char kHex[] = "0123456789abcdef";
  *out += "\\u";
  for (int shift = 12; shift >= 0; shift -= 4) out->push_back(kHex[(value >> shift) & 0xf]);
}

}  // namespace

char32_t DecodeUtf8(std::string_view text, size_t* pos) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  size_t i = *pos;
  unsigned char c = s[i];
  if (c < 0x80) {
    *pos = i + 1;
    return c;
  }
  int len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 0;
  if (len == 0 || c > 0xf4 || i + len > text.size()) {
    *pos = i + 1;
    return 0xfffd;
  }
  char32_t cp = c & (0xff >> (len + 1));
  for (int k = 1; k < len; ++k) {
    if ((s[i + k] & 0xc0) != 0x80) {
      *pos = i + 1;
      return 0xfffd;
    }
    cp = (cp << 6) | (s[i + k] & 0x3f);
  }
  static const char32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
    *pos = i + 1;
    return 0xfffd;
  }
  *pos = i + len;
  return cp;
}

void AppendUtf8(std::string* out, char32_t cp) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xc0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else if (cp < 0x10000) {
    if (cp >= 0xd800 && cp <= 0xdfff) cp = 0xfffd;  // a lone surrogate is written out as U+FFFD
    out->push_back(static_cast<char>(0xe0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else {
    out->push_back(static_cast<char>(0xf0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  }
}

bool IsJsWhitespace(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0d) || cp == 0x20 || cp == 0xa0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) ||
         cp == 0x2028 || cp == 0x2029 || cp == 0x202f || cp == 0x205f || cp == 0x3000 || cp == 0xfeff;
}

size_t JsWhitespaceLength(std::string_view text, size_t pos) {
  if (pos >= text.size()) return 0;
  size_t next = pos;
  char32_t cp = DecodeUtf8(text, &next);
  return IsJsWhitespace(cp) ? next - pos : 0;
}

size_t JsWhitespaceRunBefore(std::string_view text, size_t end) {
  size_t start = end;
  while (start > 0) {
    size_t lead = start - 1;
    while (lead > 0 && (static_cast<unsigned char>(text[lead]) & 0xc0) == 0x80 && start - lead < 4) --lead;
    if (JsWhitespaceLength(text, lead) != start - lead) break;
    start = lead;
  }
  return end - start;
}

std::string JsTrimStart(std::string_view text) {
  size_t i = 0;
  while (size_t n = JsWhitespaceLength(text, i)) i += n;
  return std::string(text.substr(i));
}

std::string JsTrimEnd(std::string_view text) {
  return std::string(text.substr(0, text.size() - JsWhitespaceRunBefore(text, text.size())));
}

std::string JsTrim(std::string_view text) { return JsTrimEnd(JsTrimStart(text)); }

size_t Utf16Length(std::string_view text) {
  size_t n = 0;
  for (size_t i = 0; i < text.size();) n += DecodeUtf8(text, &i) >= 0x10000 ? 2 : 1;
  return n;
}

std::optional<std::string> Utf16At(std::string_view text, long long index) {
  std::u16string units = ToUtf16(text);
  long long n = static_cast<long long>(units.size());
  if (index < 0) index += n;
  if (index < 0 || index >= n) return std::nullopt;
  std::string out;
  AppendUtf8(&out, units[index]);  // surrogate halves become U+FFFD
  return out;
}

std::vector<std::string> SplitCodePoints(std::string_view text) {
  std::vector<std::string> out;
  for (size_t i = 0; i < text.size();) {
    size_t start = i;
    DecodeUtf8(text, &i);
    out.emplace_back(text.substr(start, i - start));
  }
  return out;
}

int CompareUtf16(std::string_view a, std::string_view b) {
  std::u16string ua = ToUtf16(a), ub = ToUtf16(b);
  return ua < ub ? -1 : ua > ub ? 1 : 0;
}

std::string JsToUpper(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    char32_t cp = DecodeUtf8(text, &i);
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp >= 'a' && cp <= 'z' ? cp - 32 : cp));
    } else {
      MapCase(cp, kUpperRuns, kUpperSpecials, &out);
    }
  }
  return out;
}

std::string JsToLower(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    size_t start = i;
    char32_t cp = DecodeUtf8(text, &i);
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp));
    } else if (cp == 0x3a3 && IsFinalSigma(text, start, i)) {
      AppendUtf8(&out, 0x3c2);
    } else {
      MapCase(cp, kLowerRuns, kLowerSpecials, &out);
    }
  }
  return out;
}

std::string JsTitleCase(std::string_view text) {
  std::string out(text);
  for (size_t i = 0; i < out.size(); ++i) {
    auto c = static_cast<unsigned char>(out[i]);
    bool boundary = i == 0 || !IsAsciiWord(static_cast<unsigned char>(out[i - 1]));
    if (boundary && c >= 'a' && c <= 'z') out[i] = static_cast<char>(c - 32);
  }
  return out;
}

std::string JsCapitalize(std::string_view text) {
  if (text.empty()) return "";
  size_t end = 0;
  char32_t cp = DecodeUtf8(text, &end);
  if (cp >= 0x10000) return std::string(text);  // charAt(0) is half a surrogate pair, which has no case
  return JsToUpper(text.substr(0, end)) + std::string(text.substr(end));
}

std::string JsNumberToString(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  if (value == 0) return "0";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), std::fabs(value), std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  size_t e = sci.find('e');
  std::string digits;
  for (size_t i = 0; i < e; ++i) {
    if (sci[i] != '.') digits.push_back(sci[i]);
  }
  int n = std::atoi(sci.c_str() + e + 1) + 1;  // the decimal point sits after `n` digits
  int k = static_cast<int>(digits.size());
  std::string out = value < 0 ? "-" : "";
  if (k <= n && n <= 21) {
    out += digits + std::string(n - k, '0');
  } else if (0 < n && n <= 21) {
    out += digits.substr(0, n) + "." + digits.substr(n);
  } else if (-6 < n && n <= 0) {
    out += "0." + std::string(-n, '0') + digits;
  } else {
    out += digits.substr(0, 1);
    if (k > 1) out += "." + digits.substr(1);
    out += (n - 1 >= 0 ? "e+" : "e-") + std::to_string(std::abs(n - 1));
  }
  return out;
}

std::string JsonNumber(double value) { return std::isfinite(value) ? JsNumberToString(value) : "null"; }

double JsParseInt(std::string_view text) {
  std::string s = JsTrimStart(text);
  size_t i = 0;
  bool negative = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) negative = s[i++] == '-';
  size_t start = i;
  while (i < s.size() && IsDigit(s[i])) ++i;
  if (i == start) return std::numeric_limits<double>::quiet_NaN();
  double v = std::strtod(s.substr(start, i - start).c_str(), nullptr);
  return negative ? -v : v;
}

double JsParseFloat(std::string_view text) {
  std::string s = JsTrimStart(text);
  size_t i = 0;
  bool negative = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) negative = s[i++] == '-';
  if (s.compare(i, 8, "Infinity") == 0) {
    return negative ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  }
  size_t start = i;
  size_t int_digits = 0, frac_digits = 0;
  while (i < s.size() && IsDigit(s[i])) ++i, ++int_digits;
  if (i < s.size() && s[i] == '.') {
    size_t dot = i++;
    while (i < s.size() && IsDigit(s[i])) ++i, ++frac_digits;
    if (int_digits == 0 && frac_digits == 0) i = dot;
  }
  if (int_digits == 0 && frac_digits == 0) return std::numeric_limits<double>::quiet_NaN();
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    size_t j = i + 1;
    if (j < s.size() && (s[j] == '+' || s[j] == '-')) ++j;
    if (j < s.size() && IsDigit(s[j])) {
      while (j < s.size() && IsDigit(s[j])) ++j;
      i = j;
    }
  }
  double v = std::strtod(s.substr(start, i - start).c_str(), nullptr);
  return negative ? -v : v;
}

std::string JsonQuote(std::string_view text, bool ensure_ascii) {
  std::string out = "\"";
  for (size_t i = 0; i < text.size();) {
    size_t start = i;
    char32_t cp = DecodeUtf8(text, &i);
    switch (cp) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      default: break;
    }
    if (cp < 0x20) {
      AppendHex4(&out, cp);
    } else if (ensure_ascii && cp >= 0x7f) {
      if (cp >= 0x10000) {
        AppendHex4(&out, 0xd800 + ((cp - 0x10000) >> 10));
        AppendHex4(&out, 0xdc00 + ((cp - 0x10000) & 0x3ff));
      } else {
        AppendHex4(&out, cp);
      }
    } else if (cp == 0xfffd) {
      AppendUtf8(&out, cp);  // invalid input bytes are written as U+FFFD
    } else {
      out.append(text.substr(start, i - start));
    }
  }
  out += "\"";
  return out;
}

std::string JsReplace(std::string_view text, std::string_view from, std::string_view to,
                      std::optional<double> count) {
  if (count && *count == 0) return std::string(text);
  double remaining = (!count || *count < 0) ? std::numeric_limits<double>::infinity() : *count;
  std::string out;
  if (from.empty()) {
    for (size_t i = 0;;) {
      if (remaining > 0) {
        out.append(to);
        --remaining;
      }
      if (i >= text.size()) break;
      size_t start = i;
      DecodeUtf8(text, &i);
      out.append(text.substr(start, i - start));
    }
    return out;
  }
  size_t pos = 0;
  while (remaining > 0) {
    size_t hit = text.find(from, pos);
    if (hit == std::string_view::npos) break;
    out.append(text.substr(pos, hit - pos));
    out.append(to);
    pos = hit + from.size();
    --remaining;
  }
  out.append(text.substr(pos));
  return out;
}

}  // namespace parallm::chat
