// UTF-8 decoding, lossy repair, and utf8proc-based normalization and lowercasing.
#include "tokenizer/unicode.h"

#include <cstdlib>
#include <memory>

#include <utf8proc.h>

namespace parallm::unicode {

char32_t DecodeAt(std::string_view s, size_t& pos) {
  const auto b = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char c = b(pos);
  const size_t n = SequenceLength(c);
  if (n == 1 || pos + n > s.size()) {
    ++pos;
    return c;
  }
  char32_t cp = c & (n == 2 ? 0x1F : n == 3 ? 0x0F : 0x07);
  for (size_t i = 1; i < n; ++i) cp = (cp << 6) | (b(pos + i) & 0x3F);
  pos += n;
  return cp;
}

void AppendUtf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

namespace {

// Length of the valid UTF-8 sequence at s[i], or 0 with `bad` set to the length of the maximal invalid
// subpart (WHATWG: the longest prefix of a valid sequence, at least 1 byte).
size_t ValidSequenceAt(std::string_view s, size_t i, size_t& bad) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  size_t need = 0;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    need = 1;
  } else if (c >= 0xE0 && c <= 0xEF) {
    need = 2;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;  // no surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    need = 3;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    bad = 1;
    return 0;
  }
  for (size_t k = 1; k <= need; ++k) {
    if (i + k >= s.size()) {
      bad = k;
      return 0;
    }
    const unsigned char x = b(i + k);
    const unsigned char l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
    if (x < l || x > h) {
      bad = k;
      return 0;
    }
  }
  return need + 1;
}

}  // namespace

bool IsValidUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    size_t bad = 0;
    const size_t n = ValidSequenceAt(s, i, bad);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string ToValidUtf8(std::string_view s) {
  if (IsValidUtf8(s)) return std::string(s);
  std::string out;
  out.reserve(s.size() + 8);
  for (size_t i = 0; i < s.size();) {
    size_t bad = 0;
    const size_t n = ValidSequenceAt(s, i, bad);
    if (n > 0) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += "\xEF\xBF\xBD";
      i += bad;
    }
  }
  return out;
}

std::string Normalize(std::string_view s, NormalForm form) {
  if (s.empty()) return {};
  int options = UTF8PROC_STABLE;
  switch (form) {
    case NormalForm::kNfc: options |= UTF8PROC_COMPOSE; break;
    case NormalForm::kNfd: options |= UTF8PROC_DECOMPOSE; break;
    case NormalForm::kNfkc: options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    case NormalForm::kNfkd: options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
  }
  // Fast path: pure ASCII is invariant under every form.
  bool ascii = true;
  for (char c : s) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
  if (ascii) return std::string(s);
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                                          static_cast<utf8proc_ssize_t>(s.size()), &out,
                                          static_cast<utf8proc_option_t>(options));
  if (n < 0) return std::string(s);  // only on invalid input, which callers exclude
  std::string result(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
  std::free(out);
  return result;
}

namespace {

bool IsCased(char32_t cp) {
  const utf8proc_property_t* p = utf8proc_get_property(static_cast<utf8proc_int32_t>(cp));
  return p->category == UTF8PROC_CATEGORY_LU || p->category == UTF8PROC_CATEGORY_LL ||
         p->category == UTF8PROC_CATEGORY_LT || utf8proc_toupper(static_cast<utf8proc_int32_t>(cp)) != static_cast<utf8proc_int32_t>(cp) ||
         utf8proc_tolower(static_cast<utf8proc_int32_t>(cp)) != static_cast<utf8proc_int32_t>(cp);
}

bool IsCaseIgnorable(char32_t cp) {
  const utf8proc_property_t* p = utf8proc_get_property(static_cast<utf8proc_int32_t>(cp));
  return p->category == UTF8PROC_CATEGORY_MN || p->category == UTF8PROC_CATEGORY_ME ||
         p->category == UTF8PROC_CATEGORY_CF || p->category == UTF8PROC_CATEGORY_LM ||
         p->category == UTF8PROC_CATEGORY_SK || cp == '\'' || cp == 0x2019 || cp == 0x00B7 || cp == ':' ||
         cp == '.';
}

}  // namespace

std::string ToLower(std::string_view s) {
  std::u32string cps;
  for (size_t i = 0; i < s.size();) cps.push_back(DecodeAt(s, i));
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < cps.size(); ++i) {
    const char32_t cp = cps[i];
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp));
      continue;
    }
    if (cp == 0x0130) {  // LATIN CAPITAL LETTER I WITH DOT ABOVE -> i + COMBINING DOT ABOVE
      out += "i\xCC\x87";
      continue;
    }
    if (cp == 0x03A3) {  // Final_Sigma: preceded by a cased letter and not followed by one
      bool before = false, after = false;
      for (size_t k = i; k-- > 0;) {
        if (IsCaseIgnorable(cps[k])) continue;
        before = IsCased(cps[k]);
        break;
      }
      for (size_t k = i + 1; k < cps.size(); ++k) {
        if (IsCaseIgnorable(cps[k])) continue;
        after = IsCased(cps[k]);
        break;
      }
      AppendUtf8(out, before && !after ? 0x03C2 : 0x03C3);
      continue;
    }
    AppendUtf8(out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp))));
  }
  return out;
}

bool IsWhiteSpace(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
         cp == 0x3000;
}

bool IsJsWhiteSpace(char32_t cp) { return (IsWhiteSpace(cp) && cp != 0x85) || cp == 0xFEFF; }

std::string_view TrimStartJs(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t next = i;
    if (!IsJsWhiteSpace(DecodeAt(s, next))) break;
    i = next;
  }
  return s.substr(i);
}

std::string_view TrimEndJs(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    size_t pos = start;
    if (!IsJsWhiteSpace(DecodeAt(s, pos))) break;
    end = start;
  }
  return s.substr(0, end);
}

size_t CodePointCount(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

}  // namespace parallm::unicode
