// Tool-call parsers on exact texts: hermes, llama3_json and mistral calls, content before them, malformed calls
// left as content; streams fed character by character and as Qwen3's real token texts reassemble to the whole
// parse, without markup in the content; forced openings; detection from the chat templates in the fixtures.
#include "openai/tool_parser.h"

#include <gtest/gtest.h>

#include "chat/chat_template.h"
#include "chat/model_text.h"
#include "engine/choice_text.h"
#include "test_paths.h"
#include "../chat/chat_test_util.h"

namespace parallm::openai {
namespace {

using Calls = std::vector<std::pair<std::string, std::string>>;  // (name, arguments)

Calls Of(const std::vector<ToolCall>& calls) {
  Calls out;
  for (const ToolCall& c : calls) out.emplace_back(c.name, c.arguments);
  return out;
}

// Streams `pieces` through a ToolCallStream and checks that the concatenated deltas equal the whole parse.
void ExpectStreamMatchesWhole(ToolParser parser, const std::vector<std::string>& pieces, const std::string& opening = "") {
  std::string text;
  for (const std::string& p : pieces) text += p;
  const ParsedToolCalls whole = ParseToolCalls(parser, text, opening);
  ToolCallStream stream(parser, opening);
  std::string content;
  std::vector<ToolCall> calls;
  for (size_t i = 0; i < pieces.size(); ++i) {
    auto out = stream.Add(pieces[i], i + 1 == pieces.size());
    content += out.content;
    calls.insert(calls.end(), out.calls.begin(), out.calls.end());
  }
  if (pieces.empty()) {
    auto out = stream.Add("", true);
    content += out.content;
  }
  EXPECT_EQ(content, whole.content) << text;
  EXPECT_EQ(Of(calls), Of(whole.calls)) << text;
}

std::vector<std::string> Chars(const std::string& s) {
  std::vector<std::string> out;
  for (char c : s) out.emplace_back(1, c);
  return out;
}

struct Case {
  ToolParser parser;
  std::string text;
  std::string content;
  Calls calls;
};

const std::vector<Case>& Cases() {
  static const std::vector<Case> cases = {
      // hermes: content before the call kept; the arguments as the model wrote them (2.50 stays 2.50).
      {ToolParser::kHermes,
       "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"t\": 2.50}}\n"
       "</tool_call>",
       "Let me check.\n",
       {{"get_weather", "{\"city\": \"Paris\", \"t\": 2.50}"}}},
      // Two calls; whitespace between and after them dropped.
      {ToolParser::kHermes,
       "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"arguments\": {\"x\": [1, "
       "{\"y\": \"}\"}]}, \"name\": \"b\"}\n</tool_call>\n",
       "",
       {{"a", "{}"}, {"b", "{\"x\": [1, {\"y\": \"}\"}]}"}}},
      // An answer that ends inside the block (no closing tag) is still a call, as in vLLM.
      {ToolParser::kHermes, "<tool_call>{\"name\": \"a\", \"arguments\": {\"k\": \"v\"}}", "", {{"a", "{\"k\": \"v\"}"}}},
      // Arguments written as a JSON string.
      {ToolParser::kHermes, "<tool_call>{\"name\": \"a\", \"arguments\": \"{\\\"k\\\": 1}\"}</tool_call>", "",
       {{"a", "{\"k\": 1}"}}},
      // Malformed calls are left as content, markup and all.
      {ToolParser::kHermes, "Hi <tool_call>{\"name\": \"a\", \"arguments\": {</tool_call>",
       "Hi <tool_call>{\"name\": \"a\", \"arguments\": {</tool_call>", {}},
      {ToolParser::kHermes, "<tool_call>{\"arguments\": {}}</tool_call>", "<tool_call>{\"arguments\": {}}</tool_call>",
       {}},
      {ToolParser::kHermes, "<tool_call>{\"name\": \"a\", \"arguments\": [1]}</tool_call>",
       "<tool_call>{\"name\": \"a\", \"arguments\": [1]}</tool_call>", {}},
      // A valid call, then a broken one: the call stands, the rest is content.
      {ToolParser::kHermes,
       "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call><tool_call>{oops}</tool_call>",
       "<tool_call>{oops}</tool_call>", {{"a", "{}"}}},
      // Plain text, and text that only looks like the start of the tag.
      {ToolParser::kHermes, "Just text, no calls.", "Just text, no calls.", {}},
      {ToolParser::kHermes, "a < b <tool", "a < b <tool", {}},
      // llama3_json: after <|python_tag|> or bare; "parameters" (Llama's) or "arguments"; several with ';'.
      {ToolParser::kLlama3Json, "<|python_tag|>{\"name\": \"f\", \"parameters\": {\"a\": 1}}", "", {{"f", "{\"a\": 1}"}}},
      {ToolParser::kLlama3Json,
       " {\"name\": \"f\", \"arguments\": {\"a\": \"x;y\"}}; {\"name\": \"g\", \"parameters\": {}}", "",
       {{"f", "{\"a\": \"x;y\"}"}, {"g", "{}"}}},
      {ToolParser::kLlama3Json, "The answer is 4.", "The answer is 4.", {}},
      {ToolParser::kLlama3Json, "{\"answer\": 4}", "{\"answer\": 4}", {}},
      {ToolParser::kLlama3Json, "{\"name\": \"f\", \"parameters\": {}, \"arguments\": {}}",
       "{\"name\": \"f\", \"parameters\": {}, \"arguments\": {}}", {}},
      {ToolParser::kLlama3Json, "{\"name\": \"f\", \"parameters\": {\"a\": 1}", "{\"name\": \"f\", \"parameters\": {\"a\": 1}",
       {}},
      // mistral: content before [TOOL_CALLS], then a JSON list of calls.
      {ToolParser::kMistral,
       "Sure. [TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"a\": 1}}, {\"name\": \"g\", \"arguments\": {}}]",
       "Sure. ", {{"f", "{\"a\": 1}"}, {"g", "{}"}}},
      {ToolParser::kMistral, "[TOOL_CALLS] [{\"name\": \"f\", \"arguments\": {\"a\": 1}}", "[TOOL_CALLS] [{\"name\": \"f\", "
       "\"arguments\": {\"a\": 1}}", {}},
      {ToolParser::kMistral, "[TOOL_CALLS][{\"name\": \"f\"}]", "[TOOL_CALLS][{\"name\": \"f\"}]", {}},
      {ToolParser::kMistral, "No [TOOL] here", "No [TOOL] here", {}},
      // mistral v11+: one [TOOL_CALLS] per call, the name, then [ARGS] (or nothing) and the arguments object.
      {ToolParser::kMistral,
       "Sure. [TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]add{\"a\": {\"b\": [1]}}", "Sure. ",
       {{"get_weather", "{\"city\": \"Paris\"}"}, {"add", "{\"a\": {\"b\": [1]}}"}}},
      {ToolParser::kMistral, "[TOOL_CALLS]f[ARGS]{\"a\": 1", "[TOOL_CALLS]f[ARGS]{\"a\": 1", {}},
      {ToolParser::kMistral, "[TOOL_CALLS]f[ARGS][1]", "[TOOL_CALLS]f[ARGS][1]", {}},
      {ToolParser::kMistral, "[TOOL_CALLS]f is done", "[TOOL_CALLS]f is done", {}},
  };
  return cases;
}

TEST(ToolParserTest, WholeAnswers) {
  for (const Case& c : Cases()) {
    const ParsedToolCalls parsed = ParseToolCalls(c.parser, c.text);
    EXPECT_EQ(parsed.content, c.content) << ToolParserName(c.parser) << ": " << c.text;
    EXPECT_EQ(Of(parsed.calls), c.calls) << ToolParserName(c.parser) << ": " << c.text;
  }
}

TEST(ToolParserTest, StreamsCharacterByCharacterReassembleToTheWhole) {
  for (const Case& c : Cases()) ExpectStreamMatchesWhole(c.parser, Chars(c.text));
  // And as one piece, and in two halves.
  for (const Case& c : Cases()) {
    ExpectStreamMatchesWhole(c.parser, {c.text});
    ExpectStreamMatchesWhole(c.parser, {c.text.substr(0, c.text.size() / 2), c.text.substr(c.text.size() / 2)});
  }
}

TEST(ToolParserTest, ContentIsSentBeforeTheCallEndsAndNeverHoldsMarkup) {
  ToolCallStream stream(ToolParser::kHermes);
  EXPECT_EQ(stream.Add("Let me look", false).content, "Let me look");
  EXPECT_EQ(stream.Add(" that up <tool", false).content, " that up ");  // "<tool" may be the tag: held
  auto out = stream.Add("_call>\n{\"name\": \"f\", \"arguments\": {\"q\": 1}}\n", false);
  EXPECT_EQ(out.content, "");
  EXPECT_TRUE(out.calls.empty());  // held until the call is complete
  out = stream.Add("</tool_call>", false);
  EXPECT_EQ(Of(out.calls), (Calls{{"f", "{\"q\": 1}"}}));
  out = stream.Add("\n", true);
  EXPECT_EQ(out.content, "");
  EXPECT_EQ(stream.content(), "Let me look that up ");
}

TEST(ToolParserTest, SingleCallDropsTheRest) {
  const std::string two = "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>\n<tool_call>{\"name\": \"b\", "
                          "\"arguments\": {}}</tool_call>";
  EXPECT_EQ(ParseToolCalls(ToolParser::kHermes, two).calls.size(), 2u);
  const ParsedToolCalls one = ParseToolCalls(ToolParser::kHermes, two, "", /*single_call=*/true);
  EXPECT_EQ(Of(one.calls), (Calls{{"a", "{}"}}));
  EXPECT_EQ(one.content, "");
  const ParsedToolCalls mistral = ParseToolCalls(
      ToolParser::kMistral, "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}}, {\"name\": \"g\", \"arguments\": {}}]", "",
      true);
  EXPECT_EQ(Of(mistral.calls), (Calls{{"f", "{}"}}));
}

TEST(ToolParserTest, ForcedOpeningsStartTheCall) {
  EXPECT_EQ(ForcedCallOpening(ToolParser::kHermes, "get_weather"),
            "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ");
  EXPECT_EQ(ForcedCallOpening(ToolParser::kHermes, ""), "<tool_call>\n{\"name\": \"");
  EXPECT_EQ(ForcedCallOpening(ToolParser::kLlama3Json, "f"), "{\"name\": \"f\", \"parameters\": ");
  EXPECT_EQ(ForcedCallOpening(ToolParser::kMistral, "f"), "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": ");
  // The model's answer continues the opening; the opening itself is not content.
  for (ToolParser p : {ToolParser::kHermes, ToolParser::kLlama3Json, ToolParser::kMistral}) {
    const std::string tail = p == ToolParser::kHermes ? "{\"city\": \"Paris\"}}\n</tool_call>"
                             : p == ToolParser::kMistral ? "{\"city\": \"Paris\"}}]"
                                                         : "{\"city\": \"Paris\"}}";
    const ParsedToolCalls named = ParseToolCalls(p, tail, ForcedCallOpening(p, "get_weather"));
    EXPECT_EQ(named.content, "") << ToolParserName(p);
    EXPECT_EQ(Of(named.calls), (Calls{{"get_weather", "{\"city\": \"Paris\"}"}})) << ToolParserName(p);
    ExpectStreamMatchesWhole(p, Chars(tail), ForcedCallOpening(p, "get_weather"));
    // "required": the model writes the name too.
    const ParsedToolCalls any = ParseToolCalls(p, "f\", \"" + std::string(p == ToolParser::kLlama3Json ? "parameters" : "arguments") +
                                                      "\": " + tail,
                                               ForcedCallOpening(p, ""));
    EXPECT_EQ(Of(any.calls), (Calls{{"f", "{\"city\": \"Paris\"}"}})) << ToolParserName(p);
  }
  // Garbage after a forced opening is no call (the server then reports an error).
  EXPECT_TRUE(ParseToolCalls(ToolParser::kHermes, "zz}}", ForcedCallOpening(ToolParser::kHermes, "f")).calls.empty());
}

TEST(ToolParserTest, IdsAndNames) {
  const std::string id = NewToolCallId(ToolParser::kHermes);
  EXPECT_EQ(id.size(), 29u);
  EXPECT_EQ(id.substr(0, 5), "call_");
  EXPECT_NE(id, NewToolCallId(ToolParser::kHermes));
  EXPECT_EQ(NewToolCallId(ToolParser::kMistral).size(), 9u);  // Mistral's templates require 9 characters
  for (const char* name : {"hermes", "llama3_json", "mistral"})
    EXPECT_EQ(ToolParserName(*ToolParserByName(name)), name);
  EXPECT_FALSE(ToolParserByName("pythonic").has_value());
}

TEST(ToolParserTest, DetectedFromTheChatTemplates) {
  const struct {
    const char* file;
    ToolParser parser;
  } cases[] = {
      {"chat-templates/NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", ToolParser::kHermes},
      {"chat-templates/Qwen-Qwen2.5-7B-Instruct.jinja", ToolParser::kHermes},
      {"chat-templates/meta-llama-Llama-3.1-8B-Instruct.jinja", ToolParser::kLlama3Json},
      {"chat-templates/meta-llama-Llama-3.2-3B-Instruct.jinja", ToolParser::kLlama3Json},
      {"chat-templates/mistralai-Mistral-Nemo-Instruct-2407.jinja", ToolParser::kMistral},
      {"chat-templates/google-gemma-2-2b-it.jinja", ToolParser::kNone},
      {"chat-templates/microsoft-Phi-3.5-mini-instruct.jinja", ToolParser::kNone},
  };
  for (const auto& c : cases) {
    const std::string source = chat::test_util::ReadFile(testing::FixturePath(c.file));
    ASSERT_FALSE(source.empty()) << c.file;
    EXPECT_EQ(DetectToolParser(source), c.parser) << c.file;
  }
  EXPECT_EQ(DetectToolParser("<tool_call> [TOOL_CALLS]"), ToolParser::kNone);  // ambiguous
}

// The texts a real tokenizer streams: Qwen3's tokens for a call, detokenized incrementally as the engine does
// (ChoiceText), token by token, into the stream; the deltas reassemble to the whole parse.
TEST(ToolParserTest, RealTokenTextsOfQwen3) {
  auto text = ModelText::ForModel("synthetic:tiny", testing::FixturePath("tokenizers/qwen3"));
  ASSERT_TRUE(text.ok()) << text.status().message();
  const Tokenizer& tok = *text->tokenizer();
  const std::vector<int32_t> prompt = text->EncodePrompt("<|im_start|>assistant\n").value();
  for (const std::string& answer :
       {std::string("Sure — checking «Paris».\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
                    "\"Paris\", \"days\": 3}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": "
                    "{\"tz\": \"Europe/Paris\"}}\n</tool_call>"),
        std::string("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par</tool_call>")}) {
    const std::vector<int32_t> ids = tok.Encode(answer, /*add_special=*/false, /*parse_special=*/true);
    ChoiceText detok(tok, prompt, {});
    std::vector<std::string> pieces;
    for (size_t i = 0; i < ids.size(); ++i)
      pieces.push_back(detok.Add(std::span(&ids[i], 1), i + 1 == ids.size()).text);
    std::string joined;
    for (const std::string& p : pieces) joined += p;
    ASSERT_EQ(joined, answer);  // <tool_call> is a normal (not special) added token in Qwen3: decoded as text
    ExpectStreamMatchesWhole(ToolParser::kHermes, pieces);
  }
  const ParsedToolCalls whole = ParseToolCalls(
      ToolParser::kHermes, "Sure.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>");
  EXPECT_EQ(whole.content, "Sure.\n");
  EXPECT_EQ(Of(whole.calls), (Calls{{"get_weather", "{\"city\": \"Paris\"}"}}));
}

// skip_special_tokens as the engine's text applies it: special tokens (Qwen3's <|im_start|>, <|endoftext|>) are
// dropped by default and kept when it is off, whole or token by token.
TEST(ToolParserTest, ChoiceTextKeepsSpecialTokensWhenAsked) {
  auto text = ModelText::ForModel("synthetic:tiny", testing::FixturePath("tokenizers/qwen3"));
  ASSERT_TRUE(text.ok()) << text.status().message();
  const Tokenizer& tok = *text->tokenizer();
  const std::vector<int32_t> prompt = text->EncodePrompt("<|im_start|>assistant\n").value();
  const std::vector<int32_t> ids = tok.Encode("Hi <|im_start|>there<|endoftext|>!", false, /*parse_special=*/true);
  ASSERT_TRUE(tok.IsSpecial(ids.at(2))) << tok.TokenText(ids.at(2));
  for (bool skip : {true, false}) {
    ChoiceText whole(tok, prompt, {}, skip);
    ChoiceText stepwise(tok, prompt, {}, skip);
    std::string joined;
    for (size_t i = 0; i < ids.size(); ++i) joined += stepwise.Add(std::span(&ids[i], 1), i + 1 == ids.size()).text;
    const std::string expected = skip ? "Hi there!" : "Hi <|im_start|>there<|endoftext|>!";
    EXPECT_EQ(whole.Add(ids, true).text, expected);
    EXPECT_EQ(joined, expected);
  }
}

}  // namespace
}  // namespace parallm::openai
