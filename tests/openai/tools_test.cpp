// Tools in chat requests: tools / tool_choice / parallel_tool_calls and tool messages parsed or refused naming the
// field; OpenAI-shaped conversations (arguments as JSON strings) render exactly as the reference renders the same
// conversation (tests/chat/golden, @huggingface/jinja) with the Hermes, Qwen2.5, Llama 3.1 and Mistral templates;
// a forced tool_choice ends the prompt with the call's opening.
#include "openai/tools.h"

#include <gtest/gtest.h>

#include "chat/chat_template.h"
#include "openai/api_request.h"
#include "openai/request_json.h"
#include "test_paths.h"
#include "../chat/chat_test_util.h"

namespace parallm::openai {
namespace {

boost::json::object Body(const std::string& json) { return boost::json::parse(json).as_object(); }

ToolsError ToolsErrorOf(const std::string& json) {
  auto r = ParseTools(Body(json));
  EXPECT_TRUE(std::holds_alternative<ToolsError>(r)) << json;
  return std::holds_alternative<ToolsError>(r) ? std::get<ToolsError>(r) : ToolsError{};
}

constexpr const char* kWeather =
    R"({"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        "strict": true}})";

TEST(ToolsTest, ParsesToolsAndChoices) {
  auto r = ParseTools(Body(std::string(R"({"tools": [)") + kWeather + "]}"));
  ASSERT_TRUE(std::holds_alternative<ToolsRequest>(r));
  const ToolsRequest& t = std::get<ToolsRequest>(r);
  ASSERT_EQ(t.functions.size(), 1u);
  EXPECT_EQ(t.functions[0].name, "get_weather");
  EXPECT_EQ(t.functions[0].description, "Weather in a city");
  EXPECT_TRUE(t.functions[0].strict);
  EXPECT_TRUE(t.functions[0].parameters.is_object());
  EXPECT_EQ(t.choice, ToolChoice::kAuto);  // the default with tools
  EXPECT_TRUE(t.parallel_tool_calls);
  EXPECT_TRUE(t.parses_calls());
  EXPECT_EQ(std::get<ToolsRequest>(ParseTools(Body("{}"))).choice, ToolChoice::kNone);  // and without
  for (auto [choice, want] : {std::pair{R"("none")", ToolChoice::kNone}, {R"("auto")", ToolChoice::kAuto},
                              {R"("required")", ToolChoice::kRequired},
                              {R"({"type": "function", "function": {"name": "get_weather"}})", ToolChoice::kNamed}}) {
    auto c = ParseTools(Body(std::string(R"({"tools": [)") + kWeather + R"(], "parallel_tool_calls": false,
                                "tool_choice": )" + choice + "}"));
    ASSERT_TRUE(std::holds_alternative<ToolsRequest>(c)) << choice;
    EXPECT_EQ(std::get<ToolsRequest>(c).choice, want);
    EXPECT_FALSE(std::get<ToolsRequest>(c).parallel_tool_calls);
  }
}

TEST(ToolsTest, BadShapesNameTheField) {
  const std::string tools = std::string(R"("tools": [)") + kWeather + "]";
  const struct {
    std::string body;
    std::string param;
    std::string message_part;
  } cases[] = {
      {R"({"tools": {}})", "tools", "list"},
      {R"({"tools": [5]})", "tools", "tools[0]"},
      {R"({"tools": [{"type": "retrieval"}]})", "tools", "tools[0].type"},
      {R"({"tools": [{"type": "function"}]})", "tools", "tools[0].function"},
      {R"({"tools": [{"type": "function", "function": {"name": "has space"}}]})", "tools", "tools[0].function.name"},
      {R"({"tools": [{"type": "function", "function": {"name": "f", "parameters": []}}]})", "tools", "parameters"},
      {R"({"tools": [{"type": "function", "function": {"name": "f", "strict": 1}}]})", "tools", "strict"},
      {R"({"tools": [{"type": "function", "function": {"name": "f"}}, {"type": "function", "function": {"name": "f"}}]})",
       "tools", "twice"},
      {"{" + tools + R"(, "tool_choice": "sometimes"})", "tool_choice", "tool_choice"},
      {"{" + tools + R"(, "tool_choice": {"type": "function", "function": {"name": "other"}}})", "tool_choice", "other"},
      {"{" + tools + R"(, "tool_choice": {"type": "function"}})", "tool_choice", "tool_choice"},
      {R"({"tool_choice": "required"})", "tool_choice", "needs 'tools'"},
      {"{" + tools + R"(, "parallel_tool_calls": "yes"})", "parallel_tool_calls", "parallel_tool_calls"},
  };
  for (const auto& c : cases) {
    ToolsError e = ToolsErrorOf(c.body);
    EXPECT_EQ(e.param, c.param) << c.body;
    EXPECT_NE(e.message.find(c.message_part), std::string::npos) << c.body << ": " << e.message;
  }
}

