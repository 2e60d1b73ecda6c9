// Interpreter unit tests: every case of interpreter_cases.json (each construct, checked against @huggingface/jinja
// by node/check_cases.mjs), error positions, malformed templates that must fail cleanly, limits, and the API.
#include <gtest/gtest.h>

#include <ctime>
#include <fstream>
#include <sstream>
#include <string>

#include <boost/json.hpp>

#include "chat/chat_template.h"
#include "chat_test_util.h"
#include "test_paths.h"

namespace parallm::chat {
namespace {

using test_util::ReadFile;

const boost::json::object& CasesDoc() {
  static const boost::json::value doc =
      boost::json::parse(ReadFile(std::string(PARALLM_CHAT_TEST_DIR) + "/interpreter_cases.json"));
  return doc.get_object();
}

RenderOptions CasesNow() { return test_util::FixedNowFrom(CasesDoc()); }

Result<std::string> Render(const std::string& source, const boost::json::object& context = {}) {
  PARALLM_ASSIGN_OR_RETURN(ChatTemplate tmpl, ChatTemplate::Parse(source));
  return tmpl.Render(context, CasesNow());
}

std::string ErrorOf(const std::string& source, const boost::json::object& context = {}) {
  Result<std::string> r = Render(source, context);
  EXPECT_FALSE(r.ok()) << "rendered: " << (r.ok() ? *r : "");
  return r.status().message();
}

// --- every construct, against the reference ----------------------------------------------------------------------

TEST(InterpreterCases, AllRenderAsExpected) {
  const auto& cases = CasesDoc().at("cases").get_array();
  ASSERT_GE(cases.size(), 100u);
  for (const auto& item : cases) {
    const auto& c = item.get_object();
    std::string name(c.at("name").get_string());
    boost::json::object context;
    if (const auto* ctx = c.if_contains("context")) context = ctx->get_object();
    Result<std::string> r = Render(std::string(c.at("template").get_string()), context);
    if (c.contains("error")) {
      EXPECT_FALSE(r.ok()) << name << " should fail but rendered: " << (r.ok() ? *r : "");
    } else {
      ASSERT_TRUE(r.ok()) << name << ": " << r.status().message();
      EXPECT_EQ(*r, std::string(c.at("output").get_string())) << name;
    }
  }
}

// --- whitespace control --------------------------------------------------------------------------------------------

TEST(Whitespace, DashesStripBothSidesIncludingNewlines) {
  EXPECT_EQ(*Render("a \n {{- 'b' -}} \n c"), "abc");
  EXPECT_EQ(*Render("a \n {%- if true -%} \n b \n {%- endif -%} \n c"), "abc");
  EXPECT_EQ(*Render("a {#- note -#} b"), "ab");
}

TEST(Whitespace, TrimBlocksEatsOneNewlineAfterATag) {
  EXPECT_EQ(*Render("{% if true %}\nyes\n{% endif %}\nafter"), "yes\nafter");
  EXPECT_EQ(*Render("{# c #}\n\nx"), "\nx");
  EXPECT_EQ(*Render("{{ 'e' }}\nx"), "e\nx");  // not after expressions
}

TEST(Whitespace, LstripBlocksOnlyBeforeStatementsAndComments) {
  EXPECT_EQ(*Render("  \t{% if true %}x{% endif %}"), "x");
  EXPECT_EQ(*Render("  {{ 'x' }}"), "  x");
  EXPECT_EQ(*Render("a  {% if true %}x{% endif %}"), "a  x");  // text before the tag on its line
  EXPECT_EQ(*Render("line\n    {# c #}\nnext"), "line\nnext");
}

TEST(Whitespace, SingleTrailingNewlineIsDropped) {
  EXPECT_EQ(*Render("x\n"), "x");
  EXPECT_EQ(*Render("x\n\n"), "x\n");
}

// --- error positions ----------------------------------------------------------------------------------------------

TEST(ErrorPositions, SyntaxErrorsNameTheConstructAndLineColumn) {
  EXPECT_EQ(ErrorOf("{% for x in xs %}\n{{ x }}"),
            "chat template syntax error at 2:8: expected {% endfor %} to close the 'for' at 1:1, found the end of the "
            "template");
  EXPECT_EQ(ErrorOf("ok\n  {% if x %}{% endfor %}"),
            "chat template syntax error at 2:13: unexpected {% endfor %} without a matching opening tag");
  EXPECT_EQ(ErrorOf("{{ 'abc }}"), "chat template syntax error at 1:4: unterminated string literal");
  EXPECT_EQ(ErrorOf("a\nb {% frobnicate %}"), "chat template syntax error at 2:3: unknown statement 'frobnicate'");
  EXPECT_EQ(ErrorOf("{{ x + }}"), "chat template syntax error at 1:8: unexpected '}}' in an expression");
  EXPECT_EQ(ErrorOf("{{ x @ y }}"), "chat template syntax error at 1:6: unexpected character '@'");
  EXPECT_EQ(ErrorOf("{% if x %}{{ y }}{% else %}"),
            "chat template syntax error at 1:28: expected {% endif %} to close the 'if' at 1:1, found the end of the "
            "template");
}

TEST(ErrorPositions, ColumnsCountCodePoints) {
  EXPECT_EQ(ErrorOf("日本語 {% nope %}"), "chat template syntax error at 1:5: unknown statement 'nope'");
}

TEST(ErrorPositions, RenderErrorsPointAtTheFailingExpression) {
  EXPECT_EQ(ErrorOf("line one\n  {{ raise_exception('Roles must alternate') }}"),
            "chat template render error at 2:6: Roles must alternate");
  boost::json::object ctx{{"x", boost::json::object{}}};
  EXPECT_EQ(ErrorOf("{{ x.y + 1 }}", ctx), "chat template render error at 1:8: Cannot perform operation + on undefined values");
  EXPECT_EQ(ErrorOf("{% for m in 3 %}{% endfor %}"),
            "chat template render error at 1:1: Expected iterable or object type in for loop: got IntegerValue");
  EXPECT_EQ(ErrorOf("{{ 'x' | frob }}"), "chat template render error at 1:8: Unknown StringValue filter: frob");
}

TEST(ErrorPositions, PreprocessingDoesNotShiftPositions) {
  // lstrip_blocks and trim_blocks delete characters before the error; positions still refer to the source.
  EXPECT_EQ(ErrorOf("{% if true %}\n    {% if true %}\n        {{ raise_exception('deep') }}\n{% endif %}{% endif %}"),
            "chat template render error at 3:12: deep");
}

// --- malformed templates fail cleanly (and do not crash under ASan) ---------------------------------------------------

TEST(Malformed, EveryEntryIsACleanError) {
  const char* kMalformed[] = {
      "{%", "{{", "{#", "{{ x", "{{ x }", "{% if %}", "{% if x %}", "{% for %}", "{% for x in %}{% endfor %}",
      "{% for 1 in xs %}{% endfor %}", "{% for x xs %}{% endfor %}", "{{ (((( }}", "{{ [1, 2 }}", "{{ {'a': }}",
      "{{ {'a' 1} }}", "{% set %}", "{% set x %}never closed", "{% macro %}", "{% macro f( %}{% endmacro %}",
      "{% macro 1() %}{% endmacro %}", "{% endif %}", "{% else %}", "{% elif x %}", "{# unterminated",
      "{{ 'a\\q' }}", "{{ '\\x4' }}", "{{ '\\u12' }}", "{{ 'abc", "{{ x | }}", "{{ x | 1 }}", "{{ x is }}",
      "{{ x is 1 }}", "{{ a[] }}", "{{ a[1:2:3:4] }}", "{% call %}", "{% call f() %}", "{% filter %}",
      "{{ f(a=1, 2) }}", "{% macro f(a=1, b) %}{% endmacro %}", "{% macro f(a, a) %}{% endmacro %}",
      "{{ f(*a, *b) }}", "{{ f(**a, b) }}", "{{ 1 + }}", "{{ - }}", "{%- -%}", "{% 1 %}", "{{ x.( }}",
      "{{ x. }}", "{{ 'a' ~ }}", "{{ not }}", "{{ a if }}", "{{ a if b else }}", "{% break x %}", "{{ ! }}",
      "{{ x }}{% endfor %}", "{% if x %}{% elif %}{% endif %}", "{% for x in y %}{% else %}", "{{ \"\\",
      "{{ x[ }}", "{{ x[1 }}", "{{ f(1 }}", "{{ f(x=) }}", "{% set x = %}", "{% set x = 1", "{{ 1 2 3 ",
  };
  for (const char* source : kMalformed) {
    Result<std::string> r = Render(source);
    EXPECT_FALSE(r.ok()) << "'" << source << "' rendered: " << (r.ok() ? *r : "");
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find("chat template"), std::string::npos) << source;
    }
  }
}

