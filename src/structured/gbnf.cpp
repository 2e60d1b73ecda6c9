// GBNF parser: recursive descent over llama.cpp's grammar syntax; repetitions become right-recursive helper
// rules, so the matcher only ever sees sequences, alternatives and rule references.
#include "structured/gbnf.h"

#include <fmt/format.h>

#include "structured/char_class.h"

namespace parallm::structured {
namespace {

bool IsWordChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

class GbnfParser {
 public:
  explicit GbnfParser(std::string_view text) : text_(text) {}

  Result<Grammar> Parse(std::string_view root) {
    SkipSpace();
    while (pos_ < text_.size()) {
      const size_t start = pos_;
      std::string name = Word();
      if (name.empty()) return Fail(start, "expected a rule name");
      SkipSpace();
      if (text_.substr(pos_, 3) != "::=") return Fail(pos_, fmt::format("expected '::=' after '{}'", name));
      pos_ += 3;
      const int32_t rule = grammar_.Rule(name);
      if (grammar_.IsDefined(rule)) return Fail(start, fmt::format("rule '{}' is defined twice", name));
      grammar_.MarkDefined(rule);
      PARALLM_RETURN_IF_ERROR(Alternatives(rule, /*nested=*/false));
      SkipSpace();
    }
    PARALLM_RETURN_IF_ERROR(grammar_.Finalize(std::string(root)));
    return std::move(grammar_);
  }

 private:
  Status Fail(size_t at, const std::string& message) const {
    int line = 1, column = 1;
    for (size_t i = 0; i < at && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    return Err("line {}, column {}: {}", line, column, message);
  }

  void SkipSpace() {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == '#') {
        while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
      } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else {
        break;
      }
    }
  }

  std::string Word() {
    const size_t start = pos_;
    while (pos_ < text_.size() && IsWordChar(text_[pos_])) ++pos_;
    return std::string(text_.substr(start, pos_ - start));
  }

  // Whether the text at pos_ starts a new rule (`name ::=`): a rule body ends there.
  bool AtRuleStart() const {
    size_t p = pos_;
    while (p < text_.size() && IsWordChar(text_[p])) ++p;
    if (p == pos_) return false;
    while (p < text_.size() && (text_[p] == ' ' || text_[p] == '\t' || text_[p] == '\n' || text_[p] == '\r')) ++p;
    return text_.substr(p, 3) == "::=";
  }

  Status Alternatives(int32_t rule, bool nested) {
    while (true) {
      std::vector<GrammarElement> seq;
      PARALLM_RETURN_IF_ERROR(Sequence(&seq, nested));
      grammar_.AddAlternative(rule, std::move(seq));
      SkipSpace();
      if (pos_ < text_.size() && text_[pos_] == '|') {
        ++pos_;
        continue;
      }
      return Status::Ok();
    }
  }

  // One escaped or plain code point inside a literal or class.
  Result<uint32_t> CodePoint() {
    const size_t start = pos_;
    if (pos_ >= text_.size()) return Fail(pos_, "unexpected end of grammar");
    const unsigned char c = static_cast<unsigned char>(text_[pos_]);
    if (c == '\\') {
      if (++pos_ >= text_.size()) return Fail(start, "unfinished escape");
      const char e = text_[pos_++];
      auto hex = [&](int digits) -> Result<uint32_t> {
        uint32_t v = 0;
        for (int i = 0; i < digits; ++i) {
          if (pos_ >= text_.size() || !std::isxdigit(static_cast<unsigned char>(text_[pos_])))
            return Fail(start, fmt::format("'\\{}' needs {} hex digits", e, digits));
          const char h = text_[pos_++];
          v = v * 16 + static_cast<uint32_t>(h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
        }
        if (v > kMaxCodePoint) return Fail(start, "code point out of range");
        return v;
      };
      switch (e) {
        case 'x': return hex(2);
        case 'u': return hex(4);
        case 'U': return hex(8);
        case 't': return uint32_t{'\t'};
        case 'r': return uint32_t{'\r'};
        case 'n': return uint32_t{'\n'};
        case '\\': case '"': case '[': case ']': case '-': case '^': case '/': return static_cast<uint32_t>(e);
        default: return Fail(start, fmt::format("unknown escape '\\{}'", e));
      }
    }
    // Plain UTF-8.
    int len = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
    if (len == 0 || pos_ + static_cast<size_t>(len) > text_.size()) return Fail(start, "invalid UTF-8");
    uint32_t v = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (int i = 1; i < len; ++i) v = (v << 6) | (static_cast<unsigned char>(text_[pos_ + static_cast<size_t>(i)]) & 0x3F);
    pos_ += static_cast<size_t>(len);
    return v;
  }

  // The elements of one atom (a literal may be several bytes).
  Status Atom(std::vector<GrammarElement>* atom) {
    const size_t start = pos_;
    const char c = text_[pos_];
    if (c == '"') {
      ++pos_;
      while (true) {
        if (pos_ >= text_.size()) return Fail(start, "unterminated string literal");
        if (text_[pos_] == '"') {
          ++pos_;
          break;
        }
        PARALLM_ASSIGN_OR_RETURN(uint32_t cp, CodePoint());
        std::string bytes;
        AppendUtf8(cp, &bytes);
        for (char b : bytes) {
          ByteSet s;
          s.set(static_cast<unsigned char>(b));
          atom->push_back(grammar_.Bytes(s));
        }
      }
      return Status::Ok();
    }
    if (c == '[') {
      ++pos_;
      bool negate = false;
      if (pos_ < text_.size() && text_[pos_] == '^') {
        negate = true;
        ++pos_;
      }
      CharClass cls;
      while (true) {
        if (pos_ >= text_.size()) return Fail(start, "unterminated character class");
        if (text_[pos_] == ']') {
          ++pos_;
          break;
        }
        PARALLM_ASSIGN_OR_RETURN(uint32_t lo, CodePoint());
        uint32_t hi = lo;
        if (pos_ + 1 < text_.size() && text_[pos_] == '-' && text_[pos_ + 1] != ']') {
          ++pos_;
          PARALLM_ASSIGN_OR_RETURN(hi, CodePoint());
          if (hi < lo) return Fail(start, "character range is reversed");
        }
        cls.Add(lo, hi);
      }
      AppendCharClass(grammar_, negate ? cls.Negated() : cls, atom);
      return Status::Ok();
    }
    if (c == '.') {
      ++pos_;
      CharClass any;
      any.Add(0, kMaxCodePoint);
      AppendCharClass(grammar_, any, atom);
      return Status::Ok();
    }
    if (c == '(') {
      ++pos_;
      const int32_t rule = grammar_.NewHelperRule("group");
      PARALLM_RETURN_IF_ERROR(Alternatives(rule, /*nested=*/true));
      SkipSpace();
      if (pos_ >= text_.size() || text_[pos_] != ')') return Fail(start, "unclosed '('");
      ++pos_;
      atom->push_back(Grammar::RuleRef(rule));
      return Status::Ok();
    }
    if (IsWordChar(c)) {
      atom->push_back(Grammar::RuleRef(grammar_.Rule(Word())));
      return Status::Ok();
    }
    if (c == '<') return Fail(start, "token references (<...>) are not supported");
    return Fail(start, fmt::format("unexpected '{}'", c));
  }

  Result<int64_t> Number() {
    const size_t start = pos_;
    int64_t v = 0;
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
      v = v * 10 + (text_[pos_++] - '0');
      if (v > 100000) return Fail(start, "repetition count too large (at most 100000)");
    }
    if (pos_ == start) return int64_t{-1};
    return v;
  }

