// The Jinja lexer, a line-by-line port of @huggingface/jinja's lexer.ts that also remembers where each token
// came from in the original source (its preprocessing deletes characters, so offsets are carried through).
#include "chat/jinja_lexer.h"

#include <array>
#include <utility>

#include "chat/jinja_strings.h"

namespace parallm::chat {
namespace {

// Text after preprocessing, with the original byte offset of every byte (plus one past the end).
struct MappedText {
  std::string text;
  std::vector<uint32_t> origin;

  void Append(const MappedText& from, size_t begin, size_t end) {
    text.append(from.text, begin, end - begin);
    origin.insert(origin.end(), from.origin.begin() + begin, from.origin.begin() + end);
  }
  void Finish(uint32_t end_offset) { origin.push_back(end_offset); }
};

bool IsLineTerminatorBefore(const std::string& s, size_t i) {
  if (i == 0) return true;
  char c = s[i - 1];
  if (c == '\n' || c == '\r') return true;
  // U+2028 and U+2029 also end a line for a multiline JavaScript regex.
  return i >= 3 && s.compare(i - 3, 2, "\xe2\x80") == 0 && (s[i - 1] == '\xa8' || s[i - 1] == '\xa9');
}

// `template.replace(/^[ \t]*({[#%-])/gm, "$1")`
MappedText LstripBlocks(const MappedText& in) {
  MappedText out;
  const std::string& s = in.text;
  size_t copied = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (!IsLineTerminatorBefore(s, i)) continue;
    size_t j = i;
    while (j < s.size() && (s[j] == ' ' || s[j] == '\t')) ++j;
    if (j > i && j + 1 < s.size() && s[j] == '{' && (s[j + 1] == '#' || s[j + 1] == '%' || s[j + 1] == '-')) {
      out.Append(in, copied, i);
      copied = j;
      i = j + 1;
    }
  }
  out.Append(in, copied, s.size());
  out.Finish(in.origin.back());
  return out;
}

// `template.replace(/([#%-]})\n/g, "$1")`
MappedText TrimBlocks(const MappedText& in) {
  MappedText out;
  const std::string& s = in.text;
  size_t copied = 0;
  for (size_t i = 0; i + 2 < s.size(); ++i) {
    if ((s[i] == '#' || s[i] == '%' || s[i] == '-') && s[i + 1] == '}' && s[i + 2] == '\n') {
      out.Append(in, copied, i + 2);
      copied = i + 3;
      i += 2;
    }
  }
  out.Append(in, copied, s.size());
  out.Finish(in.origin.back());
  return out;
}

// Matches `{%(-?)\s*(?:end)?generation\s*(-?)%}` at `pos`; returns its end (0 when no match) and the dashes.
size_t MatchGenerationTag(const std::string& s, size_t pos, bool* lstrip, bool* rstrip) {
  if (s.compare(pos, 2, "{%") != 0) return 0;
  size_t i = pos + 2;
  *lstrip = i < s.size() && s[i] == '-';
  if (*lstrip) ++i;
  while (size_t n = JsWhitespaceLength(s, i)) i += n;
  if (s.compare(i, 3, "end") == 0 && s.compare(i + 3, 10, "generation") == 0) i += 3;
  if (s.compare(i, 10, "generation") != 0) return 0;
  i += 10;
  while (size_t n = JsWhitespaceLength(s, i)) i += n;
  *rstrip = i < s.size() && s[i] == '-';
  if (*rstrip) ++i;
  if (s.compare(i, 2, "%}") != 0) return 0;
  return i + 2;
}

// transformers' `{% generation %}` markers carry no output: `(\s*){%(-?)\s*(?:end)?generation\s*(-?)%}(\s*)`
// is replaced by the surrounding whitespace that its dashes do not strip.
MappedText RemoveGenerationTags(const MappedText& in) {
  MappedText out;
  const std::string& s = in.text;
  size_t copied = 0;  // also the regex's lastIndex
  for (size_t p = s.find("{%"); p != std::string::npos; p = s.find("{%", p + 1)) {
    bool lstrip = false, rstrip = false;
    size_t tag_end = MatchGenerationTag(s, p, &lstrip, &rstrip);
    if (tag_end == 0) continue;
    size_t before = p - std::min(JsWhitespaceRunBefore(s, p), p - copied);
    size_t after = tag_end;
    while (size_t n = JsWhitespaceLength(s, after)) after += n;
    out.Append(in, copied, before);
    if (!lstrip) out.Append(in, before, p);
    if (!rstrip) out.Append(in, tag_end, after);
    copied = after;
    p = after == 0 ? 0 : after - 1;
  }
  out.Append(in, copied, s.size());
  out.Finish(in.origin.back());
  return out;
}

MappedText Preprocess(std::string_view source) {
  MappedText text;
  text.text = std::string(source);
  text.origin.resize(source.size() + 1);
  for (size_t i = 0; i <= source.size(); ++i) text.origin[i] = static_cast<uint32_t>(i);
  if (!text.text.empty() && text.text.back() == '\n') {  // a single trailing newline is dropped
    text.text.pop_back();
    text.origin.erase(text.origin.end() - 2);
  }
  return RemoveGenerationTags(TrimBlocks(LstripBlocks(text)));
}

bool IsWordByte(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}
bool IsDigitByte(char c) { return c >= '0' && c <= '9'; }
int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

const std::array<std::pair<std::string_view, TokenType>, 29> kMappingTable = {{
    {"{%", TokenType::kOpenStatement},        {"%}", TokenType::kCloseStatement},
    {"{{", TokenType::kOpenExpression},       {"}}", TokenType::kCloseExpression},
    {"(", TokenType::kOpenParen},             {")", TokenType::kCloseParen},
    {"{", TokenType::kOpenCurlyBracket},      {"}", TokenType::kCloseCurlyBracket},
    {"[", TokenType::kOpenSquareBracket},     {"]", TokenType::kCloseSquareBracket},
    {",", TokenType::kComma},                 {".", TokenType::kDot},
    {":", TokenType::kColon},                 {"|", TokenType::kPipe},
    {"<=", TokenType::kComparisonOperator},   {">=", TokenType::kComparisonOperator},
    {"==", TokenType::kComparisonOperator},   {"!=", TokenType::kComparisonOperator},
    {"<", TokenType::kComparisonOperator},    {">", TokenType::kComparisonOperator},
    {"+", TokenType::kAdditiveOperator},      {"-", TokenType::kAdditiveOperator},
    {"~", TokenType::kAdditiveOperator},      {"**", TokenType::kExponentiationOperator},
    {"*", TokenType::kMultiplicativeOperator}, {"//", TokenType::kMultiplicativeOperator},
    {"/", TokenType::kMultiplicativeOperator}, {"%", TokenType::kMultiplicativeOperator},
    {"=", TokenType::kEquals},
}};

class Lexer {
 public:
  Lexer(std::string_view source, MappedText text) : source_(source), mapped_(std::move(text)), src_(mapped_.text) {}