TEST(Malformed, DeepNestingIsAnErrorNotAStackOverflow) {
  std::string parens = "{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}";
  EXPECT_NE(ErrorOf(parens).find("nesting deeper than"), std::string::npos);
  std::string ifs;
  for (int i = 0; i < 2000; ++i) ifs += "{% if true %}";
  EXPECT_NE(ErrorOf(ifs).find("nesting deeper than"), std::string::npos);
  std::string many_nots;
  for (int i = 0; i < 3000; ++i) many_nots += "not ";
  EXPECT_NE(ErrorOf("{{ " + many_nots + "x }}").find("nesting deeper than"), std::string::npos);
}

TEST(Malformed, RunawayRecursionAndStrayLoopControlFail) {
  EXPECT_NE(ErrorOf("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}").find("nested deeper than"), std::string::npos);
  EXPECT_NE(ErrorOf("{% break %}").find("outside of a loop"), std::string::npos);
  EXPECT_NE(ErrorOf("{{ range(100000000)|length }}").find("range()"), std::string::npos);
}

// Every prefix of every real template either parses or fails cleanly; those that parse render or fail cleanly.
TEST(Malformed, TruncatedRealTemplates) {
  const char* kFiles[] = {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", "Qwen-Qwen2.5-7B-Instruct.jinja",
                          "meta-llama-Llama-3.1-8B-Instruct.jinja", "mistralai-Mistral-Nemo-Instruct-2407.jinja",
                          "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja"};
  boost::json::object ctx{{"messages", boost::json::array{boost::json::object{{"role", "user"}, {"content", "hi"}}}},
                          {"add_generation_prompt", true}};
  int parsed = 0, failed = 0;
  for (const char* file : kFiles) {
    std::string source = ReadFile(testing::FixturePath(std::string("chat-templates/") + file));
    ASSERT_FALSE(source.empty()) << file;
    for (size_t len = 0; len <= source.size(); len += 17) {
      auto tmpl = ChatTemplate::Parse(source.substr(0, len));
      if (!tmpl.ok()) {
        ++failed;
        continue;
      }
      ++parsed;
      (void)tmpl->Render(ctx);
    }
  }
  EXPECT_GT(parsed, 0);
  EXPECT_GT(failed, 0);
}