  // The element that stands for `atom` once, for repeating it.
  GrammarElement AsOne(const std::vector<GrammarElement>& atom) {
    if (atom.size() == 1) return atom[0];
    const int32_t rule = grammar_.NewHelperRule("seq");
    grammar_.AddAlternative(rule, atom);
    return Grammar::RuleRef(rule);
  }

  // Appends `x{min,max}` (max < 0: unbounded) to `seq`: min copies, then right-recursive optional tails.
  void Repeat(GrammarElement x, int64_t min, int64_t max, std::vector<GrammarElement>* seq) {
    for (int64_t i = 0; i < min; ++i) seq->push_back(x);
    if (max < 0) {
      const int32_t star = grammar_.NewHelperRule("star");
      grammar_.AddAlternative(star, {x, Grammar::RuleRef(star)});
      grammar_.AddAlternative(star, {});
      seq->push_back(Grammar::RuleRef(star));
      return;
    }
    int32_t tail = -1;  // matches x{0,k}
    for (int64_t k = 1; k <= max - min; ++k) {
      const int32_t opt = grammar_.NewHelperRule("opt");
      std::vector<GrammarElement> alt = {x};
      if (tail >= 0) alt.push_back(Grammar::RuleRef(tail));
      grammar_.AddAlternative(opt, std::move(alt));
      grammar_.AddAlternative(opt, {});
      tail = opt;
    }
    if (tail >= 0) seq->push_back(Grammar::RuleRef(tail));
  }

  Status Sequence(std::vector<GrammarElement>* seq, bool nested) {
    while (true) {
      SkipSpace();
      if (pos_ >= text_.size()) return Status::Ok();
      const char c = text_[pos_];
      if (c == '|' || c == ')') {
        if (c == ')' && !nested) return Fail(pos_, "unmatched ')'");
        return Status::Ok();
      }
      if (!nested && AtRuleStart()) return Status::Ok();
      std::vector<GrammarElement> atom;
      PARALLM_RETURN_IF_ERROR(Atom(&atom));
      // Postfix operators bind to the atom just read.
      while (pos_ < text_.size()) {
        const size_t op_at = pos_;
        const char op = text_[pos_];
        int64_t min = 0, max = -1;
        if (op == '*') {
          ++pos_;
        } else if (op == '+') {
          ++pos_;
          min = 1;
        } else if (op == '?') {
          ++pos_;
          max = 1;
        } else if (op == '{') {
          ++pos_;
          SkipSpace();
          PARALLM_ASSIGN_OR_RETURN(min, Number());
          SkipSpace();
          if (pos_ < text_.size() && text_[pos_] == ',') {
            ++pos_;
            SkipSpace();
            PARALLM_ASSIGN_OR_RETURN(max, Number());
            if (min < 0) min = 0;
          } else {
            if (min < 0) return Fail(op_at, "expected a number in '{...}'");
            max = min;
          }
          SkipSpace();
          if (pos_ >= text_.size() || text_[pos_] != '}') return Fail(op_at, "expected '}'");
          ++pos_;
          if (max >= 0 && max < min) return Fail(op_at, "repetition maximum is below its minimum");
        } else {
          break;
        }
        const GrammarElement x = AsOne(atom);
        atom.clear();
        Repeat(x, min, max, &atom);
      }
      seq->insert(seq->end(), atom.begin(), atom.end());
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
  Grammar grammar_;
};

}  // namespace

Result<Grammar> ParseGbnf(std::string_view text, std::string_view root) { return GbnfParser(text).Parse(root); }

std::string GbnfLiteral(std::string_view s) {
  std::string out = "\"";
  for (char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20 || c == 0x7F) {
      out += fmt::format("\\x{:02X}", c);
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

}  // namespace parallm::structured
