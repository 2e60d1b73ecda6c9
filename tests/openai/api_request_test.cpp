// OpenAI request parsing: every prompt shape, chat messages through Qwen3's real template, and each kind of bad
// input answered with the right status, message and `param`.
#include "openai/api_request.h"

#include <gtest/gtest.h>

#include "openai/request_json.h"
#include "test_paths.h"

namespace parallm::openai {
namespace {

class ApiRequestTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto text = ModelText::ForModel("synthetic:tiny", testing::FixturePath("tokenizers/qwen3"));
    ASSERT_TRUE(text.ok()) << text.status().message();
    text_ = new ModelText(std::move(*text));
  }
  // Only the structured-output test builds the 151K-token vocabulary table (ctest runs each case alone).
  static void UseGrammars() {
    if (grammars_ == nullptr)
      grammars_ = new structured::GrammarCompiler(
          structured::TokenVocab::FromTokenizer(*text_->tokenizer(), text_->tokenizer()->size()));
  }
  static void TearDownTestSuite() {
    delete grammars_;
    grammars_ = nullptr;
    delete text_;
  }

  ParseContext Context() const {
    ParseContext c;
    c.model_names = {"tiny"};
    c.vocab_size = text_->tokenizer()->size();
    c.max_model_len = 64;
    c.text = text_;
    c.grammars = grammars_;
    return c;
  }
  ApiRequest Completion(const std::string& body) {
    ParsedRequest r = ParseCompletionRequest(body, Context());
    if (auto* e = std::get_if<ApiError>(&r)) ADD_FAILURE() << body << ": " << e->message;
    return std::holds_alternative<ApiRequest>(r) ? std::get<ApiRequest>(r) : ApiRequest{};
  }
  ApiError CompletionError(const std::string& body) {
    ParsedRequest r = ParseCompletionRequest(body, Context());
    EXPECT_TRUE(std::holds_alternative<ApiError>(r)) << body;
    return std::holds_alternative<ApiError>(r) ? std::get<ApiError>(r) : ApiError{};
  }
  ApiError ChatError(const std::string& body) {
    ParsedRequest r = ParseChatRequest(body, Context());
    EXPECT_TRUE(std::holds_alternative<ApiError>(r)) << body;
    return std::holds_alternative<ApiError>(r) ? std::get<ApiError>(r) : ApiError{};
  }

  static ModelText* text_;
  static structured::GrammarCompiler* grammars_;
};
ModelText* ApiRequestTest::text_ = nullptr;
structured::GrammarCompiler* ApiRequestTest::grammars_ = nullptr;

TEST_F(ApiRequestTest, EveryPromptShapeGivesTheSameTokens) {
  const std::vector<int32_t> hello = text_->EncodePrompt("Hello world").value();
  ASSERT_EQ(hello.size(), 2u);
  const std::string ids = "[" + std::to_string(hello[0]) + "," + std::to_string(hello[1]) + "]";
  for (const std::string& prompt : {std::string(R"("Hello world")"), std::string(R"(["Hello world"])"), ids,
                                    "[" + ids + "]"}) {
    ApiRequest r = Completion(R"({"model": "tiny", "prompt": )" + prompt + "}");
    ASSERT_EQ(r.prompts.size(), 1u) << prompt;
    EXPECT_EQ(r.prompts[0], hello) << prompt;
  }
  ApiRequest r = Completion(R"({"prompt": ["a", "b c"], "max_tokens": 3, "n": 2, "stream": true,
                                "stream_options": {"include_usage": true}, "echo": true})");
  EXPECT_EQ(r.prompts.size(), 2u);
  EXPECT_EQ(r.echo_texts, (std::vector<std::string>{"a", "b c"}));
  EXPECT_EQ(r.params.max_tokens, 3);
  EXPECT_EQ(r.params.n, 2);
  EXPECT_TRUE(r.stream && r.include_usage && r.echo);
  EXPECT_EQ(r.model, "");  // no model named: the served one
  EXPECT_EQ(Completion(R"({"prompt": "x"})").params.max_tokens, 16);  // OpenAI's completions default
}

