// JSON Schema -> grammar: documents the grammar accepts and refuses, and errors that name keyword and path.
#include <gtest/gtest.h>

#include "structured/gbnf.h"
#include "structured/json_schema.h"
#include "structured/matcher.h"

#include "byte_vocab.h"

namespace parallm::structured {
namespace {

std::shared_ptr<const CompiledGrammar> Schema(const std::string& schema) {
  auto gbnf = JsonSchemaToGbnf(std::string_view(schema));
  EXPECT_TRUE(gbnf.ok()) << gbnf.status().message();
  if (!gbnf.ok()) return nullptr;
  auto g = ParseGbnf(*gbnf);
  EXPECT_TRUE(g.ok()) << g.status().message() << "\n" << *gbnf;
  if (!g.ok()) return nullptr;
  return std::make_shared<const CompiledGrammar>(std::move(*g), ByteVocab());
}

std::string Error(const std::string& schema) {
  auto gbnf = JsonSchemaToGbnf(std::string_view(schema));
  return gbnf.ok() ? "(compiled)" : gbnf.status().message();
}

TEST(JsonSchema, ObjectsRequiredAndOptional) {
  auto g = Schema(R"g({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
      "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2}}, "required": ["name"],
      "additionalProperties": false})g");
  EXPECT_TRUE(Matches(g, R"g({"name": "Ann"})g"));
  EXPECT_TRUE(Matches(g, R"g({"name":"Ann","age":-3,"tags":["a","b"]})g"));
  EXPECT_TRUE(Matches(g, R"g({"name": "Ann", "tags": []})g"));
  EXPECT_FALSE(Matches(g, R"g({"age": 3})g"));                     // name is required
  EXPECT_FALSE(Matches(g, R"g({"name": "Ann", "age": 1.5})g"));    // integer
  EXPECT_FALSE(Matches(g, R"g({"name": "A", "tags": ["a","b","c"]})g"));  // maxItems
  EXPECT_FALSE(Matches(g, R"g({"name": "A", "x": 1})g"));          // no additional properties
  auto none_required = Schema(R"g({"type": "object", "properties": {"a": {"type": "boolean"}, "b": {"type": "null"}}})g");
  EXPECT_TRUE(Matches(none_required, "{}"));
  EXPECT_TRUE(Matches(none_required, R"g({"b": null})g"));
  EXPECT_TRUE(Matches(none_required, R"g({"a": true, "b": null})g"));
  EXPECT_FALSE(Matches(none_required, R"g({, "b": null})g"));
  auto map = Schema(R"g({"type": "object", "additionalProperties": {"type": "number"}})g");
  EXPECT_TRUE(Matches(map, R"g({"x": 1, "y": 2.5})g"));
  EXPECT_FALSE(Matches(map, R"g({"x": "1"})g"));
}

TEST(JsonSchema, EnumConstUnionsRefs) {
  auto g = Schema(R"g({"$defs": {"node": {"type": "object", "properties": {"v": {"enum": ["a", 1, null]},
      "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}}, "required": ["v", "next"]}},
      "$ref": "#/$defs/node"})g");
  EXPECT_TRUE(Matches(g, R"g({"v": "a", "next": {"v": 1, "next": {"v": null, "next": null}}})g"));
  EXPECT_FALSE(Matches(g, R"g({"v": "b", "next": null})g"));
  auto c = Schema(R"g({"oneOf": [{"const": {"kind": "x"}}, {"type": ["integer", "boolean"]}]})g");
  EXPECT_TRUE(Matches(c, R"g({"kind":"x"})g"));
  EXPECT_TRUE(Matches(c, "42"));
  EXPECT_TRUE(Matches(c, "false"));
  EXPECT_FALSE(Matches(c, R"g("x")g"));
}

TEST(JsonSchema, StringsAndNumbers) {
  auto len = Schema(R"g({"type": "string", "minLength": 2, "maxLength": 3})g");
  EXPECT_TRUE(Matches(len, R"g("ab")g"));
  EXPECT_TRUE(Matches(len, R"g("a\né")g"));  // an escape and a two-byte char count as one character each
  EXPECT_FALSE(Matches(len, R"g("a")g"));
  EXPECT_FALSE(Matches(len, R"g("abcd")g"));
  auto pattern = Schema(R"g({"type": "string", "pattern": "^[A-Z]{2}-\\d+$"})g");
  EXPECT_TRUE(Matches(pattern, R"g("AB-12")g"));
  EXPECT_FALSE(Matches(pattern, R"g("ab-12")g"));
  auto date = Schema(R"g({"type": "string", "format": "date-time"})g");
  EXPECT_TRUE(Matches(date, R"g("2024-02-28T13:45:00Z")g"));
  EXPECT_FALSE(Matches(date, R"g("2024-13-28T13:45:00Z")g"));
  auto uuid = Schema(R"g({"type": "string", "format": "uuid"})g");
  EXPECT_TRUE(Matches(uuid, R"g("123e4567-e89b-12d3-a456-426614174000")g"));
  auto range = Schema(R"g({"type": "integer", "minimum": -15, "exclusiveMaximum": 120})g");
  for (int v = -30; v <= 150; ++v)
    EXPECT_EQ(Matches(range, std::to_string(v)), v >= -15 && v < 120) << v;
  EXPECT_FALSE(Matches(range, "007"));
  auto positive = Schema(R"g({"type": "number", "minimum": 2.5})g");
  EXPECT_TRUE(Matches(positive, "3"));
  EXPECT_TRUE(Matches(positive, "3.75"));
  EXPECT_TRUE(Matches(positive, "123456"));
  EXPECT_FALSE(Matches(positive, "2"));
  EXPECT_FALSE(Matches(positive, "-3"));
}