TEST(ToolsTest, ToolMessagesAreCheckedAndArgumentsBecomeObjects) {
  boost::json::object assistant = Body(R"({"role": "assistant", "content": null, "tool_calls": [{"id": "call_1",
      "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"n\": 2}"}}]})");
  EXPECT_FALSE(NormalizeToolMessage(assistant, 1).has_value());
  const auto& args = assistant.at("tool_calls").as_array()[0].at("function").at("arguments");
  ASSERT_TRUE(args.is_object());
  EXPECT_EQ(boost::json::serialize(args), R"({"city":"Paris","n":2})");
  boost::json::object tool = Body(R"({"role": "tool", "tool_call_id": "call_1", "content": "sunny"})");
  EXPECT_FALSE(NormalizeToolMessage(tool, 2).has_value());
  const struct {
    const char* message;
    const char* part;
  } bad[] = {
      {R"({"role": "tool", "content": "x"})", "messages[3]: a 'tool' message needs a string 'tool_call_id'"},
      {R"({"role": "user", "content": "x", "tool_calls": []})", "only assistant"},
      {R"({"role": "assistant", "tool_calls": {}})", "messages[3].tool_calls must be a list"},
      {R"({"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "f"}}]})", "tool_calls[0].id"},
      {R"({"role": "assistant", "tool_calls": [{"id": "a", "function": {"arguments": "{}"}}]})", "function.name"},
      {R"({"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "{oops"}}]})",
       "function.arguments must be a JSON string"},
  };
  for (const auto& b : bad) {
    boost::json::object m = Body(b.message);
    auto e = NormalizeToolMessage(m, 3);
    ASSERT_TRUE(e.has_value()) << b.message;
    EXPECT_NE(e->find(b.part), std::string::npos) << *e;
  }
}

// The golden conversation with object arguments, sent as OpenAI sends it (arguments as JSON text), normalized as
// the server does, renders byte for byte as the reference rendered the original.
TEST(ToolsTest, OpenAiShapedConversationsRenderAsTheReference) {
  using chat::test_util::ReadFile;
  const std::string chat_dir = PARALLM_CHAT_TEST_DIR;
  const boost::json::object doc = boost::json::parse(ReadFile(chat_dir + "/conversations.json")).as_object();
  const struct {
    const char* golden;
    const char* file;
    const char* bos;
    const char* eos;
  } templates[] = {
      {"hermes-3-llama-3.1-tool-use", "chat-templates/NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja",
       "<|begin_of_text|>", "<|im_end|>"},
      {"qwen2.5-instruct", "chat-templates/Qwen-Qwen2.5-7B-Instruct.jinja", nullptr, nullptr},
      {"llama-3.1-instruct", "chat-templates/meta-llama-Llama-3.1-8B-Instruct.jinja", "<|begin_of_text|>",
       "<|eot_id|>"},
      {"mistral-nemo-instruct", "chat-templates/mistralai-Mistral-Nemo-Instruct-2407.jinja", "<s>", "</s>"},
  };
  int compared = 0;
  for (const char* conversation : {"tool_call_object_arguments", "simple_tool_round_trip", "parallel_tool_calls"}) {
    const boost::json::object* conv = nullptr;
    for (const auto& c : doc.at("conversations").as_array())
      if (c.at("name").as_string() == conversation) conv = &c.as_object();
    ASSERT_NE(conv, nullptr) << conversation;
    // As a client sends it: arguments serialized to JSON text.
    boost::json::array messages = conv->at("messages").as_array();
    for (size_t i = 0; i < messages.size(); ++i) {
      boost::json::object& m = messages[i].as_object();
      if (auto* calls = m.if_contains("tool_calls"))
        for (auto& call : calls->as_array()) {
          auto& fn = call.as_object().at("function").as_object();
          ASSERT_TRUE(fn.at("arguments").is_object()) << conversation;
          fn["arguments"] = boost::json::serialize(fn.at("arguments"));
        }
      ASSERT_FALSE(NormalizeToolMessage(m, i).has_value()) << conversation;
    }
    for (const auto& t : templates) {
      const boost::json::object golden =
          boost::json::parse(ReadFile(chat_dir + "/golden/" + t.golden + ".json")).as_object();
      const boost::json::object& expected = golden.at("results").at(conversation).as_object();
      boost::json::object extra{{"add_generation_prompt", conv->at("add_generation_prompt")},
                                {"tools", conv->at("tools")}};
      if (t.bos) extra["bos_token"] = t.bos;
      if (t.eos) extra["eos_token"] = t.eos;
      auto rendered = chat::ApplyChatTemplate(ReadFile(testing::FixturePath(t.file)), messages, extra,
                                              chat::test_util::FixedNowFrom(doc));
      if (expected.contains("error")) {
        EXPECT_FALSE(rendered.ok()) << t.golden << " / " << conversation;
      } else {
        ASSERT_TRUE(rendered.ok()) << t.golden << " / " << conversation << ": " << rendered.status().message();
        EXPECT_EQ(*rendered, expected.at("output").as_string()) << t.golden << " / " << conversation;
        ++compared;
      }
    }
  }
  EXPECT_GE(compared, 9);
}