TEST_F(ApiRequestTest, ChatUsesTheTemplateAndMaxCompletionTokens) {
  ParsedRequest parsed = ParseChatRequest(
      R"({"model": "tiny", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 9,
          "max_completion_tokens": 4, "logprobs": true, "top_logprobs": 3})",
      Context());
  ASSERT_TRUE(std::holds_alternative<ApiRequest>(parsed)) << std::get<ApiError>(parsed).message;
  const ApiRequest& r = std::get<ApiRequest>(parsed);
  // "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
  EXPECT_EQ(r.prompts.at(0).size(), 9u);
  EXPECT_EQ(r.params.max_tokens, 4);
  EXPECT_EQ(r.params.logprobs, 3);
  // Content parts become one string; no max_tokens: what the context leaves.
  parsed = ParseChatRequest(R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]})",
                            Context());
  ASSERT_TRUE(std::holds_alternative<ApiRequest>(parsed));
  EXPECT_EQ(std::get<ApiRequest>(parsed).prompts.at(0).size(), 9u);
  EXPECT_EQ(std::get<ApiRequest>(parsed).params.max_tokens, 64 - 9);
  // Tools reach the template (tool_choice "none": this context has no tool parser).
  parsed = ParseChatRequest(R"({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1, "tool_choice": "none",
                                "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]})",
                            [&] {
                              ParseContext c = Context();
                              c.max_model_len = 4096;
                              return c;
                            }());
  ASSERT_TRUE(std::holds_alternative<ApiRequest>(parsed)) << std::get<ApiError>(parsed).message;
  EXPECT_GT(std::get<ApiRequest>(parsed).prompts.at(0).size(), 30u);
}

TEST_F(ApiRequestTest, BadCompletionsNameTheField) {
  struct Case {
    const char* body;
    int status;
    const char* param;
  };
  const Case cases[] = {
      {"{oops", 400, ""},
      {"[1]", 400, ""},
      {R"({"prompt": "x", "temperature": "hot"})", 400, "temperature"},
      {R"({"prompt": "x", "temperature": -1})", 400, "temperature"},
      {R"({"prompt": "x", "top_p": 1.5})", 400, "top_p"},
      {R"({"prompt": "x", "max_tokens": -1})", 400, "max_tokens"},
      {R"({"prompt": "x", "max_tokens": 1e12})", 400, "max_tokens"},
      {R"({"prompt": "x", "n": 0})", 400, "n"},
      {R"({"prompt": "x", "logprobs": 21})", 400, "logprobs"},
      {R"({"prompt": "x", "stop": 5})", 400, "stop"},
      {R"({"prompt": "x", "logit_bias": {"abc": 1}})", 400, "logit_bias"},
      {R"({"prompt": "x", "suffix": "y"})", 400, "suffix"},
      {R"({"prompt": "x", "best_of": 3})", 400, "best_of"},
      {R"({"prompt": "x", "echo": true, "logprobs": 1})", 400, "echo"},
      {R"({"prompt": "x", "model": "other"})", 404, "model"},
      {R"({"prompt": "x", "model": 5})", 400, "model"},
      {R"({"prompt": "x", "stream": 1})", 400, "stream"},
      {R"({"prompt": "x", "stream_options": {"include_usage": "yes"}})", 400, "stream_options"},
      {R"({})", 400, "prompt"},
      {R"({"prompt": null})", 400, "prompt"},
      {R"({"prompt": ""})", 400, "prompt"},
      {R"({"prompt": []})", 400, "prompt"},
      {R"({"prompt": [[]]})", 400, "prompt"},
      {R"({"prompt": [1, "a"]})", 400, "prompt"},
      {R"({"prompt": [-1]})", 400, "prompt"},
      {R"({"prompt": [1.5]})", 400, "prompt"},
      {R"({"prompt": [99999999]})", 400, "prompt"},
      {R"({"prompt": {"a": 1}})", 400, "prompt"},

  };
  for (const Case& c : cases) {
    ApiError e = CompletionError(c.body);
    EXPECT_EQ(e.status, c.status) << c.body << ": " << e.message;
    EXPECT_EQ(e.param, c.param) << c.body << ": " << e.message;
    EXPECT_FALSE(e.message.empty()) << c.body;
  }
  EXPECT_NE(CompletionError("{\"prompt\": \"\xff\"}").message.find("UTF-8"), std::string::npos);
  // 65 tokens do not fit a context of 64.
  std::string words;
  for (int i = 0; i < 65; ++i) words += " word";
  const ApiError too_long = CompletionError(R"({"prompt": ")" + words + R"("})");
  EXPECT_EQ(too_long.param, "prompt");
  EXPECT_NE(too_long.message.find("maximum context length is 64"), std::string::npos) << too_long.message;
  // Unless truncation is asked for: the last tokens are kept.
  const ApiRequest truncated = Completion(R"({"truncate_prompt_tokens": 10, "prompt": ")" + words + R"("})");
  ASSERT_EQ(truncated.prompts.size(), 1u);
  const std::vector<int32_t> all = text_->EncodePrompt(words).value();
  EXPECT_EQ(truncated.prompts[0], std::vector<int32_t>(all.end() - 10, all.end()));
  EXPECT_EQ(CompletionError(R"({"prompt": "x", "truncate_prompt_tokens": 0})").param, "truncate_prompt_tokens");
  EXPECT_NE(CompletionError(R"({"model": "gpt-4", "prompt": "x"})").message.find("gpt-4"), std::string::npos);
}