TEST(JsonSchema, PropertyCountsAndMultiples) {
  // Listed properties: required first, then between 1 and 2 of the three optional ones.
  auto g = Schema(R"g({"type": "object", "required": ["id"], "minProperties": 2, "maxProperties": 3,
      "properties": {"id": {"type": "integer"}, "a": {"type": "boolean"}, "b": {"type": "boolean"},
                     "c": {"type": "boolean"}}})g");
  EXPECT_TRUE(Matches(g, R"g({"id": 1, "b": true})g"));
  EXPECT_TRUE(Matches(g, R"g({"id": 1, "a": true, "c": false})g"));
  EXPECT_FALSE(Matches(g, R"g({"id": 1})g"));                                  // minProperties
  EXPECT_FALSE(Matches(g, R"g({"id": 1, "a": true, "b": true, "c": true})g"));  // maxProperties
  // No required property: the first one written has no comma before it.
  auto opt = Schema(R"g({"properties": {"a": {"type": "null"}, "b": {"type": "null"}}, "maxProperties": 1})g");
  EXPECT_TRUE(Matches(opt, "{}"));
  EXPECT_TRUE(Matches(opt, R"g({"b": null})g"));
  EXPECT_FALSE(Matches(opt, R"g({"a": null, "b": null})g"));
  // Maps and free objects count their entries.
  auto map = Schema(R"g({"type": "object", "additionalProperties": {"type": "integer"}, "minProperties": 1,
      "maxProperties": 2})g");
  EXPECT_TRUE(Matches(map, R"g({"x": 1, "y": 2})g"));
  EXPECT_FALSE(Matches(map, "{}"));
  EXPECT_FALSE(Matches(map, R"g({"x": 1, "y": 2, "z": 3})g"));
  auto any = Schema(R"g({"type": "object", "minProperties": 1})g");
  EXPECT_TRUE(Matches(any, R"g({"k": [1, {"x": null}]})g"));
  EXPECT_FALSE(Matches(any, "{}"));
  // multipleOf: an integer, in a bounded range (listed) or unbounded (by remainder).
  auto bounded = Schema(R"g({"type": "integer", "multipleOf": 5, "minimum": -12, "maximum": 30})g");
  for (const char* ok : {"-10", "0", "5", "30"}) EXPECT_TRUE(Matches(bounded, ok)) << ok;
  for (const char* bad : {"-15", "7", "35", "-0"}) EXPECT_FALSE(Matches(bounded, bad)) << bad;
  auto unbounded = Schema(R"g({"type": "number", "multipleOf": 7})g");
  for (const char* ok : {"0", "7", "-14", "700000000000007"}) EXPECT_TRUE(Matches(unbounded, ok)) << ok;
  for (const char* bad : {"1", "-8", "07", "7.0", "700000000000008"}) EXPECT_FALSE(Matches(unbounded, bad)) << bad;
  EXPECT_EQ(Error(R"g({"type": "number", "multipleOf": 0.5})g"),
            "multipleOf is supported only as a positive integer at #/multipleOf");
  EXPECT_EQ(Error(R"g({"type": "integer", "multipleOf": 3, "minimum": 0})g"),
            "multipleOf with a range open on one side is not supported at #/multipleOf");
  EXPECT_EQ(Error(R"g({"properties": {"a": {}}, "minProperties": 2})g"),
            "minProperties needs more properties than the schema lists (properties it does not list are never "
            "generated) at #/minProperties");
}

TEST(JsonSchema, ErrorsNameKeywordAndPath) {
  EXPECT_EQ(Error(R"g({"type": "object", "properties": {"tags": {"type": "array", "uniqueItems": true}}})g"),
            "unsupported JSON Schema keyword 'uniqueItems' at #/properties/tags");
  EXPECT_EQ(Error(R"g({"type": "string", "format": "ipv6"})g"), "unsupported string format 'ipv6' at #/format");
  EXPECT_EQ(Error(R"g({"$ref": "#/$defs/missing"})g"), "$ref '#/$defs/missing' does not resolve at #/$ref");
  EXPECT_EQ(Error(R"g({"anyOf": [{"type": "string"}, {"type": "strin"}]})g"), "unknown type 'strin' at #/anyOf/1/type");
  EXPECT_EQ(Error(R"g({"type": "string", "pattern": "(?=a)"})g"),
            "pattern: at 0: lookaround and inline flags are not supported at #/pattern");
  EXPECT_EQ(Error(R"g({"type": "object", "required": ["x"], "additionalProperties": false})g"),
            "required property 'x' is not allowed by additionalProperties: false at #/required");
}

}  // namespace
}  // namespace parallm::structured
