// Tool-call parsers: find the function calls in a model's generated text, per model family as vLLM names them
// (`hermes`: Qwen2.5/Qwen3/Hermes `<tool_call>{json}</tool_call>`; `llama3_json`: Llama 3.1/3.2 JSON
// `{"name", "parameters"}` possibly after `<|python_tag|>`, several separated by ';'; `mistral`:
// `[TOOL_CALLS][{"name", "arguments"}, ...]`, or from Mistral's v11 tokenizers on `[TOOL_CALLS]NAME[ARGS]{...}`
// per call, [ARGS] optional), whole or as the text streams in.
//
// One state machine serves both, so streamed deltas always reassemble to the whole answer: text before the first
// call is content; then calls are read one at a time, each held back until it is complete and parses (a call is
// never sent half-way and then retracted); from the first thing that is not a well-formed call on, the text is
// content again (a malformed call is left as content, markup included). Whitespace between calls is dropped.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace parallm::openai {

enum class ToolParser { kNone, kHermes, kLlama3Json, kMistral };

// "hermes", "llama3_json", "mistral"; nullopt for another name.
std::optional<ToolParser> ToolParserByName(std::string_view name);
std::string_view ToolParserName(ToolParser parser);
// The parser a chat template's own tool format calls for: `<tool_call>` hermes, `[TOOL_CALLS]` mistral, ipython
// with "parameters" llama3_json; kNone when it shows none of them, or more than one.
ToolParser DetectToolParser(std::string_view template_source);

// The text a forced tool_choice ("required", or a named function when `name` is set) makes the answer start
// with, appended to the prompt after the template's generation prompt: e.g. hermes
// `<tool_call>\n{"name": "NAME", "arguments": ` or, with no name, `<tool_call>\n{"name": "`.
std::string ForcedCallOpening(ToolParser parser, const std::string& name);

// A new call id: "call_" and 24 random letters and digits, or 9 letters and digits for mistral (Mistral's chat
// templates refuse other ids when the call comes back in the conversation).
std::string NewToolCallId(ToolParser parser);

struct ToolCall {
  std::string name;
  std::string arguments;  // JSON text: the model's own text of the arguments object (a string's value if a string)
};

class ToolCallStream {
 public:
  // `opening`: text the answer is known to start with (the forced opening, which is in the prompt, not the
  // output); `single_call`: parallel_tool_calls false, so whatever follows the first call is dropped.
  ToolCallStream(ToolParser parser, std::string opening = "", bool single_call = false);

  struct Output {
    std::string content;          // text that became final content
    std::vector<ToolCall> calls;  // calls that became complete, in order
  };
  // Adds generated text; `final` (the answer ended) flushes whatever was held back. Nothing after final.
  Output Add(std::string_view text, bool final);

  const std::vector<ToolCall>& calls() const { return calls_; }  // every call so far
  const std::string& content() const { return content_; }         // all content so far

 private:
  enum class Phase { kContent, kCalls, kTail, kDone };
  enum class Read { kNeedMore, kCalls, kNotACall };
  Read ReadCalls(bool final, std::vector<ToolCall>* calls, size_t* end) const;
  Read ReadMistralV11(size_t after_marker, bool final, std::vector<ToolCall>* calls, size_t* end) const;
  void EmitContent(size_t end, Output* out);

  ToolParser parser_;
  bool single_call_;
  std::string text_;   // the answer so far (opening first)
  size_t cursor_ = 0;  // text_ before this has been turned into content or calls
  Phase phase_ = Phase::kContent;
  std::vector<ToolCall> calls_;
  std::string content_;
};

// The whole answer at once: content and calls, exactly what a stream fed the same text reports.
struct ParsedToolCalls {
  std::string content;
  std::vector<ToolCall> calls;
};
ParsedToolCalls ParseToolCalls(ToolParser parser, std::string_view text, std::string opening = "",
                               bool single_call = false);

}  // namespace parallm::openai