  Result<std::vector<Token>> Run() {
    Status st = Loop();
    if (!st.ok()) return st;
    return std::move(tokens_);
  }

 private:
  Status Fail(size_t pos, const std::string& what) {
    uint32_t offset = mapped_.origin[std::min(pos, src_.size())];
    return Err("chat template syntax error at {}: {}", DescribePosition(source_, offset), what);
  }
  void Push(TokenType type, std::string value, size_t pos) {
    tokens_.push_back(Token{type, std::move(value), mapped_.origin[pos]});
  }
  bool LastIs(TokenType t) const { return !tokens_.empty() && tokens_.back().type == t; }

  void StripTrailingWhitespace() {
    if (tokens_.empty() || tokens_.back().type != TokenType::kText) return;
    tokens_.back().value = JsTrimEnd(tokens_.back().value);
    if (tokens_.back().value.empty()) tokens_.pop_back();
  }
  void SkipLeadingWhitespace() {
    while (size_t n = JsWhitespaceLength(src_, pos_)) pos_ += n;
  }
  bool At(std::string_view s) const { return pos_ <= src_.size() && src_.compare(pos_, s.size(), s) == 0; }

  // consumeWhile() for digits and word characters: running into the end of the input is an error there.
  Status ConsumeBytes(bool (*pred)(char), std::string* out) {
    while (pos_ < src_.size() && pred(src_[pos_])) {
      out->push_back(src_[pos_++]);
      if (pos_ >= src_.size()) return Fail(pos_, "unexpected end of input");
    }
    return Status::Ok();
  }

