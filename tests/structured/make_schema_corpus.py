#!/usr/bin/env python3
"""Writes schema_corpus.jsonl: hand-written JSON Schemas (nested objects, arrays, enums, refs, unions, formats,
patterns, ranges) followed by seeded random ones, one {"name", "schema"} per line. Strings and arrays are bounded
(maxLength, maxItems, enum, format, pattern) so that a constrained output always completes within a few hundred
tokens, whatever the model. Rerun to regenerate: python3 make_schema_corpus.py > schema_corpus.jsonl"""
import json
import random

HAND = {
    "person": {"type": "object", "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 12},
        "age": {"type": "integer", "minimum": 0, "maximum": 130},
        "email": {"type": "string", "format": "email"}},
        "required": ["name", "age", "email"], "additionalProperties": False},
    "address_nested": {"type": "object", "properties": {
        "street": {"type": "string", "maxLength": 10},
        "city": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
                                                  "zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
                 "required": ["name", "zip"], "additionalProperties": False}},
        "required": ["street", "city"], "additionalProperties": False},
    "status_enum": {"type": "object", "properties": {"status": {"enum": ["open", "closed", "pending"]},
                                                     "priority": {"enum": [1, 2, 3, None]}},
                    "required": ["status", "priority"], "additionalProperties": False},
    "const_kind": {"type": "object", "properties": {"kind": {"const": "event"}, "ok": {"type": "boolean"}},
                   "required": ["kind", "ok"], "additionalProperties": False},
    "defs_ref": {"$defs": {"point": {"type": "object", "properties": {"x": {"type": "integer", "minimum": -9, "maximum": 9},
                                                                     "y": {"type": "integer", "minimum": -9, "maximum": 9}},
                                     "required": ["x", "y"], "additionalProperties": False}},
                 "type": "object", "properties": {"from": {"$ref": "#/$defs/point"}, "to": {"$ref": "#/$defs/point"}},
                 "required": ["from", "to"], "additionalProperties": False},
    "definitions_ref": {"definitions": {"tag": {"type": "string", "enum": ["a", "b", "c"]}},
                        "type": "array", "items": {"$ref": "#/definitions/tag"}, "minItems": 1, "maxItems": 4},
    "recursive_tree": {"$defs": {"node": {"type": "object", "properties": {
        "v": {"type": "integer", "minimum": 0, "maximum": 9},
        "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}},
        "required": ["v", "kids"], "additionalProperties": False}}, "$ref": "#/$defs/node"},
    "union_anyof": {"type": "object", "properties": {"value": {"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 5},
                                                                        {"type": "null"}]}},
                    "required": ["value"], "additionalProperties": False},
    "union_oneof_disjoint": {"oneOf": [
        {"type": "object", "properties": {"type": {"const": "circle"}, "r": {"type": "number", "minimum": 0, "maximum": 10}},
         "required": ["type", "r"], "additionalProperties": False},
        {"type": "object", "properties": {"type": {"const": "square"}, "side": {"type": "integer", "minimum": 1, "maximum": 10}},
         "required": ["type", "side"], "additionalProperties": False}]},
    "type_list": {"type": "object", "properties": {"maybe": {"type": ["integer", "null"]}}, "required": ["maybe"],
                  "additionalProperties": False},
    "formats": {"type": "object", "properties": {
        "day": {"type": "string", "format": "date"}, "at": {"type": "string", "format": "date-time"},
        "clock": {"type": "string", "format": "time"}, "id": {"type": "string", "format": "uuid"},
        "ip": {"type": "string", "format": "ipv4"}, "host": {"type": "string", "format": "hostname"}},
        "required": ["day", "at", "clock", "id", "ip", "host"], "additionalProperties": False},
    "patterns": {"type": "object", "properties": {
        "sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{2,4}$"},
        "hex": {"type": "string", "pattern": "^#[0-9a-f]{6}$"},
        "quoted": {"type": "string", "pattern": "^say \"(hi|bye)\"$"}},
        "required": ["sku", "hex", "quoted"], "additionalProperties": False},
    "tuple": {"type": "array", "prefixItems": [{"type": "string", "maxLength": 4}, {"type": "integer"}, {"type": "boolean"}],
              "items": False},
    "ranges": {"type": "object", "properties": {
        "pct": {"type": "number", "minimum": 0, "maximum": 100},
        "neg": {"type": "integer", "minimum": -1000, "exclusiveMaximum": -10},
        "big": {"type": "integer", "minimum": 1000000}},
        "required": ["pct", "neg", "big"], "additionalProperties": False},
    "optional_only": {"type": "object", "properties": {"a": {"type": "boolean"}, "b": {"type": "integer", "maximum": 5},
                                                       "c": {"type": "string", "maxLength": 3}},
                      "additionalProperties": False},
    "array_of_objects": {"type": "array", "maxItems": 3, "items": {
        "type": "object", "properties": {"id": {"type": "integer", "minimum": 1, "maximum": 99},
                                         "done": {"type": "boolean"}},
        "required": ["id", "done"], "additionalProperties": False}},
    "string_lengths": {"type": "object", "properties": {"code": {"type": "string", "minLength": 3, "maxLength": 3},
                                                        "note": {"type": "string", "maxLength": 0}},
                       "required": ["code", "note"], "additionalProperties": False},
    "allof_single": {"allOf": [{"type": "object", "properties": {"k": {"type": "null"}}, "required": ["k"],
                                "additionalProperties": False}]},
    "openai_strict_example": {"type": "object", "properties": {
        "steps": {"type": "array", "maxItems": 3, "items": {"type": "object", "properties": {
            "explanation": {"type": "string", "maxLength": 16}, "output": {"type": "string", "maxLength": 8}},
            "required": ["explanation", "output"], "additionalProperties": False}},
        "final_answer": {"type": "string", "maxLength": 10}},
        "required": ["steps", "final_answer"], "additionalProperties": False},
    "unicode_enum": {"enum": ["caf\u00e9", "na\u00efve", "\u65e5\u672c", "emoji \U0001F600"]},
    "boolean_root": {"type": "boolean"},
    "number_root": {"type": "number", "minimum": 2.5, "maximum": 7},
    "property_counts": {"type": "object", "minProperties": 2, "maxProperties": 3, "required": ["id"],
                        "properties": {"id": {"type": "integer", "minimum": 0, "maximum": 99},
                                       "a": {"type": "boolean"}, "b": {"enum": ["x", "y"]}, "c": {"type": "null"}}},
    "multiples": {"type": "object", "properties": {"five": {"type": "integer", "multipleOf": 5, "minimum": -20,
                                                            "maximum": 50},
                                                   "seven": {"type": "integer", "multipleOf": 7}},
                  "required": ["five", "seven"], "additionalProperties": False},
}