// Through ParseChatRequest with Qwen3's tokenizer and template (which writes <tool_call> calls).
class ToolsRequestTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto text = ModelText::ForModel("synthetic:tiny", testing::FixturePath("tokenizers/qwen3"));
    ASSERT_TRUE(text.ok()) << text.status().message();
    text_ = new ModelText(std::move(*text));
    grammars_ = new structured::GrammarCompiler(
        structured::TokenVocab::FromTokenizer(*text_->tokenizer(), text_->tokenizer()->size()));
  }
  static void TearDownTestSuite() {
    delete grammars_;
    delete text_;
  }
  ParseContext Context(ToolParser parser, bool auto_choice) const {
    ParseContext c;
    c.grammars = grammars_;
    c.vocab_size = text_->tokenizer()->size();
    c.max_model_len = 4096;
    c.text = text_;
    c.tool_parser = parser;
    c.auto_tool_choice = auto_choice;
    return c;
  }
  static ModelText* text_;
  static structured::GrammarCompiler* grammars_;
};
ModelText* ToolsRequestTest::text_ = nullptr;
structured::GrammarCompiler* ToolsRequestTest::grammars_ = nullptr;

TEST_F(ToolsRequestTest, ChoicesAgainstTheServersParser) {
  const std::string head = std::string(R"({"max_tokens": 8, "messages": [{"role": "user", "content": "Weather?"}],
                                           "tools": [)") + kWeather + "]";
  auto parse = [&](const std::string& body, ToolParser parser, bool auto_choice) {
    return ParseChatRequest(body, Context(parser, auto_choice));
  };
  // "auto" (explicit or by default) needs --enable-auto-tool-choice, as in vLLM.
  for (const std::string& body : {head + "}", head + R"(, "tool_choice": "auto"})"}) {
    ParsedRequest refused = parse(body, ToolParser::kHermes, false);
    ASSERT_TRUE(std::holds_alternative<ApiError>(refused));
    EXPECT_EQ(std::get<ApiError>(refused).param, "tool_choice");
    EXPECT_NE(std::get<ApiError>(refused).message.find("--enable-auto-tool-choice"), std::string::npos);
    ParsedRequest ok = parse(body, ToolParser::kHermes, true);
    ASSERT_TRUE(std::holds_alternative<ApiRequest>(ok));
    EXPECT_EQ(std::get<ApiRequest>(ok).tool_parser, ToolParser::kHermes);
    EXPECT_EQ(std::get<ApiRequest>(ok).tool_opening, "");
    // get_weather is strict: its calls are constrained, the text around them is not (tool_grammar_test).
    EXPECT_NE(std::get<ApiRequest>(ok).params.grammar, nullptr);
  }
  // "none": tools rendered, answers not parsed.
  ParsedRequest none = parse(head + R"(, "tool_choice": "none"})", ToolParser::kNone, false);
  ASSERT_TRUE(std::holds_alternative<ApiRequest>(none));
  EXPECT_EQ(std::get<ApiRequest>(none).tool_parser, ToolParser::kNone);
  // A named function: the prompt ends with the call's opening.
  const std::string named = head + R"(, "tool_choice": {"type": "function", "function": {"name": "get_weather"}}})";
  ParsedRequest refused = parse(named, ToolParser::kNone, false);
  ASSERT_TRUE(std::holds_alternative<ApiError>(refused));
  EXPECT_NE(std::get<ApiError>(refused).message.find("--tool-call-parser"), std::string::npos);
  ParsedRequest forced = parse(named, ToolParser::kHermes, false);
  ASSERT_TRUE(std::holds_alternative<ApiRequest>(forced));
  const ApiRequest& r = std::get<ApiRequest>(forced);
  EXPECT_EQ(r.tool_opening, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ");
  EXPECT_NE(r.params.grammar, nullptr);  // the arguments follow the schema
  // A forced call and response_format both constrain the answer: refused, naming tool_choice.
  ParsedRequest both = parse(named.substr(0, named.size() - 1) + R"(, "response_format": {"type": "json_object"}})",
                             ToolParser::kHermes, false);
  ASSERT_TRUE(std::holds_alternative<ApiError>(both));
  EXPECT_EQ(std::get<ApiError>(both).param, "tool_choice");
  const std::string prompt = text_->tokenizer()->Decode(r.prompts.at(0), /*skip_special=*/false);
  const std::string tail = "<|im_start|>assistant\n" + r.tool_opening;
  ASSERT_GE(prompt.size(), tail.size());
  EXPECT_EQ(prompt.substr(prompt.size() - tail.size()), tail);
  EXPECT_NE(prompt.find("\"name\": \"get_weather\", \"description\""), std::string::npos);  // the tool list
  // Tool messages in the conversation are checked.
  ParsedRequest bad = parse(R"({"tool_choice": "none", "messages": [{"role": "user", "content": "x"},
                                {"role": "tool", "content": "42"}]})",
                            ToolParser::kHermes, true);
  ASSERT_TRUE(std::holds_alternative<ApiError>(bad));
  EXPECT_EQ(std::get<ApiError>(bad).param, "messages");
}