  Status ConsumeString(char quote, std::string* out) {
    size_t start = pos_;
    char16_t pending_high = 0;  // a \uD8xx waiting for its low half
    auto flush_high = [&] {
      if (pending_high) AppendUtf8(out, 0xfffd);
      pending_high = 0;
    };
    while (true) {
      if (pos_ >= src_.size()) return Fail(start - 1, "unterminated string literal");
      char c = src_[pos_];
      if (c == quote) break;
      if (c != '\\') {
        flush_high();
        out->push_back(c);
        ++pos_;
        continue;
      }
      ++pos_;
      if (pos_ >= src_.size()) return Fail(pos_, "unexpected end of input after '\\'");
      char escaped = src_[pos_++];
      if (escaped == 'x' || escaped == 'u') {
        size_t len = escaped == 'x' ? 2 : 4;
        unsigned code = 0;
        for (size_t k = 0; k < len; ++k) {
          int h = pos_ + k < src_.size() ? HexValue(src_[pos_ + k]) : -1;
          if (h < 0) return Fail(pos_ - 2, fmt::format("invalid hexadecimal escape sequence \\{}", escaped));
          code = code * 16 + h;
        }
        pos_ += len;
        if (code >= 0xdc00 && code <= 0xdfff && pending_high) {
          AppendUtf8(out, 0x10000 + ((pending_high - 0xd800) << 10) + (code - 0xdc00));
          pending_high = 0;
        } else if (code >= 0xd800 && code <= 0xdbff) {
          flush_high();
          pending_high = static_cast<char16_t>(code);
        } else {
          flush_high();
          AppendUtf8(out, code);
        }
        continue;
      }
      flush_high();
      switch (escaped) {
        case 'n': out->push_back('\n'); break;
        case 't': out->push_back('\t'); break;
        case 'r': out->push_back('\r'); break;
        case 'b': out->push_back('\b'); break;
        case 'f': out->push_back('\f'); break;
        case 'v': out->push_back('\v'); break;
        case '\'': out->push_back('\''); break;
        case '"': out->push_back('"'); break;
        case '\\': out->push_back('\\'); break;
        default: return Fail(pos_ - 2, fmt::format("unexpected escaped character '{}'", escaped));
      }
    }
    flush_high();
    ++pos_;  // the closing quote
    return Status::Ok();
  }

  Status Loop() {
    while (pos_ < src_.size()) {
      if (tokens_.empty() || LastIs(TokenType::kCloseStatement) || LastIs(TokenType::kCloseExpression) ||
          LastIs(TokenType::kComment)) {
        size_t start = pos_;
        while (pos_ < src_.size() &&
               !(src_[pos_] == '{' && pos_ + 1 < src_.size() &&
                 (src_[pos_ + 1] == '%' || src_[pos_ + 1] == '{' || src_[pos_ + 1] == '#'))) {
          ++pos_;
        }
        if (pos_ > start) {
          Push(TokenType::kText, src_.substr(start, pos_ - start), start);
          continue;
        }
      }

      if (At("{#")) {
        size_t start = pos_;
        pos_ += 2;
        bool strip_before = pos_ < src_.size() && src_[pos_] == '-';
        if (strip_before) ++pos_;
        size_t body = pos_;
        while (!At("#}")) {
          if (pos_ + 2 >= src_.size()) return Fail(start, "missing end of comment tag '#}'");
          ++pos_;
        }
        std::string comment = src_.substr(body, pos_ - body);
        bool strip_after = !comment.empty() && comment.back() == '-';
        if (strip_after) comment.pop_back();
        if (strip_before) StripTrailingWhitespace();
        Push(TokenType::kComment, std::move(comment), start);
        pos_ += 2;
        if (strip_after) SkipLeadingWhitespace();
        continue;
      }
      if (At("{%-")) {
        StripTrailingWhitespace();
        Push(TokenType::kOpenStatement, "{%", pos_);
        pos_ += 3;
        continue;
      }
      if (At("{{-")) {
        StripTrailingWhitespace();
        Push(TokenType::kOpenExpression, "{{", pos_);
        curly_depth_ = 0;
        pos_ += 3;
        continue;
      }

      // Whitespace inside a tag is skipped; running into the end of the input doing so is an error.
      while (size_t n = JsWhitespaceLength(src_, pos_)) {
        pos_ += n;
        if (pos_ >= src_.size()) return Fail(pos_, "unexpected end of input inside a tag");
      }

      if (At("-%}")) {
        Push(TokenType::kCloseStatement, "%}", pos_);
        pos_ += 3;
        SkipLeadingWhitespace();
        continue;
      }
      if (At("-}}")) {
        Push(TokenType::kCloseExpression, "}}", pos_);
        pos_ += 3;
        SkipLeadingWhitespace();
        continue;
      }

      char c = src_[pos_];
      if (c == '-' || c == '+') {
        if (tokens_.empty() || LastIs(TokenType::kText)) return Fail(pos_, fmt::format("unexpected character '{}'", c));
        TokenType last = tokens_.back().type;
        bool binary = last == TokenType::kIdentifier || last == TokenType::kNumericLiteral ||
                      last == TokenType::kStringLiteral || last == TokenType::kCloseParen ||
                      last == TokenType::kCloseSquareBracket;
        if (!binary) {
          size_t start = pos_++;
          std::string num;
          PARALLM_RETURN_IF_ERROR(ConsumeBytes(IsDigitByte, &num));
          if (!num.empty() && pos_ + 1 < src_.size() && src_[pos_] == '.' && IsDigitByte(src_[pos_ + 1])) {
            ++pos_;
            std::string frac;
            PARALLM_RETURN_IF_ERROR(ConsumeBytes(IsDigitByte, &frac));
            num += "." + frac;
          }
          Push(num.empty() ? TokenType::kUnaryOperator : TokenType::kNumericLiteral, std::string(1, c) + num, start);
          continue;
        }
      }

      bool matched = false;
      for (const auto& [seq, type] : kMappingTable) {
        if (seq == "}}" && curly_depth_ > 0) continue;
        if (!At(seq)) continue;
        Push(type, std::string(seq), pos_);
        if (type == TokenType::kOpenExpression) {
          curly_depth_ = 0;
        } else if (type == TokenType::kOpenCurlyBracket) {
          ++curly_depth_;
        } else if (type == TokenType::kCloseCurlyBracket) {
          --curly_depth_;
        }
        pos_ += seq.size();
        matched = true;
        break;
      }
      if (matched) continue;

      if (c == '\'' || c == '"') {
        size_t start = pos_++;
        std::string str;
        PARALLM_RETURN_IF_ERROR(ConsumeString(c, &str));
        Push(TokenType::kStringLiteral, std::move(str), start);
        continue;
      }
      if (IsDigitByte(c)) {
        size_t start = pos_;
        std::string num;
        PARALLM_RETURN_IF_ERROR(ConsumeBytes(IsDigitByte, &num));
        if (!LastIs(TokenType::kDot) && pos_ + 1 < src_.size() && src_[pos_] == '.' && IsDigitByte(src_[pos_ + 1])) {
          ++pos_;
          std::string frac;
          PARALLM_RETURN_IF_ERROR(ConsumeBytes(IsDigitByte, &frac));
          num += "." + frac;
        }
        Push(TokenType::kNumericLiteral, std::move(num), start);
        continue;
      }
      if (IsWordByte(c)) {
        size_t start = pos_;
        std::string word;
        PARALLM_RETURN_IF_ERROR(ConsumeBytes(IsWordByte, &word));
        Push(TokenType::kIdentifier, std::move(word), start);
        continue;
      }
      size_t end = pos_;
      DecodeUtf8(src_, &end);
      return Fail(pos_, fmt::format("unexpected character '{}'", src_.substr(pos_, end - pos_)));
    }
    return Status::Ok();
  }

