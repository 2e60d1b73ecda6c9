// Tool-choice grammars: after a forced choice's opening, exactly the valid calls of each parser's format are
// accepted (names from the tools, arguments per schema, parallel calls only when allowed), and what they accept
// parses back into those calls; "auto" with a strict function leaves text free and constrains hermes calls.
#include "openai/tool_grammar.h"

#include <gtest/gtest.h>

#include "structured/matcher.h"

namespace parallm::openai {
namespace {

ToolsRequest Tools(ToolChoice choice, bool parallel = true, bool strict = false) {
  ToolsRequest t;
  ToolFunction weather{"get_weather", "", boost::json::parse(R"({"type": "object", "properties": {
      "city": {"type": "string", "maxLength": 8}, "unit": {"enum": ["c", "f"]}},
      "required": ["city"], "additionalProperties": false})"), strict};
  ToolFunction time{"get_time", "", nullptr, false};
  t.functions = {weather, time};
  t.choice = choice;
  t.parallel_tool_calls = parallel;
  if (choice == ToolChoice::kNamed) t.named = "get_weather";
  return t;
}

class ToolGrammarTest : public ::testing::Test {
 protected:
  // A byte-per-token vocabulary: the matcher's byte automaton is what is tested here.
  ToolGrammarTest() {
    std::vector<std::optional<std::string>> bytes;
    for (int b = 0; b < 256; ++b) bytes.emplace_back(std::string(1, static_cast<char>(b)));
    compiler_ = std::make_unique<structured::GrammarCompiler>(structured::TokenVocab::FromBytes(bytes));
  }
  std::shared_ptr<const structured::CompiledGrammar> Compile(ToolParser parser, const ToolsRequest& tools) {
    auto gbnf = ToolChoiceGbnf(parser, tools);
    EXPECT_TRUE(gbnf.ok()) << gbnf.status().message();
    if (!gbnf.ok() || !*gbnf) return nullptr;
    structured::StructuredOutput spec;
    spec.kind = structured::StructuredOutput::Kind::kGbnf;
    spec.text = **gbnf;
    auto g = compiler_->Compile(spec);
    EXPECT_TRUE(g.ok()) << g.status().message() << "\n" << **gbnf;
    return g.ok() ? *g : nullptr;
  }
  // Whether `text` is a complete answer of the grammar.
  static bool Complete(const std::shared_ptr<const structured::CompiledGrammar>& g, std::string_view text) {
    structured::GrammarMatcher m(g);
    return m.AcceptBytes(text) && m.CanEnd();
  }
  std::unique_ptr<structured::GrammarCompiler> compiler_;
};

TEST_F(ToolGrammarTest, NamedIsOneCallOfThatFunctionWithValidArguments) {
  const ToolsRequest tools = Tools(ToolChoice::kNamed);
  auto g = Compile(ToolParser::kHermes, tools);
  ASSERT_NE(g, nullptr);
  for (std::string_view ok : {R"({"city": "Paris"}}</tool_call>)", "{\"city\":\"Paris\",\"unit\":\"c\"}}\n</tool_call>"}) {
    EXPECT_TRUE(Complete(g, ok)) << ok;
    structured::GrammarMatcher m(g);
    ASSERT_TRUE(m.AcceptBytes(ok));
    EXPECT_TRUE(m.IsTerminated()) << "one call, then only the end";
    const std::string opening = ForcedCallOpening(ToolParser::kHermes, "get_weather");
    ParsedToolCalls parsed = ParseToolCalls(ToolParser::kHermes, ok, opening);
    ASSERT_EQ(parsed.calls.size(), 1u) << ok;
    EXPECT_EQ(parsed.calls[0].name, "get_weather");
  }
  for (std::string_view bad : {R"({"town": "Paris"}}</tool_call>)", R"({"city": 3}}</tool_call>)",
                               R"({"city": "Paris", "unit": "k"}}</tool_call>)", R"({"city": "Parisienne"}})",
                               R"({}}</tool_call>)", R"({"city": "P"}}</tool_call>\n<tool_call>)"})
    EXPECT_FALSE(Complete(g, bad)) << bad;
}

TEST_F(ToolGrammarTest, RequiredIsCallsOfTheToolsInEachFormat) {
  const struct {
    ToolParser parser;
    std::string two_calls;  // after ForcedCallOpening(parser, "")
    std::string bad_name;
  } cases[] = {
      {ToolParser::kHermes,
       "get_weather\", \"arguments\": {\"city\": \"P\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", "
       "\"arguments\": {\"zone\": [1]}}\n</tool_call>",
       "nope\", \"arguments\": {}}</tool_call>"},
      {ToolParser::kLlama3Json,
       R"(get_weather", "parameters": {"city": "P"}}; {"name": "get_time", "parameters": {}})",
       R"(nope", "parameters": {}})"},
      {ToolParser::kMistral,
       R"(get_weather", "arguments": {"city": "P"}}, {"name": "get_time", "arguments": {}}])",
       R"(nope", "arguments": {}}])"},
  };
  for (const auto& c : cases) {
    auto g = Compile(c.parser, Tools(ToolChoice::kRequired));
    ASSERT_NE(g, nullptr);
    EXPECT_TRUE(Complete(g, c.two_calls)) << c.two_calls;
    EXPECT_FALSE(Complete(g, c.bad_name)) << c.bad_name;
    ParsedToolCalls parsed = ParseToolCalls(c.parser, c.two_calls, ForcedCallOpening(c.parser, ""));
    ASSERT_EQ(parsed.calls.size(), 2u) << c.two_calls;
    EXPECT_EQ(parsed.calls[0].name, "get_weather");
    EXPECT_EQ(parsed.calls[1].name, "get_time");
    EXPECT_EQ(parsed.content, "");
    // parallel_tool_calls false: the first call only.
    auto single = Compile(c.parser, Tools(ToolChoice::kRequired, /*parallel=*/false));
    ASSERT_NE(single, nullptr);
    EXPECT_FALSE(Complete(single, c.two_calls)) << c.two_calls;
  }
}

