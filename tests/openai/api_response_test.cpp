// OpenAI response shapes, checked as exact JSON text: completion and chat objects, stream chunks, usage, both
// logprobs shapes, error bodies and SSE framing.
#include "openai/api_response.h"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "chat/model_text.h"
#include "test_paths.h"

namespace parallm::openai {
namespace {

std::string S(const boost::json::object& o) { return boost::json::serialize(o); }

ResponseMeta Meta(Api api, int32_t logprobs = -1) {
  ResponseMeta m;
  m.api = api;
  m.id = api == Api::kChat ? "chatcmpl-1" : "cmpl-1";
  m.created = 7;
  m.model = "tiny";
  m.logprobs = logprobs;
  return m;
}

TEST(ApiResponseTest, ErrorBodyIsOpenAis) {
  EXPECT_EQ(S(ErrorBody({400, "bad 'top_p'", "invalid_request_error", "top_p"})),
            R"({"error":{"message":"bad 'top_p'","type":"invalid_request_error","param":"top_p","code":null}})");
  EXPECT_EQ(S(ErrorBody({429, "full", "rate_limit_error", ""})),
            R"({"error":{"message":"full","type":"rate_limit_error","param":null,"code":null}})");
}

TEST(ApiResponseTest, UsageCarriesCachedTokens) {
  EXPECT_EQ(S(UsageJson({10, 3, 8})),
            R"({"prompt_tokens":10,"completion_tokens":3,"total_tokens":13,"prompt_tokens_details":{"cached_tokens":8}})");
}

TEST(ApiResponseTest, CompletionAndChatObjects) {
  std::vector<ChoiceResult> choices = {{0, "hi", 0, {}, FinishReason::kLength, {}},
                                       {1, "yo", 0, {}, FinishReason::kStop, {}}};
  EXPECT_EQ(S(CompletionResponse(Meta(Api::kCompletions), choices, {2, 2, 0}, nullptr)),
            R"({"id":"cmpl-1","object":"text_completion","created":7,"model":"tiny","choices":[)"
            R"({"index":0,"text":"hi","logprobs":null,"finish_reason":"length"},)"
            R"({"index":1,"text":"yo","logprobs":null,"finish_reason":"stop"}],)"
            R"("usage":{"prompt_tokens":2,"completion_tokens":2,"total_tokens":4,"prompt_tokens_details":{"cached_tokens":0}}})");
  choices.resize(1);
  EXPECT_EQ(S(CompletionResponse(Meta(Api::kChat), choices, {2, 1, 0}, nullptr)),
            R"({"id":"chatcmpl-1","object":"chat.completion","created":7,"model":"tiny","choices":[)"
            R"({"index":0,"message":{"role":"assistant","content":"hi"},"logprobs":null,"finish_reason":"length"}],)"
            R"("usage":{"prompt_tokens":2,"completion_tokens":1,"total_tokens":3,"prompt_tokens_details":{"cached_tokens":0}}})");
}

TEST(ApiResponseTest, ToolCallsInMessagesAndDeltas) {
  // A call alone: content null, finish_reason "tool_calls"; content before a call is kept.
  std::vector<ChoiceResult> choices = {
      {0, "", 0, {}, FinishReason::kStop, {{"call_1", "get_weather", R"({"city": "Paris"})"}}},
      {1, "Let me see.", 0, {}, FinishReason::kStop, {{"call_2", "f", "{}"}}}};
  EXPECT_EQ(S(CompletionResponse(Meta(Api::kChat), choices, {2, 2, 0}, nullptr)),
            R"({"id":"chatcmpl-1","object":"chat.completion","created":7,"model":"tiny","choices":[)"
            R"({"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function",)"
            R"("function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}]},"logprobs":null,)"
            R"("finish_reason":"tool_calls"},)"
            R"({"index":1,"message":{"role":"assistant","content":"Let me see.","tool_calls":[{"id":"call_2",)"
            R"("type":"function","function":{"name":"f","arguments":"{}"}}]},"logprobs":null,"finish_reason":"tool_calls"}],)"
            R"("usage":{"prompt_tokens":2,"completion_tokens":2,"total_tokens":4,"prompt_tokens_details":{"cached_tokens":0}}})");
  // Stream deltas: id, type and name first, then an arguments fragment; the last chunk says "tool_calls".
  EXPECT_EQ(S(ToolCallDelta(0, {"call_1", "f", ""})),
            R"({"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":""}})");
  EXPECT_EQ(S(ToolCallDelta(1, {"", "f", "{\"a\""})), R"({"index":1,"function":{"arguments":"{\"a\""}})");
  ChunkPart part;
  part.tool_calls.push_back(ToolCallDelta(0, {"", "f", "{}"}));
  int64_t offset = 0;
  EXPECT_EQ(S(StreamChunk(Meta(Api::kChat), part, nullptr, &offset, false)),
            R"({"id":"chatcmpl-1","object":"chat.completion.chunk","created":7,"model":"tiny","choices":[{"index":0,)"
            R"("delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]},"logprobs":null,"finish_reason":null}]})");
  ChunkPart last;
  last.finish_reason = FinishReason::kStop;
  last.called_tools = true;
  EXPECT_NE(S(StreamChunk(Meta(Api::kChat), last, nullptr, &offset, false)).find(R"("finish_reason":"tool_calls")"),
            std::string::npos);
}