// --- API --------------------------------------------------------------------------------------------------------------

TEST(Api, ApplyChatTemplateDefaultsAddGenerationPromptToFalse) {
  boost::json::array messages{boost::json::object{{"role", "user"}, {"content", "hi"}}};
  const char* tmpl = "{{ bos_token }}{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}"
                     "{% if add_generation_prompt is defined and not add_generation_prompt %}<no-gen>{% endif %}";
  auto r = ApplyChatTemplate(tmpl, messages, boost::json::object{{"bos_token", "<s>"}});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(*r, "<s>[user:hi]<no-gen>");
  auto with_prompt = ApplyChatTemplate(tmpl, messages, boost::json::object{{"add_generation_prompt", true}});
  EXPECT_EQ(*with_prompt, "[user:hi]");
  EXPECT_FALSE(ApplyChatTemplate(tmpl, messages, boost::json::object{{"messages", 1}}).ok());
  EXPECT_FALSE(ApplyChatTemplate("{% if %}", messages, {}).ok());
}

TEST(Api, ChatTemplateFromConfigReadsStringsAndNamedLists) {
  auto single = boost::json::parse(R"({"chat_template": "A"})").get_object();
  EXPECT_EQ(*ChatTemplateFromConfig(single), "A");
  auto list = boost::json::parse(R"({"chat_template": [{"name": "tool_use", "template": "T"},
                                                       {"name": "default", "template": "D"}]})").get_object();
  EXPECT_EQ(*ChatTemplateFromConfig(list), "D");
  EXPECT_EQ(*ChatTemplateFromConfig(list, "tool_use"), "T");
  EXPECT_FALSE(ChatTemplateFromConfig(list, "rag").ok());
  EXPECT_FALSE(ChatTemplateFromConfig(boost::json::object{}).ok());
}

TEST(Api, SpecialTokenFromConfigReadsStringsAndAddedTokens) {
  auto config = boost::json::parse(R"({"bos_token": "<s>", "eos_token": {"__type": "AddedToken", "content": "</s>"},
                                       "unk_token": null})").get_object();
  EXPECT_EQ(SpecialTokenFromConfig(config, "bos_token"), "<s>");
  EXPECT_EQ(SpecialTokenFromConfig(config, "eos_token"), "</s>");
  EXPECT_EQ(SpecialTokenFromConfig(config, "unk_token"), "");
  EXPECT_EQ(SpecialTokenFromConfig(config, "pad_token"), "");
}

TEST(Api, StrftimeNowUsesTheClockUnlessPinned) {
  auto tmpl = ChatTemplate::Parse("{{ strftime_now('%Y') }}");
  ASSERT_TRUE(tmpl.ok());
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  EXPECT_EQ(*tmpl->Render({}), std::to_string(tm.tm_year + 1900));
  EXPECT_EQ(*tmpl->Render({}, CasesNow()), "2025");
}

TEST(Api, RenderingTwiceGivesTheSameResultAndDoesNotMutateTheContext) {
  auto tmpl = ChatTemplate::Parse("{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}"
                                  "{% endfor %}{{ ns.n }}{% set messages = [] %}{{ messages|length }}");
  ASSERT_TRUE(tmpl.ok());
  boost::json::object ctx{{"messages", boost::json::array{1, 2, 3}}};
  EXPECT_EQ(*tmpl->Render(ctx), "30");
  EXPECT_EQ(*tmpl->Render(ctx), "30");
  EXPECT_EQ(ctx.at("messages").get_array().size(), 3u);
}

}  // namespace
}  // namespace parallm::chat
