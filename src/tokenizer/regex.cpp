// PCRE2 compilation and matching, and the Oniguruma -> PCRE2 pattern translation.
#include "tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "tokenizer/unicode.h"

namespace parallm {

struct Regex::Code {
  pcre2_code* code = nullptr;
  ~Code() { pcre2_code_free(code); }
};

namespace {

// Per-thread matching state: the JIT stack must not be shared between threads.
struct MatchState {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
  MatchState() { pcre2_jit_stack_assign(context, nullptr, stack); }
  ~MatchState() {
    pcre2_match_data_free(data);
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
  }
};

MatchState& ThreadMatchState() {
  thread_local MatchState state;
  return state;
}

constexpr std::string_view kWhiteSpace = "\\t\\n\\x0B\\f\\r\\x20\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";
constexpr std::string_view kWordChars = "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}";

bool IsAsciiLetter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
char OtherCase(char c) { return c >= 'a' && c <= 'z' ? static_cast<char>(c - 32) : static_cast<char>(c + 32); }

// Copies escape `\n` (already consumed; `*i` is past it) to `out`, with the braces of \p{..}, \P{..}, \x{..}.
Status CopyEscape(std::string_view p, char n, size_t* i, std::string* out) {
  out->push_back('\\');
  out->push_back(n);
  if ((n == 'p' || n == 'P' || n == 'x') && *i < p.size() && p[*i] == '{') {
    const size_t close = p.find('}', *i);
    if (close == std::string_view::npos) return Err("unterminated braced escape");
    out->append(p.substr(*i, close + 1 - *i));
    *i = close + 1;
  }
  return Status::Ok();
}

}  // namespace

Result<std::string> OnigurumaToPcre2(std::string_view p) {
  std::string out;
  std::vector<bool> fold_stack;  // per open group: was ASCII folding on outside it
  bool fold = false;
  for (size_t i = 0; i < p.size();) {
    const char c = p[i];
    if (c == '\\') {
      if (i + 1 >= p.size()) return Err("pattern ends with a backslash");
      const char n = p[i + 1];
      i += 2;
      switch (n) {
        case 's': out += "[" + std::string(kWhiteSpace) + "]"; break;
        case 'S': out += "[^" + std::string(kWhiteSpace) + "]"; break;
        case 'd': out += "\\p{Nd}"; break;
        case 'D': out += "\\P{Nd}"; break;
        case 'w': out += "[" + std::string(kWordChars) + "]"; break;
        case 'W': out += "[^" + std::string(kWordChars) + "]"; break;
        case 'h': out += "[0-9A-Fa-f]"; break;
        case 'H': out += "[^0-9A-Fa-f]"; break;
        default:
          PARALLM_RETURN_IF_ERROR(CopyEscape(p, n, &i, &out));
      }
      continue;
    }
    if (c == '[') {
      // A character class; nested classes and && are not supported.
      out.push_back('[');
      ++i;
      if (i < p.size() && p[i] == '^') {
        out.push_back('^');
        ++i;
      }
      bool first = true;
      std::string folded;  // the other case of ASCII letters, added when folding
      while (i < p.size() && (p[i] != ']' || first)) {
        first = false;
        const char d = p[i];
        if (d == '[') return Err("nested character classes are not supported");
        if (d == '\\') {
          if (i + 1 >= p.size()) return Err("pattern ends with a backslash");
          const char n = p[i + 1];
          i += 2;
          switch (n) {
            case 's': out += kWhiteSpace; break;
            case 'd': out += "\\p{Nd}"; break;
            case 'w': out += kWordChars; break;
            case 'h': out += "0-9A-Fa-f"; break;
            case 'S': case 'D': case 'W': case 'H':
              return Err("\\{} inside a character class is not supported", n);
            default:
              PARALLM_RETURN_IF_ERROR(CopyEscape(p, n, &i, &out));
          }
          continue;
        }
        if (fold && IsAsciiLetter(d)) {
          if (i + 2 < p.size() && p[i + 1] == '-' && IsAsciiLetter(p[i + 2])) {
            folded += std::string{OtherCase(d), '-', OtherCase(p[i + 2])};
            out.append(p.substr(i, 3));
            i += 3;
            continue;
          }
          folded.push_back(OtherCase(d));
        }
        out.push_back(d);
        ++i;
      }
      if (i >= p.size()) return Err("unterminated character class");
      out += folded;
      out.push_back(']');
      ++i;
      continue;
    }
    if (c == '(') {
      fold_stack.push_back(fold);
      if (p.substr(i, 4) == "(?i:") {
        fold = true;
        out += "(?:";
        i += 4;
        continue;
      }
      if (p.substr(i, 3) == "(?>") {  // atomic groups: tokenizers.js reads them as plain groups
        out += "(?:";
        i += 3;
        continue;
      }
      out.push_back('(');
      ++i;
      continue;
    }
    if (c == ')') {
      if (!fold_stack.empty()) {
        fold = fold_stack.back();
        fold_stack.pop_back();
      }
      out.push_back(')');
      ++i;
      continue;
    }
    if (c == '.') {
      out += "[^\\n]";
      ++i;
      continue;
    }
    if (c == '{' && i + 1 < p.size() && p[i + 1] == ',') {  // {,n} means {0,n}
      out += "{0";
      ++i;
      continue;
    }
    if (fold && IsAsciiLetter(c)) {
      out += std::string{'[', c, OtherCase(c), ']'};
      ++i;
      continue;
    }
    out.push_back(c);
    ++i;
  }
  return out;
}

Result<Regex> Regex::Compile(const std::string& pattern) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_compile_context* context = pcre2_compile_context_create(nullptr);
  pcre2_set_newline(context, PCRE2_NEWLINE_LF);
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE | PCRE2_NO_UTF_CHECK, &error, &offset,
                                   context);
  pcre2_compile_context_free(context);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    return Err("regex '{}': {} at offset {}", pattern, reinterpret_cast<const char*>(message), offset);
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter when JIT is unavailable
  auto holder = std::make_shared<Code>();
  holder->code = code;
  Regex r;
  r.code_ = std::move(holder);
  r.pattern_ = pattern;
  return r;
}

