// Regex -> GBNF: a recursive-descent parser that writes the equivalent GBNF expression as it reads.
#include "structured/regex_to_gbnf.h"

#include <fmt/format.h>

#include "structured/char_class.h"
#include "structured/gbnf.h"

namespace parallm::structured {
namespace {

std::string CodePointEscape(uint32_t c) {
  return c <= 0xFFFF ? fmt::format("\\u{:04X}", c) : fmt::format("\\U{:08X}", c);
}

void AddDigits(CharClass* c) { c->Add('0', '9'); }
void AddWord(CharClass* c) {
  c->Add('a', 'z');
  c->Add('A', 'Z');
  c->Add('0', '9');
  c->Add('_');
}
void AddSpace(CharClass* c) {
  for (uint32_t s : {' ', '\t', '\n', '\r', '\f', '\v'}) c->Add(s);
}

class RegexParser {
 public:
  RegexParser(std::string_view p, bool json) : p_(p), json_(json) {}

  Result<std::string> Parse() {
    if (!p_.empty() && p_[0] == '^') ++pos_;
    PARALLM_ASSIGN_OR_RETURN(std::string e, Alternation());
    if (pos_ < p_.size()) return Fail(pos_, p_[pos_] == ')' ? "unmatched ')'" : "unexpected character");
    return e;
  }

 private:
  Status Fail(size_t at, std::string_view what) const { return Err("at {}: {}", at, what); }

  bool AtEnd() {
    // A '$' is an anchor only as the last character.
    if (pos_ + 1 == p_.size() && p_[pos_] == '$') ++pos_;
    return pos_ >= p_.size();
  }

  Result<std::string> Alternation() {
    std::string out;
    while (true) {
      PARALLM_ASSIGN_OR_RETURN(std::string seq, Sequence());
      out += seq.empty() ? "\"\"" : seq;
      if (pos_ < p_.size() && p_[pos_] == '|') {
        ++pos_;
        out += " | ";
        continue;
      }
      return out;
    }
  }

  Result<std::string> Sequence() {
    std::string out;
    while (!AtEnd() && p_[pos_] != '|' && p_[pos_] != ')') {
      PARALLM_ASSIGN_OR_RETURN(std::string atom, Atom());
      PARALLM_ASSIGN_OR_RETURN(std::string quant, Quantifier());
      if (!out.empty()) out += ' ';
      out += quant.empty() ? atom : "(" + atom + ")" + quant;
    }
    return out;
  }

  Result<std::string> Quantifier() {
    if (pos_ >= p_.size()) return std::string();
    const size_t at = pos_;
    std::string q;
    const char c = p_[pos_];
    if (c == '*' || c == '+' || c == '?') {
      q = std::string(1, c);
      ++pos_;
    } else if (c == '{') {
      const size_t close = p_.find('}', pos_);
      if (close == std::string_view::npos) return Fail(at, "unclosed '{'");
      const std::string body(p_.substr(pos_ + 1, close - pos_ - 1));
      if (body.empty() || body.find_first_not_of("0123456789,") != std::string::npos ||
          body.find(',') != body.rfind(','))
        return Fail(at, "bad repetition '{...}'");
      q = "{" + body + "}";
      pos_ = close + 1;
    } else {
      return std::string();
    }
    if (pos_ < p_.size() && (p_[pos_] == '?' || p_[pos_] == '+')) ++pos_;  // lazy/possessive: same language
    if (pos_ < p_.size() && (p_[pos_] == '*' || p_[pos_] == '+' || p_[pos_] == '?' || p_[pos_] == '{'))
      return Fail(pos_, "nested quantifier");
    return q;
  }