  std::string_view source_;
  MappedText mapped_;
  const std::string& src_;
  size_t pos_ = 0;
  int curly_depth_ = 0;
  std::vector<Token> tokens_;
};

}  // namespace

const char* TokenTypeName(TokenType type) {
  switch (type) {
    case TokenType::kText: return "text";
    case TokenType::kNumericLiteral: return "number";
    case TokenType::kStringLiteral: return "string";
    case TokenType::kIdentifier: return "identifier";
    case TokenType::kEquals: return "'='";
    case TokenType::kOpenParen: return "'('";
    case TokenType::kCloseParen: return "')'";
    case TokenType::kOpenStatement: return "'{%'";
    case TokenType::kCloseStatement: return "'%}'";
    case TokenType::kOpenExpression: return "'{{'";
    case TokenType::kCloseExpression: return "'}}'";
    case TokenType::kOpenSquareBracket: return "'['";
    case TokenType::kCloseSquareBracket: return "']'";
    case TokenType::kOpenCurlyBracket: return "'{'";
    case TokenType::kCloseCurlyBracket: return "'}'";
    case TokenType::kComma: return "','";
    case TokenType::kDot: return "'.'";
    case TokenType::kColon: return "':'";
    case TokenType::kPipe: return "'|'";
    case TokenType::kAdditiveOperator: return "additive operator";
    case TokenType::kMultiplicativeOperator: return "multiplicative operator";
    case TokenType::kExponentiationOperator: return "'**'";
    case TokenType::kComparisonOperator: return "comparison operator";
    case TokenType::kUnaryOperator: return "unary operator";
    case TokenType::kComment: return "comment";
  }
  return "token";
}

Result<std::vector<Token>> Tokenize(std::string_view source) {
  if (source.size() >= UINT32_MAX) return Err("chat template is too large ({} bytes)", source.size());
  return Lexer(source, Preprocess(source)).Run();
}

std::string DescribePosition(std::string_view source, uint32_t offset) {
  size_t end = std::min<size_t>(offset, source.size());
  int line = 1, column = 1;
  for (size_t i = 0; i < end;) {
    if (source[i] == '\n') {
      ++line;
      column = 1;
      ++i;
    } else {
      DecodeUtf8(source, &i);
      ++column;
    }
  }
  return fmt::format("{}:{}", line, column);
}

}  // namespace parallm::chat