TEST_F(ApiRequestTest, BadChatNamesTheField) {
  for (const char* body : {R"({})", R"({"messages": []})", R"({"messages": "hi"})", R"({"messages": [5]})",
                           R"({"messages": [{"content": "x"}]})", R"({"messages": [{"role": 1, "content": "x"}]})",
                           R"({"messages": [{"role": "user", "content": 5}]})",
                           R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})"}) {
    ApiError e = ChatError(body);
    EXPECT_EQ(e.status, 400) << body;
    EXPECT_EQ(e.param, "messages") << body << ": " << e.message;
  }
  EXPECT_EQ(ChatError(R"({"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": -1})").param,
            "max_completion_tokens");
  EXPECT_EQ(ChatError(R"({"messages": [{"role": "user", "content": "x"}], "tools": 5})").param, "tools");
  EXPECT_EQ(ChatError(R"({"messages": [{"role": "user", "content": "x"}], "model": "m"})").status, 404);
}

// Whether `r`'s grammar accepts exactly `text` (as a whole output).
bool GrammarAccepts(const ApiRequest& r, std::string_view text) {
  if (!r.params.grammar) return false;
  structured::GrammarMatcher m(r.params.grammar);
  return m.AcceptBytes(text) && m.CanEnd();
}

TEST_F(ApiRequestTest, StructuredOutputFieldsCompileToGrammars) {
  UseGrammars();
  const std::string chat = R"g("messages": [{"role": "user", "content": "x"}])g";
  auto parse_chat = [&](const std::string& fields) {
    ParsedRequest r = ParseChatRequest("{" + chat + ", " + fields + "}", Context());
    if (auto* e = std::get_if<ApiError>(&r)) ADD_FAILURE() << fields << ": " << e->message;
    return std::holds_alternative<ApiRequest>(r) ? std::get<ApiRequest>(r) : ApiRequest{};
  };
  const ApiRequest schema = parse_chat(R"g("response_format": {"type": "json_schema", "json_schema": {"name": "p",
      "strict": true, "schema": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"],
      "additionalProperties": false}}})g");
  EXPECT_TRUE(GrammarAccepts(schema, R"g({"a": 12})g"));
  EXPECT_FALSE(GrammarAccepts(schema, R"g({"a": "12"})g"));
  EXPECT_TRUE(GrammarAccepts(parse_chat(R"g("response_format": {"type": "json_object"})g"), R"g({"x": [1, {}]})g"));
  EXPECT_EQ(parse_chat(R"g("response_format": {"type": "text"})g").params.grammar, nullptr);
  EXPECT_TRUE(GrammarAccepts(parse_chat(R"g("structured_outputs": {"regex": "[a-c]{3}"})g"), "abc"));
  EXPECT_TRUE(GrammarAccepts(parse_chat(R"g("structured_outputs": {"choice": ["up", "down"]})g"), "down"));
  EXPECT_TRUE(GrammarAccepts(parse_chat(R"g("structured_outputs": {"grammar": "root ::= \"x\"+"})g"), "xxx"));
  EXPECT_TRUE(GrammarAccepts(parse_chat(R"g("structured_outputs": {"json": {"type": "boolean"}})g"), "true"));
  EXPECT_TRUE(GrammarAccepts(parse_chat(R"g("guided_json": {"enum": [1, 2]})g"), "2"));
  EXPECT_TRUE(GrammarAccepts(parse_chat(R"g("guided_regex": "\\d+")g"), "42"));
  EXPECT_TRUE(GrammarAccepts(parse_chat(R"g("guided_choice": ["a", "b"])g"), "b"));
  EXPECT_TRUE(GrammarAccepts(parse_chat(R"g("guided_grammar": "root ::= [0-9]")g"), "7"));
  // The same fields on completions.
  ParsedRequest c = ParseCompletionRequest(R"g({"prompt": "x", "guided_choice": ["yes", "no"]})g", Context());
  ASSERT_TRUE(std::holds_alternative<ApiRequest>(c));
  EXPECT_TRUE(GrammarAccepts(std::get<ApiRequest>(c), "no"));

  struct Bad {
    const char* fields;
    const char* param;
    const char* message_part;
  };
  const Bad bad[] = {
      {R"g("response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "object",
          "properties": {"t": {"type": "array", "uniqueItems": true}}}}})g",
       "response_format", "unsupported JSON Schema keyword 'uniqueItems' at #/properties/t"},
      {R"g("response_format": {"type": "yaml"})g", "response_format", "'yaml'"},
      {R"g("response_format": {"type": "json_schema"})g", "response_format", "json_schema"},
      {R"g("structured_outputs": {"regex": "(a"})g", "structured_outputs", "unclosed '('"},
      {R"g("structured_outputs": {"choice": []})g", "structured_outputs", "non-empty list"},
      {R"g("structured_outputs": {"grammar": "root ::= undefined-rule"})g", "structured_outputs",
       "rule 'undefined-rule' is used but never defined"},
      {R"g("structured_outputs": {"jsonn": {}})g", "structured_outputs", "unknown field 'jsonn'"},
      {R"g("guided_regex": "a(?=b)")g", "guided_regex", "lookaround"},
      {R"g("guided_json": {"$ref": "#/nowhere"})g", "guided_json", "does not resolve"},
      {R"g("guided_choice": ["a"], "guided_regex": "a")g", "guided_regex", "give only one"},
  };
  for (const Bad& b : bad) {
    const ApiError e = ChatError("{" + chat + ", " + b.fields + "}");
    EXPECT_EQ(e.status, 400) << b.fields;
    EXPECT_EQ(e.param, b.param) << b.fields << ": " << e.message;
    EXPECT_NE(e.message.find(b.message_part), std::string::npos) << e.message;
  }
  // parallm batch lines take the same fields.
  auto line = ParseBatchLine(R"g({"id": 1, "prompt": "x", "response_format": {"type": "json_object"}})g", 1,
                             text_->tokenizer()->size(), text_, ToolParser::kNone, grammars_);
  ASSERT_TRUE(line.ok()) << line.status().message();
  EXPECT_NE(line->params.grammar, nullptr);
  auto bad_line = ParseBatchLine(R"g({"prompt": "x", "guided_json": {"type": "array", "uniqueItems": true}})g", 1,
                                 text_->tokenizer()->size(), text_, ToolParser::kNone, grammars_);
  ASSERT_FALSE(bad_line.ok());
  EXPECT_EQ(bad_line.status().message(),
            "'guided_json': JSON schema: unsupported JSON Schema keyword 'uniqueItems' at #");
}

TEST(ParamOfMessageTest, FindsTheLeadingField) {
  EXPECT_EQ(ParamOfMessage("'top_p' must be a number"), "top_p");
  EXPECT_EQ(ParamOfMessage("temperature must be >= 0, got -1"), "temperature");
  EXPECT_EQ(ParamOfMessage("logit_bias token 5 is outside the vocabulary"), "logit_bias");
  EXPECT_EQ(ParamOfMessage("the prompt is empty"), "");
  EXPECT_EQ(ParamOfMessage(""), "");
}

}  // namespace
}  // namespace parallm::openai