TEST_F(ToolGrammarTest, StrictAutoLeavesTextFreeAndConstrainsHermesCalls) {
  const ToolsRequest tools = Tools(ToolChoice::kAuto, true, /*strict=*/true);
  auto g = Compile(ToolParser::kHermes, tools);
  ASSERT_NE(g, nullptr);
  for (std::string_view ok :
       {"", "Just text, <b>bold</b> and <tool_cal without the end", "caf\xC3\xA9 <<tool",
        "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"P\"}}\n</tool_call>",
        "<tool_call>{\"name\": \"get_time\", \"arguments\": {\"any\": {\"thing\": 1}}}</tool_call> and then text"})
    EXPECT_TRUE(Complete(g, ok)) << ok;
  for (std::string_view bad : {"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"town\": \"P\"}}",
                               "<tool_call> free text", "<tool_call>\n{\"name\": \"nope\""})
    EXPECT_FALSE(structured::GrammarMatcher(g).AcceptBytes(bad)) << bad;
  // The parser reads the call out of the text around it.
  ParsedToolCalls parsed = ParseToolCalls(
      ToolParser::kHermes,
      "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"P\"}}\n</tool_call>");
  ASSERT_EQ(parsed.calls.size(), 1u);
  EXPECT_EQ(parsed.calls[0].arguments, R"({"city": "P"})");
}

TEST_F(ToolGrammarTest, WhenThereIsNoConstraintAndErrors) {
  // "none", "auto" without strict, and strict "auto" where the call opens with a special token: no grammar.
  for (auto [parser, tools] : {std::pair{ToolParser::kHermes, Tools(ToolChoice::kNone)},
                               {ToolParser::kHermes, Tools(ToolChoice::kAuto)},
                               {ToolParser::kMistral, Tools(ToolChoice::kAuto, true, true)},
                               {ToolParser::kLlama3Json, Tools(ToolChoice::kAuto, true, true)}}) {
    auto gbnf = ToolChoiceGbnf(parser, tools);
    ASSERT_TRUE(gbnf.ok());
    EXPECT_FALSE(gbnf->has_value());
  }
  ToolsRequest not_object = Tools(ToolChoice::kRequired);
  not_object.functions[1].parameters = boost::json::parse(R"({"type": "string"})");
  auto e = ToolChoiceGbnf(ToolParser::kHermes, not_object);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("'tools': function 'get_time': parameters must be"), std::string::npos);
  ToolsRequest unsupported = Tools(ToolChoice::kRequired);
  unsupported.functions[0].parameters = boost::json::parse(
      R"({"type": "object", "properties": {"tags": {"type": "array", "uniqueItems": true}}})");
  e = ToolChoiceGbnf(ToolParser::kHermes, unsupported);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("function 'get_weather'"), std::string::npos) << e.status().message();
  EXPECT_NE(e.status().message().find("'uniqueItems' at #/properties/tags"), std::string::npos);
  // A forced call and response_format both constrain the answer.
  SamplingParams params;
  params.grammar = Compile(ToolParser::kHermes, Tools(ToolChoice::kNamed));
  Status st = ApplyToolChoiceGrammar(ToolParser::kHermes, Tools(ToolChoice::kRequired), compiler_.get(), &params);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message().rfind("'tool_choice' constrains", 0), 0u) << st.message();
}

}  // namespace
}  // namespace parallm::openai