// Mistral's [TOOL_CALLS] is a special token: the mistral parser keeps special tokens in the text whenever it parses
// calls (vLLM's MistralToolParser.adjust_request); otherwise skip_special_tokens is the request's (default true).
TEST_F(ToolsRequestTest, MistralParserKeepsSpecialTokens) {
  const std::string head = std::string(R"({"max_tokens": 8, "messages": [{"role": "user", "content": "Weather?"}],
                                           "tools": [)") + kWeather + "]";
  auto skips = [&](const std::string& body, ToolParser parser) {
    ParsedRequest r = ParseChatRequest(body, Context(parser, true));
    if (auto* e = std::get_if<ApiError>(&r)) ADD_FAILURE() << body << ": " << e->message;
    return std::holds_alternative<ApiRequest>(r) && std::get<ApiRequest>(r).params.skip_special_tokens;
  };
  EXPECT_FALSE(skips(head + "}", ToolParser::kMistral));
  EXPECT_FALSE(skips(head + R"(, "skip_special_tokens": true})", ToolParser::kMistral));
  EXPECT_FALSE(skips(head + R"(, "tool_choice": "required"})", ToolParser::kMistral));
  EXPECT_TRUE(skips(head + R"(, "tool_choice": "none"})", ToolParser::kMistral));
  EXPECT_TRUE(skips(head + "}", ToolParser::kHermes));
  EXPECT_FALSE(skips(head + R"(, "skip_special_tokens": false})", ToolParser::kHermes));
  const std::string plain = R"({"messages": [{"role": "user", "content": "x"}], "skip_special_tokens": )";
  EXPECT_TRUE(skips(plain + "null}", ToolParser::kMistral));
  ParsedRequest bad = ParseChatRequest(plain + R"("no"})", Context(ToolParser::kNone, false));
  ASSERT_TRUE(std::holds_alternative<ApiError>(bad));
  EXPECT_EQ(std::get<ApiError>(bad).param, "skip_special_tokens");
  // Completions and batch lines read the field too (ParseSamplingParams).
  auto line = ParseBatchLine(R"({"prompt_ids": [1], "skip_special_tokens": false})", 1, text_->tokenizer()->size(),
                             text_);
  ASSERT_TRUE(line.ok()) << line.status().message();
  EXPECT_FALSE(line->params.skip_special_tokens);
}

}  // namespace
}  // namespace parallm::openai
