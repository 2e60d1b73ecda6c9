// Tool-call parsing for the hermes, llama3_json and mistral formats: one incremental state machine over the text.
#include "openai/tool_parser.h"

#include <cctype>
#include <random>

#include <boost/json.hpp>
#include <fmt/format.h>

namespace parallm::openai {
namespace {

constexpr std::string_view kHermesStart = "<tool_call>";
constexpr std::string_view kHermesEnd = "</tool_call>";
constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr std::string_view kMistralStart = "[TOOL_CALLS]";
constexpr std::string_view kMistralArgs = "[ARGS]";

bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

size_t SkipSpace(std::string_view s, size_t i) {
  while (i < s.size() && IsSpace(s[i])) ++i;
  return i;
}

// Whether `rest` is a proper prefix of `marker` (the marker may be arriving).
bool PartialMarker(std::string_view rest, std::string_view marker) {
  return rest.size() < marker.size() && marker.substr(0, rest.size()) == rest;
}

// The length of the longest suffix of `s` that is a proper prefix of `marker`: text that must be held back
// because the marker may be starting there.
size_t HeldSuffix(std::string_view s, std::string_view marker) {
  for (size_t n = std::min(s.size(), marker.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == marker.substr(0, n)) return n;
  return 0;
}

// Index just past the JSON string starting at s[i] == '"'; npos when it does not end in `s`.
size_t StringEnd(std::string_view s, size_t i) {
  for (size_t k = i + 1; k < s.size(); ++k) {
    if (s[k] == '\\') ++k;
    else if (s[k] == '"') return k + 1;
  }
  return std::string_view::npos;
}

// Index just past the JSON object or array starting at s[i] ('{' or '['), by bracket depth outside strings;
// npos when it does not close in `s`. Whether it is valid JSON is the parser's to say.
size_t CompoundEnd(std::string_view s, size_t i) {
  int depth = 0;
  for (size_t k = i; k < s.size(); ++k) {
    const char c = s[k];
    if (c == '"') {
      k = StringEnd(s, k);
      if (k == std::string_view::npos) return k;
      --k;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return k + 1;
    }
  }
  return std::string_view::npos;
}

// Index just past the JSON value starting at s[i], in text already known to be valid JSON.
size_t ValueEnd(std::string_view s, size_t i) {
  if (s[i] == '{' || s[i] == '[') return CompoundEnd(s, i);
  if (s[i] == '"') return StringEnd(s, i);
  size_t k = i;
  while (k < s.size() && s[k] != ',' && s[k] != '}' && s[k] != ']' && !IsSpace(s[k])) ++k;
  return k;
}

// The text of member `key` of the JSON object `s` (valid JSON), as written; empty when absent.
std::string_view MemberText(std::string_view s, std::string_view key) {
  size_t i = SkipSpace(s, 0) + 1;  // past '{'
  while (true) {
    i = SkipSpace(s, i);
    if (i >= s.size() || s[i] != '"') return {};
    const size_t key_end = StringEnd(s, i);
    const std::string_view k = s.substr(i + 1, key_end - i - 2);
    i = SkipSpace(s, SkipSpace(s, key_end) + 1);  // past ':'
    const size_t value_end = ValueEnd(s, i);
    if (k == key) return s.substr(i, value_end - i);
    i = SkipSpace(s, value_end);
    if (i < s.size() && s[i] == ',') ++i;
  }
}

// One call object {"name": ..., "arguments": {...}} (llama3_json also "parameters"); nullopt unless well formed.
std::optional<ToolCall> ParseCallObject(std::string_view json, bool llama) {
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(json, ec);
  if (ec || !v.is_object()) return std::nullopt;
  const boost::json::object& o = v.as_object();
  const boost::json::value* name = o.if_contains("name");
  if (name == nullptr || !name->is_string() || name->as_string().empty()) return std::nullopt;
  const char* key = "arguments";
  if (llama && !o.contains("arguments")) key = "parameters";
  else if (llama && o.contains("parameters")) return std::nullopt;  // both: ambiguous
  const boost::json::value* args = o.if_contains(key);
  if (args == nullptr) return std::nullopt;
  ToolCall call{std::string(name->as_string()), ""};
  if (args->is_string()) {
    // Some models write the arguments as JSON text inside a string: that text is the arguments.
    boost::json::value inner = boost::json::parse(args->as_string(), ec);
    if (ec || !inner.is_object()) return std::nullopt;
    call.arguments = std::string(args->as_string());
  } else if (args->is_object()) {
    call.arguments = std::string(MemberText(json, key));
  } else {
    return std::nullopt;
  }
  return call;
}

}  // namespace

std::optional<ToolParser> ToolParserByName(std::string_view name) {
  if (name == "hermes") return ToolParser::kHermes;
  if (name == "llama3_json") return ToolParser::kLlama3Json;
  if (name == "mistral") return ToolParser::kMistral;
  return std::nullopt;
}

std::string_view ToolParserName(ToolParser parser) {
  switch (parser) {
    case ToolParser::kHermes: return "hermes";
    case ToolParser::kLlama3Json: return "llama3_json";
    case ToolParser::kMistral: return "mistral";
    case ToolParser::kNone: break;
  }
  return "none";
}

ToolParser DetectToolParser(std::string_view source) {
  std::vector<ToolParser> found;
  if (source.find(kHermesStart) != std::string_view::npos) found.push_back(ToolParser::kHermes);
  if (source.find(kMistralStart) != std::string_view::npos) found.push_back(ToolParser::kMistral);
  if (source.find("ipython") != std::string_view::npos && source.find("\"parameters\"") != std::string_view::npos)
    found.push_back(ToolParser::kLlama3Json);
  return found.size() == 1 ? found[0] : ToolParser::kNone;
}

std::string ForcedCallOpening(ToolParser parser, const std::string& name) {
  // Names are [A-Za-z0-9_-] (tools.cpp), so they need no JSON escaping.
  const std::string head = name.empty() ? "{\"name\": \"" : fmt::format("{{\"name\": \"{}\", ", name);
  switch (parser) {
    case ToolParser::kHermes:
      return fmt::format("{}\n{}{}", kHermesStart, head, name.empty() ? "" : "\"arguments\": ");
    case ToolParser::kLlama3Json:
      return head + (name.empty() ? "" : "\"parameters\": ");
    case ToolParser::kMistral:
      return fmt::format("{}[{}{}", kMistralStart, head, name.empty() ? "" : "\"arguments\": ");
    case ToolParser::kNone: break;
  }
  return "";
}

std::string NewToolCallId(ToolParser parser) {
  static constexpr std::string_view kAlnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  thread_local std::mt19937_64 rng(std::random_device{}());
  std::uniform_int_distribution<size_t> pick(0, kAlnum.size() - 1);
  std::string id = parser == ToolParser::kMistral ? "" : "call_";
  for (int i = 0, n = parser == ToolParser::kMistral ? 9 : 24; i < n; ++i) id += kAlnum[pick(rng)];
  return id;
}

ToolCallStream::ToolCallStream(ToolParser parser, std::string opening, bool single_call)
    : parser_(parser), single_call_(single_call), text_(std::move(opening)) {}

void ToolCallStream::EmitContent(size_t end, Output* out) {
  if (end <= cursor_) return;
  const std::string_view piece = std::string_view(text_).substr(cursor_, end - cursor_);
  out->content += piece;
  content_ += piece;
  cursor_ = end;
}

// Reads the next call(s) at cursor_ (after whitespace): hermes one <tool_call> block, mistral one [TOOL_CALLS]
// array, llama3_json one object (after ';' or <|python_tag|>).
ToolCallStream::Read ToolCallStream::ReadCalls(bool final, std::vector<ToolCall>* calls, size_t* end) const {
  const std::string_view s = text_;
  size_t i = SkipSpace(s, cursor_);
  if (i == s.size()) return final ? Read::kNotACall : Read::kNeedMore;
  const std::string_view rest = s.substr(i);
  auto need_more_or = [&](Read otherwise) { return final ? otherwise : Read::kNeedMore; };
  switch (parser_) {
    case ToolParser::kHermes: {
      if (rest.substr(0, kHermesStart.size()) != kHermesStart)
        return PartialMarker(rest, kHermesStart) ? need_more_or(Read::kNotACall) : Read::kNotACall;
      const size_t body = i + kHermesStart.size();
      size_t close = s.find(kHermesEnd, body);
      if (close == std::string_view::npos && !final) return Read::kNeedMore;
      // As vLLM, a block the answer ends inside (no closing tag) is still read.
      *end = close == std::string_view::npos ? s.size() : close + kHermesEnd.size();
      if (close == std::string_view::npos) close = s.size();
      auto call = ParseCallObject(s.substr(body, close - body), /*llama=*/false);
      if (!call) return Read::kNotACall;
      calls->push_back(std::move(*call));
      return Read::kCalls;
    }
    case ToolParser::kMistral: {
      if (rest.substr(0, kMistralStart.size()) != kMistralStart)
        return PartialMarker(rest, kMistralStart) ? need_more_or(Read::kNotACall) : Read::kNotACall;
      const size_t a = SkipSpace(s, i + kMistralStart.size());
      if (a == s.size()) return need_more_or(Read::kNotACall);
      if (s[a] != '[') return ReadMistralV11(a, final, calls, end);
      const size_t e = CompoundEnd(s, a);
      if (e == std::string_view::npos) return need_more_or(Read::kNotACall);
      boost::system::error_code ec;
      boost::json::value v = boost::json::parse(s.substr(a, e - a), ec);
      if (ec || !v.is_array() || v.as_array().empty()) return Read::kNotACall;
      // Each element again as text, so the arguments keep the model's own spelling.
      std::vector<ToolCall> found;
      size_t k = a + 1;
      for (size_t n = 0; n < v.as_array().size(); ++n) {
        k = SkipSpace(s, k);
        const size_t element_end = ValueEnd(s, k);
        auto call = ParseCallObject(s.substr(k, element_end - k), /*llama=*/false);
        if (!call) return Read::kNotACall;
        found.push_back(std::move(*call));
        k = SkipSpace(s, element_end) + 1;  // past ',' or ']'
      }
      calls->insert(calls->end(), found.begin(), found.end());
      *end = e;
      return Read::kCalls;
    }
    case ToolParser::kLlama3Json: {
      size_t k = i;
      if (!calls_.empty()) {  // calls after the first are separated by ';'
        if (s[k] != ';') return Read::kNotACall;
        k = SkipSpace(s, k + 1);
        if (k == s.size()) return need_more_or(Read::kNotACall);
      }
      if (s.substr(k, kPythonTag.size()) == kPythonTag) {
        k = SkipSpace(s, k + kPythonTag.size());
      } else if (PartialMarker(s.substr(k), kPythonTag)) {
        return need_more_or(Read::kNotACall);
      }
      if (k == s.size()) return need_more_or(Read::kNotACall);
      if (s[k] != '{') return Read::kNotACall;
      const size_t e = CompoundEnd(s, k);
      if (e == std::string_view::npos) return need_more_or(Read::kNotACall);
      auto call = ParseCallObject(s.substr(k, e - k), /*llama=*/true);
      if (!call) return Read::kNotACall;
      calls->push_back(std::move(*call));
      *end = e;
      return Read::kCalls;
    }
    case ToolParser::kNone: break;
  }
  return Read::kNotACall;
}

// Mistral's tokenizers from v11 on write each call as `[TOOL_CALLS]NAME[ARGS]{...}` (or without [ARGS]), one
// marker per call; `a` is just past the marker.
ToolCallStream::Read ToolCallStream::ReadMistralV11(size_t a, bool final, std::vector<ToolCall>* calls,
                                                    size_t* end) const {
  const std::string_view s = text_;
  auto need_more_or = [&](Read otherwise) { return final ? otherwise : Read::kNeedMore; };
  size_t k = a;
  while (k < s.size() && (std::isalnum(static_cast<unsigned char>(s[k])) || s[k] == '_' || s[k] == '-')) ++k;
  if (k == a) return Read::kNotACall;
  const std::string name(s.substr(a, k - a));
  if (s.substr(k, kMistralArgs.size()) == kMistralArgs) {
    k += kMistralArgs.size();
  } else if (PartialMarker(s.substr(k), kMistralArgs)) {
    return need_more_or(Read::kNotACall);
  }
  k = SkipSpace(s, k);
  if (k == s.size()) return need_more_or(Read::kNotACall);
  if (s[k] != '{') return Read::kNotACall;
  const size_t e = CompoundEnd(s, k);
  if (e == std::string_view::npos) return need_more_or(Read::kNotACall);
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(s.substr(k, e - k), ec);
  if (ec || !v.is_object()) return Read::kNotACall;
  calls->push_back({name, std::string(s.substr(k, e - k))});
  *end = e;
  return Read::kCalls;
}

ToolCallStream::Output ToolCallStream::Add(std::string_view text, bool final) {
  text_ += text;
  Output out;
  while (true) {
    switch (phase_) {
      case Phase::kContent: {
        if (parser_ == ToolParser::kNone) {
          phase_ = Phase::kTail;
          continue;
        }
        if (parser_ == ToolParser::kLlama3Json) {
          // Llama writes a call as its whole answer: JSON (or <|python_tag|>) first, else the answer is text.
          const size_t i = SkipSpace(text_, cursor_);
          if (i == text_.size()) {
            if (final) phase_ = Phase::kTail;
            else return out;
            continue;
          }
          const std::string_view rest = std::string_view(text_).substr(i);
          if (rest[0] == '{' || rest.substr(0, kPythonTag.size()) == kPythonTag) {
            phase_ = Phase::kCalls;
          } else if (PartialMarker(rest, kPythonTag) && !final) {
            return out;
          } else {
            phase_ = Phase::kTail;
          }
          continue;
        }
        const std::string_view marker = parser_ == ToolParser::kHermes ? kHermesStart : kMistralStart;
        const size_t at = text_.find(marker, cursor_);
        if (at != std::string::npos) {
          EmitContent(at, &out);
          phase_ = Phase::kCalls;
          continue;
        }
        EmitContent(final ? text_.size() : text_.size() - HeldSuffix(std::string_view(text_).substr(cursor_), marker),
                    &out);
        return out;
      }
      case Phase::kCalls: {
        std::vector<ToolCall> found;
        size_t end = cursor_;
        switch (ReadCalls(final, &found, &end)) {
          case Read::kNeedMore:
            return out;
          case Read::kNotACall:
            // Only whitespace left after calls: dropped. Anything else, and a malformed call, is content.
            if (!calls_.empty() && SkipSpace(text_, cursor_) == text_.size()) cursor_ = text_.size();
            phase_ = Phase::kTail;
            continue;
          case Read::kCalls:
            for (ToolCall& c : found) {
              if (single_call_ && !calls_.empty()) break;
              out.calls.push_back(c);
              calls_.push_back(std::move(c));
            }
            cursor_ = end;
            if (single_call_) phase_ = Phase::kDone;
            continue;
        }
        return out;
      }
      case Phase::kTail:
        EmitContent(text_.size(), &out);
        return out;
      case Phase::kDone:
        cursor_ = text_.size();
        return out;
    }
  }
}

ParsedToolCalls ParseToolCalls(ToolParser parser, std::string_view text, std::string opening, bool single_call) {
  ToolCallStream stream(parser, std::move(opening), single_call);
  stream.Add(text, /*final=*/true);
  return {stream.content(), stream.calls()};
}

}  // namespace parallm::openai