  // An escape after '\\' (pos_ at the letter): adds to `cls` and returns true for a class escape; else sets `cp`.
  Result<bool> Escape(CharClass* cls, uint32_t* cp) {
    const size_t at = pos_ - 1;
    if (pos_ >= p_.size()) return Fail(at, "trailing backslash");
    const char e = p_[pos_++];
    switch (e) {
      case 'd': AddDigits(cls); return true;
      case 'w': AddWord(cls); return true;
      case 's': AddSpace(cls); return true;
      case 'D': case 'W': case 'S': {
        CharClass c;
        if (e == 'D') AddDigits(&c);
        if (e == 'W') AddWord(&c);
        if (e == 'S') AddSpace(&c);
        for (const auto& r : c.Negated().ranges) cls->Add(r.first, r.second);
        return true;
      }
      case 'n': *cp = '\n'; return false;
      case 't': *cp = '\t'; return false;
      case 'r': *cp = '\r'; return false;
      case 'f': *cp = '\f'; return false;
      case 'v': *cp = '\v'; return false;
      case '0': *cp = 0; return false;
      case 'x': case 'u': {
        const size_t digits = e == 'x' ? 2 : 4;
        if (pos_ + digits > p_.size()) return Fail(at, "short hex escape");
        uint32_t v = 0;
        for (size_t i = 0; i < digits; ++i) {
          const char h = p_[pos_++];
          if (!std::isxdigit(static_cast<unsigned char>(h))) return Fail(at, "bad hex escape");
          v = v * 16 + static_cast<uint32_t>(h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
        }
        *cp = v;
        return false;
      }
      default:
        if (std::isalnum(static_cast<unsigned char>(e)))
          return Fail(at, fmt::format("'\\{}' is not supported (no backreferences, word boundaries or anchors "
                                      "inside the pattern)",
                                      e));
        *cp = static_cast<unsigned char>(e);
        return false;
    }
  }

  // One UTF-8 code point of the pattern.
  uint32_t Utf8() {
    const unsigned char c = static_cast<unsigned char>(p_[pos_]);
    size_t len = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (pos_ + len > p_.size()) len = 1;
    uint32_t v = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (size_t i = 1; i < len; ++i) v = (v << 6) | (static_cast<unsigned char>(p_[pos_ + i]) & 0x3F);
    pos_ += len;
    return v;
  }

  Result<std::string> Atom() {
    const size_t at = pos_;
    const char c = p_[pos_];
    if (c == '(') {
      ++pos_;
      if (p_.substr(pos_, 2) == "?:") {
        pos_ += 2;
      } else if (p_.substr(pos_, 2) == "?<" && pos_ + 2 < p_.size() && p_[pos_ + 2] != '=' && p_[pos_ + 2] != '!') {
        pos_ = p_.find('>', pos_);
        if (pos_ == std::string_view::npos) return Fail(at, "unclosed group name");
        ++pos_;
      } else if (p_.substr(pos_, 3) == "?P<") {
        pos_ = p_.find('>', pos_);
        if (pos_ == std::string_view::npos) return Fail(at, "unclosed group name");
        ++pos_;
      } else if (pos_ < p_.size() && p_[pos_] == '?') {
        return Fail(at, "lookaround and inline flags are not supported");
      }
      PARALLM_ASSIGN_OR_RETURN(std::string inner, Alternation());
      if (pos_ >= p_.size() || p_[pos_] != ')') return Fail(at, "unclosed '('");
      ++pos_;
      return "(" + inner + ")";
    }
    if (c == '[') return Class();
    if (c == '.') {
      ++pos_;
      CharClass nl;
      nl.Add('\n');
      return CharClassToGbnf(nl.Negated(), json_);
    }
    if (c == '*' || c == '+' || c == '?' || c == '{') return Fail(at, "quantifier without an atom");
    if (c == '^' || c == '$') return Fail(at, "anchors are only supported at the start and end of the pattern");
    CharClass one;
    if (c == '\\') {
      ++pos_;
      uint32_t cp = 0;
      PARALLM_ASSIGN_OR_RETURN(bool is_class, Escape(&one, &cp));
      if (!is_class) one.Add(cp);
    } else {
      one.Add(Utf8());
    }
    return CharClassToGbnf(one, json_);
  }

  Result<std::string> Class() {
    const size_t at = pos_++;
    bool negate = false;
    if (pos_ < p_.size() && p_[pos_] == '^') {
      negate = true;
      ++pos_;
    }
    CharClass cls;
    bool first = true;
    while (true) {
      if (pos_ >= p_.size()) return Fail(at, "unclosed '['");
      if (p_[pos_] == ']' && !first) {
        ++pos_;
        break;
      }
      first = false;
      uint32_t lo = 0;
      if (p_[pos_] == '\\') {
        ++pos_;
        PARALLM_ASSIGN_OR_RETURN(bool is_class, Escape(&cls, &lo));
        if (is_class) continue;
      } else if (p_.substr(pos_, 2) == "[:") {
        return Fail(pos_, "POSIX classes are not supported");
      } else {
        lo = Utf8();
      }
      uint32_t hi = lo;
      if (pos_ + 1 < p_.size() && p_[pos_] == '-' && p_[pos_ + 1] != ']') {
        ++pos_;
        if (p_[pos_] == '\\') {
          ++pos_;
          CharClass ignored;
          PARALLM_ASSIGN_OR_RETURN(bool is_class, Escape(&ignored, &hi));
          if (is_class) return Fail(pos_, "a class escape cannot end a range");
        } else {
          hi = Utf8();
        }
        if (hi < lo) return Fail(at, "character range is reversed");
      }
      cls.Add(lo, hi);
    }
    return CharClassToGbnf(negate ? cls.Negated() : cls, json_);
  }

  std::string_view p_;
  bool json_;
  size_t pos_ = 0;
};

}  // namespace

std::string CharClassToGbnf(const CharClass& input, bool json_string) {
  CharClass cls = input;
  cls.Normalize();
  std::vector<std::string> alternatives;
  if (json_string) {
    // Characters JSON must escape leave the class and come back as their escape sequences.
    CharClass must_escape;
    must_escape.Add(0, 0x1F);
    must_escape.Add('"');
    must_escape.Add('\\');
    for (uint32_t c = 0; c <= 0x5C; ++c) {
      if (!must_escape.Contains(c) || !cls.Contains(c)) continue;
      std::string esc;
      switch (c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\t': esc = "\\t"; break;
        case '\r': esc = "\\r"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        default: esc = fmt::format("\\u{:04x}", c);
      }
      alternatives.push_back(GbnfLiteral(esc));
    }
    cls = cls.Minus(must_escape);
  }
  if (!cls.empty()) {
    std::string out;
    if (cls.ranges.size() == 1 && cls.ranges[0].first == cls.ranges[0].second) {
      std::string utf8;
      AppendUtf8(cls.ranges[0].first, &utf8);
      out = GbnfLiteral(utf8);
    } else {
      out = "[";
      for (const auto& [lo, hi] : cls.ranges) {
        out += CodePointEscape(lo);
        if (hi != lo) out += "-" + CodePointEscape(hi);
      }
      out += "]";
    }
    alternatives.insert(alternatives.begin(), out);
  }
  if (alternatives.empty()) return "[]";  // matches nothing
  if (alternatives.size() == 1) return alternatives[0];
  std::string out = "(";
  for (size_t i = 0; i < alternatives.size(); ++i) out += (i ? " | " : "") + alternatives[i];
  return out + ")";
}

Result<std::string> RegexToGbnf(std::string_view pattern, bool json_string) {
  return RegexParser(pattern, json_string).Parse();
}

}  // namespace parallm::structured
