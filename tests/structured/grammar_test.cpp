// GBNF and regex front ends: what they accept and reject, on a vocabulary of the 256 single bytes, and errors
// that name the line/column or pattern position.
#include <gtest/gtest.h>

#include "structured/gbnf.h"
#include "structured/matcher.h"
#include "structured/regex_to_gbnf.h"

#include "byte_vocab.h"

namespace parallm::structured {
namespace {

std::shared_ptr<const CompiledGrammar> Compile(const std::string& gbnf) {
  auto g = ParseGbnf(gbnf);
  EXPECT_TRUE(g.ok()) << g.status().message() << "\n" << gbnf;
  if (!g.ok()) return nullptr;
  return std::make_shared<const CompiledGrammar>(std::move(*g), ByteVocab());
}

// llama.cpp's grammars/json.gbnf as its README writes it (rewritten here, not copied: same syntax features).
constexpr const char* kJsonGbnf = R"g(
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws

object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws

array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws

string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws

number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws

# Optional space: by convention, applied in this grammar after literal chars when allowed
ws ::= | " " | "\n" [ \t]{0,20}
)g";

TEST(Gbnf, JsonGrammar) {
  auto g = Compile(kJsonGbnf);
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(Matches(g, R"g({"a": [1, 2.5e3, "x\u00e9y", true, null], "b": {}})g"));
  EXPECT_TRUE(Matches(g, "{\n  \"k\": \"caf\xC3\xA9\"\n}"));
  EXPECT_FALSE(Matches(g, R"g({"a": })g"));
  EXPECT_FALSE(Matches(g, R"g({"a": 1)g"));     // incomplete: accepted bytes, cannot end
  EXPECT_FALSE(Matches(g, R"g([1, 2])g"));      // root is an object
  EXPECT_FALSE(Matches(g, "{\"a\": \"\x01\"}"));  // control character in a string
}

TEST(Gbnf, ArithmeticListAndRepetitions) {
  auto arith = Compile(R"g(root  ::= (expr "=" ws term "\n")+
expr  ::= term ([-+*/] term)*
term  ::= ident | num | "(" ws expr ")" ws
ident ::= [a-z] [a-z0-9_]* ws
num   ::= [0-9]+ ws
ws    ::= [ \t\n]*
)g");
  EXPECT_TRUE(Matches(arith, "(a+1)*b=3\n"));
  EXPECT_TRUE(Matches(arith, "x=1\ny=2\n"));
  EXPECT_FALSE(Matches(arith, "x=\n"));
  auto list = Compile("root ::= item+\n# a comment\nitem ::= \"- \" [^\\r\\n\\x0b\\x0c\\x85\\u2028\\u2029]+ \"\\n\"\n");
  EXPECT_TRUE(Matches(list, "- one\n- two \xE2\x9C\x93\n"));
  EXPECT_FALSE(Matches(list, "- \n"));
  auto counted = Compile(R"g(root ::= "a"{2,3} "b"{2} "c"{,1} "d"{1,})g");
  EXPECT_TRUE(Matches(counted, "aabbd"));
  EXPECT_TRUE(Matches(counted, "aaabbcddd"));
  EXPECT_FALSE(Matches(counted, "abbd"));
  EXPECT_FALSE(Matches(counted, "aaaabbd"));
  EXPECT_FALSE(Matches(counted, "aabbccd"));
  auto dot = Compile(R"g(root ::= "<" . ">")g");
  EXPECT_TRUE(Matches(dot, "<\xF0\x9F\x98\x80>"));  // one code point, four bytes
  EXPECT_FALSE(Matches(dot, "<ab>"));
}

TEST(Gbnf, ErrorsNamePosition) {
  auto undefined = ParseGbnf("root ::= foo\n");
  ASSERT_FALSE(undefined.ok());
  EXPECT_EQ(undefined.status().message(), "rule 'foo' is used but never defined");
  auto left = ParseGbnf("root ::= expr\nexpr ::= expr \"+\" \"1\" | \"1\"\n");
  ASSERT_FALSE(left.ok());
  EXPECT_NE(left.status().message().find("'expr' is left-recursive"), std::string::npos);
  auto syntax = ParseGbnf("root ::= \"a\"\nb ::= [ab\n");
  ASSERT_FALSE(syntax.ok());
  EXPECT_EQ(syntax.status().message(), "line 2, column 7: unterminated character class");
  auto op = ParseGbnf("root ::= \"a\" {2}\n");
  EXPECT_FALSE(op.ok());
  auto no_root = ParseGbnf("start ::= \"a\"\n");
  ASSERT_FALSE(no_root.ok());
  EXPECT_EQ(no_root.status().message(), "the grammar has no 'root' rule");
}

std::shared_ptr<const CompiledGrammar> Regex(const std::string& pattern, bool json = false) {
  auto gbnf = RegexToGbnf(pattern, json);
  EXPECT_TRUE(gbnf.ok()) << gbnf.status().message();
  return Compile("root ::= " + (gbnf.ok() ? *gbnf : std::string("\"\"")) + "\n");
}

TEST(Regex, CommonSyntax) {
  auto phone = Regex(R"g(^\(\d{3}\) \d{3}-\d{4}$)g");
  EXPECT_TRUE(Matches(phone, "(555) 123-4567"));
  EXPECT_FALSE(Matches(phone, "555-123-4567"));
  auto alt = Regex("(?:cat|dog)s?|[A-Z][a-z]*?");
  EXPECT_TRUE(Matches(alt, "cats"));
  EXPECT_TRUE(Matches(alt, "dog"));
  EXPECT_TRUE(Matches(alt, "Zebra"));
  EXPECT_FALSE(Matches(alt, "cow"));
  auto neg = Regex(R"g([^a-c\s]+\.\w)g");
  EXPECT_TRUE(Matches(neg, "xyz.q"));
  EXPECT_FALSE(Matches(neg, "abz.q"));
  EXPECT_FALSE(Matches(neg, "x z.q"));
  auto dot = Regex("a.c");
  EXPECT_TRUE(Matches(dot, "a\xC3\xA9" "c"));
  EXPECT_FALSE(Matches(dot, "a\nc"));
  EXPECT_EQ(RegexToGbnf("(?=x)").status().message(), "at 0: lookaround and inline flags are not supported");
  EXPECT_EQ(RegexToGbnf("a\\1").status().message(),
            "at 1: '\\1' is not supported (no backreferences, word boundaries or anchors inside the pattern)");
  EXPECT_FALSE(RegexToGbnf("(ab").ok());
  EXPECT_FALSE(RegexToGbnf("*a").ok());
}

TEST(Regex, JsonStringEscapes) {
  // Inside a JSON string a quote, a backslash and a newline of the value appear escaped.
  auto r = Regex(R"g(a["\\\n]b)g", /*json=*/true);
  EXPECT_TRUE(Matches(r, R"g(a\"b)g"));
  EXPECT_TRUE(Matches(r, R"g(a\\b)g"));
  EXPECT_TRUE(Matches(r, R"g(a\nb)g"));
  EXPECT_FALSE(Matches(r, "a\"b"));
  EXPECT_FALSE(Matches(r, "a\nb"));
}

}  // namespace
}  // namespace parallm::structured