TEST(ApiResponseTest, StreamChunksAndFraming) {
  ChunkPart role;
  role.role_only = true;
  int64_t offset = 0;
  EXPECT_EQ(SseEvent(StreamChunk(Meta(Api::kChat), role, nullptr, &offset, false)),
            "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":7,\"model\":\"tiny\","
            "\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"logprobs\":null,"
            "\"finish_reason\":null}]}\n\n");
  ChunkPart last;
  last.index = 2;
  last.finish_reason = FinishReason::kStop;
  EXPECT_EQ(S(StreamChunk(Meta(Api::kChat), last, nullptr, &offset, true)),
            R"({"id":"chatcmpl-1","object":"chat.completion.chunk","created":7,"model":"tiny","choices":[)"
            R"({"index":2,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null})");
  ChunkPart text;
  text.text = "ab";
  EXPECT_EQ(S(StreamChunk(Meta(Api::kCompletions), text, nullptr, &offset, false)),
            R"({"id":"cmpl-1","object":"text_completion","created":7,"model":"tiny","choices":[)"
            R"({"index":0,"text":"ab","logprobs":null,"finish_reason":null}]})");
  EXPECT_EQ(S(UsageChunk(Meta(Api::kCompletions), {1, 2, 0})),
            R"({"id":"cmpl-1","object":"text_completion","created":7,"model":"tiny","choices":[],)"
            R"("usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3,"prompt_tokens_details":{"cached_tokens":0}}})");
  EXPECT_EQ(kSseDone, "data: [DONE]\n\n");
  EXPECT_EQ(FinishReasonJson(FinishReason::kCancelled), "abort");
  EXPECT_TRUE(FinishReasonJson(FinishReason::kNone).is_null());
}

TEST(ApiResponseTest, LogprobsInBothShapes) {
  auto text = ModelText::ForModel("synthetic:tiny", testing::FixturePath("tokenizers/qwen3"));
  ASSERT_TRUE(text.ok()) << text.status().message();
  const Tokenizer* tok = text->tokenizer();
  const std::vector<int32_t> ids = text->EncodePrompt("Hello world é").value();  // "Hello", " world", " é"
  ASSERT_EQ(ids.size(), 3u);
  std::vector<SampleResult> samples;
  for (size_t i = 0; i < ids.size(); ++i)
    samples.push_back({ids[i], -0.5f * static_cast<float>(i), {{ids[i], -0.5f}, {ids[0], -std::numeric_limits<float>::infinity()}}});
  int64_t offset = 4;  // e.g. after an echoed 4-character prompt
  EXPECT_EQ(S(CompletionLogprobs(samples, tok, 2, &offset)),
            R"({"tokens":["Hello"," world"," é"],"token_logprobs":[-0E0,-5E-1,-1E0],"text_offset":[4,9,15],)"
            R"("top_logprobs":[{"Hello":-9.999E3},{" world":-5E-1,"Hello":-9.999E3},{" é":-5E-1,"Hello":-9.999E3}]})");
  EXPECT_EQ(offset, 17);  // " é" is 2 characters (3 bytes)
  // Only the chosen tokens: top_logprobs is null.
  offset = 0;
  EXPECT_TRUE(CompletionLogprobs(samples, tok, 0, &offset).at("top_logprobs").is_null());
  const auto chat = ChatLogprobs(std::span(samples).subspan(2), tok);
  EXPECT_EQ(S(chat), R"({"content":[{"token":" é","logprob":-1E0,"bytes":[32,195,169],"top_logprobs":[)"
                     R"({"token":" é","logprob":-5E-1,"bytes":[32,195,169]},)"
                     R"({"token":"Hello","logprob":-9.999E3,"bytes":[72,101,108,108,111]}]}]})");
  EXPECT_EQ(TokenString(nullptr, 42), "token_id:42");
  EXPECT_EQ(Utf8Length("aé€😀"), 4);
}

}  // namespace
}  // namespace parallm::openai