Result<Regex> Regex::FromOniguruma(std::string_view pattern) {
  auto translated = OnigurumaToPcre2(pattern);
  if (!translated.ok()) return translated.status().WithContext(fmt::format("regex '{}'", pattern));
  return Compile(*translated);
}

Regex Regex::Literal(std::string_view text) {
  Regex r;
  r.literal_ = std::string(text);
  r.pattern_ = r.literal_;
  return r;
}

std::vector<std::pair<size_t, size_t>> Regex::FindAll(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> matches;
  if (code_ == nullptr) {
    if (literal_.empty()) return matches;
    for (size_t pos = text.find(literal_); pos != std::string_view::npos; pos = text.find(literal_, pos)) {
      matches.emplace_back(pos, pos + literal_.size());
      pos += literal_.size();
    }
    return matches;
  }
  MatchState& state = ThreadMatchState();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t start = 0;
  while (start <= text.size()) {
    const int rc = pcre2_match(code_->code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, state.data,
                               state.context);
    if (rc < 0) break;  // PCRE2_ERROR_NOMATCH, or a resource limit (treated as no further matches)
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(state.data);
    const size_t b = ovector[0], e = ovector[1];
    if (e > b) {
      matches.emplace_back(b, e);
      start = e;
    } else {
      if (b >= text.size()) break;
      start = b + unicode::SequenceLength(static_cast<unsigned char>(text[b]));
    }
  }
  return matches;
}

std::string Regex::ReplaceAll(std::string_view text, std::string_view with) const {
  std::string out;
  size_t prev = 0;
  for (const auto& [b, e] : FindAll(text)) {
    out.append(text.substr(prev, b - prev));
    out.append(with);
    prev = e;
  }
  out.append(text.substr(prev));
  return out;
}

}  // namespace parallm
