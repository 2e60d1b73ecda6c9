// Every (template, conversation) pair of tests/chat/conversations.json renders byte for byte as @huggingface/jinja
// rendered it into tests/chat/golden/<template>.json; where the reference raised, parallm must fail too.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <boost/json.hpp>

#include "chat/chat_template.h"
#include "chat_test_util.h"
#include "test_paths.h"

namespace parallm::chat {
namespace {

using test_util::ReadFile;

boost::json::value ReadJson(const std::string& path) {
  std::string text = ReadFile(path);
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(text, ec);
  if (ec) ADD_FAILURE() << path << ": " << ec.message();
  return v;
}

const boost::json::object& Doc() {
  static const boost::json::value doc = ReadJson(std::string(PARALLM_CHAT_TEST_DIR) + "/conversations.json");
  static const boost::json::object empty;
  return doc.is_object() ? doc.get_object() : empty;
}

struct Pair {
  size_t template_index;
  size_t conversation_index;
  std::string name;  // <template>__<conversation>, as a gtest name
};

void PrintTo(const Pair& pair, std::ostream* os) { *os << pair.name; }

std::vector<Pair> AllPairs() {
  std::vector<Pair> pairs;
  if (!Doc().contains("templates")) return pairs;
  const auto& templates = Doc().at("templates").get_array();
  const auto& conversations = Doc().at("conversations").get_array();
  for (size_t t = 0; t < templates.size(); ++t) {
    for (size_t c = 0; c < conversations.size(); ++c) {
      std::string name = std::string(templates[t].at("name").get_string()) + "__" +
                         std::string(conversations[c].at("name").get_string());
      for (char& ch : name) {
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      }
      pairs.push_back(Pair{t, c, name});
    }
  }
  return pairs;
}

// The template source and the context tokens of one manifest entry, read the way render.mjs reads them.
struct TemplateUnderTest {
  std::string name;
  std::string source;
  boost::json::object tokens;  // bos_token / eos_token when not null
};

TemplateUnderTest LoadTemplate(const boost::json::object& entry) {
  TemplateUnderTest t;
  t.name = std::string(entry.at("name").get_string());
  boost::json::object config;
  bool have_config = false;
  if (const auto* path = entry.if_contains("config")) {
    config = ReadJson(testing::FixturePath(std::string(path->get_string()))).get_object();
    have_config = true;
    auto source = ChatTemplateFromConfig(config);
    EXPECT_TRUE(source.ok()) << source.status().message();
    if (source.ok()) t.source = *source;
  } else {
    t.source = ReadFile(testing::FixturePath(std::string(entry.at("file").get_string())));
    EXPECT_FALSE(t.source.empty()) << t.name;
    if (const auto* path = entry.if_contains("tokens_from")) {
      config = ReadJson(testing::FixturePath(std::string(path->get_string()))).get_object();
      have_config = true;
    }
  }
  for (const char* key : {"bos_token", "eos_token"}) {
    std::string value;
    if (have_config) {
      value = SpecialTokenFromConfig(config, key);
    } else if (const auto* v = entry.if_contains(key); v && v->is_string()) {
      value = std::string(v->get_string());
    }
    if (!value.empty()) t.tokens[key] = value;
  }
  return t;
}

RenderOptions GoldenNow() { return test_util::FixedNowFrom(Doc()); }

class GoldenTest : public ::testing::TestWithParam<Pair> {};

TEST_P(GoldenTest, RendersLikeHuggingfaceJinja) {
  const Pair& pair = GetParam();
  const auto& tmpl_entry = Doc().at("templates").get_array()[pair.template_index].get_object();
  const auto& conv = Doc().at("conversations").get_array()[pair.conversation_index].get_object();
  TemplateUnderTest tmpl = LoadTemplate(tmpl_entry);
  std::string conv_name(conv.at("name").get_string());

  boost::json::value golden_doc = ReadJson(std::string(PARALLM_CHAT_TEST_DIR) + "/golden/" + tmpl.name + ".json");
  ASSERT_TRUE(golden_doc.is_object()) << "missing golden file for " << tmpl.name;
  const auto* golden = golden_doc.get_object().at("results").get_object().if_contains(conv_name);
  ASSERT_NE(golden, nullptr) << "golden/" << tmpl.name << ".json has no result for " << conv_name
                             << " (regenerate with node tests/chat/node/render.mjs)";

  boost::json::object context;
  context["messages"] = conv.at("messages");
  context["add_generation_prompt"] = conv.at("add_generation_prompt");
  if (const auto* tools = conv.if_contains("tools")) context["tools"] = *tools;
  for (const auto& kv : tmpl.tokens) context[kv.key()] = kv.value();
  if (const auto* extra = conv.if_contains("extra")) {
    for (const auto& kv : extra->get_object()) context[kv.key()] = kv.value();
  }

  Result<std::string> rendered = Status::Error("not rendered");
  auto parsed = ChatTemplate::Parse(tmpl.source);
  if (parsed.ok()) {
    rendered = parsed->Render(context, GoldenNow());
  } else {
    rendered = parsed.status();
  }
  const auto& expected = golden->get_object();
  if (const auto* error = expected.if_contains("error")) {
    EXPECT_FALSE(rendered.ok()) << "the reference failed with \"" << error->get_string()
                                << "\" but parallm rendered:\n" << (rendered.ok() ? *rendered : "");
  } else {
    ASSERT_TRUE(rendered.ok()) << rendered.status().message();
    EXPECT_EQ(*rendered, std::string(expected.at("output").get_string()));
  }
}

INSTANTIATE_TEST_SUITE_P(AllPairs, GoldenTest, ::testing::ValuesIn(AllPairs()),
                         [](const ::testing::TestParamInfo<Pair>& info) { return info.param.name; });

// The goldens cover the whole manifest: a template or conversation without a golden is a failure, not a skip.
TEST(GoldenFiles, CoverEveryPair) {
  const auto& templates = Doc().at("templates").get_array();
  const auto& conversations = Doc().at("conversations").get_array();
  EXPECT_GE(templates.size(), 13u);
  EXPECT_GE(conversations.size(), 20u);
  for (const auto& t : templates) {
    std::string name(t.at("name").get_string());
    boost::json::value golden = ReadJson(std::string(PARALLM_CHAT_TEST_DIR) + "/golden/" + name + ".json");
    ASSERT_TRUE(golden.is_object()) << name;
    EXPECT_EQ(golden.get_object().at("results").get_object().size(), conversations.size()) << name;
  }
}

}  // namespace
}  // namespace parallm::chat