FORMATS = ["date", "email", "uuid", "ipv4", "date-time"]
PATTERNS = ["^[a-z]{2,5}$", "^(yes|no)-[0-9]$", "^\\d{3}\\.\\d{2}$", "^[A-Z][a-z]{0,6}( [A-Z][a-z]{0,6})?$"]


def random_schema(rng, depth):
    kinds = ["string", "integer", "number", "boolean", "null", "enum", "format", "pattern", "anyof"]
    if depth < 3:
        kinds += ["object", "array", "object"]
    kind = rng.choice(kinds)
    if kind == "string":
        s = {"type": "string", "maxLength": rng.randrange(0, 12)}
        if rng.random() < 0.3 and s["maxLength"] > 0:
            s["minLength"] = rng.randrange(0, s["maxLength"] + 1)
        return s
    if kind == "integer":
        s = {"type": "integer"}
        if rng.random() < 0.5:
            lo = rng.randrange(-500, 500)
            s["minimum"] = lo
            if rng.random() < 0.7:
                s["maximum"] = lo + rng.randrange(0, 2000)
        return s
    if kind == "number":
        s = {"type": "number"}
        if rng.random() < 0.4:
            s["minimum"] = rng.randrange(0, 50)
            s["maximum"] = s["minimum"] + rng.randrange(1, 100)
        return s
    if kind in ("boolean", "null"):
        return {"type": kind}
    if kind == "enum":
        pool = ["red", "green", "blue", 1, 2, 3.5, True, None, "x y", "quote\"d"]
        return {"enum": rng.sample(pool, rng.randrange(1, 5))}
    if kind == "format":
        return {"type": "string", "format": rng.choice(FORMATS)}
    if kind == "pattern":
        return {"type": "string", "pattern": rng.choice(PATTERNS)}
    if kind == "anyof":
        return {"anyOf": [random_schema(rng, 3), random_schema(rng, 3)]}
    if kind == "array":
        s = {"type": "array", "items": random_schema(rng, depth + 1), "maxItems": rng.randrange(0, 4)}
        if rng.random() < 0.3:
            s["minItems"] = rng.randrange(0, s["maxItems"] + 1)
        return s
    names = rng.sample(["id", "name", "kind", "value", "tags", "meta", "count", "flag", "when", "score", "note"],
                       rng.randrange(1, 6))
    props = {n: random_schema(rng, depth + 1) for n in names}
    required = [n for n in names if rng.random() < 0.6]
    s = {"type": "object", "properties": props, "additionalProperties": False}
    if required:
        s["required"] = required
    return s


def main():
    for name, schema in HAND.items():
        print(json.dumps({"name": name, "schema": schema}, ensure_ascii=False))
    rng = random.Random(2026)
    for i in range(100):
        schema = random_schema(rng, 0)
        if schema.get("type") != "object" and rng.random() < 0.7:  # mostly objects at the top, as agents use them
            schema = {"type": "object", "properties": {"result": schema}, "required": ["result"],
                      "additionalProperties": False}
        print(json.dumps({"name": f"random_{i:03d}", "schema": schema}, ensure_ascii=False))


if __name__ == "__main__":
    main()
