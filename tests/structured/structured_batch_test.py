#!/usr/bin/env python3
"""Constrained outputs are valid because of the mask, not the model: every schema of the corpus (plus regex,
choice and GBNF requests) goes through `parallm batch` on stories260K, 64 at a time, with each spelling of the
fields (response_format json_schema, structured_outputs, guided_*); every output must finish with "stop" and
parse and validate with python3-jsonschema (format checks included), match its regex or be one of its choices.
A schema with an unsupported keyword is an error line naming the keyword and the schema path."""
import json
import pathlib
import re
import subprocess
import sys
import tempfile

import jsonschema

REGEXES = [r"[0-9]{3}-[0-9]{4}", r"(cat|dog|bird)s?", r"[A-Z][a-z]{2,8}( [A-Z][a-z]{2,8})?", r"0x[0-9a-f]{1,6}",
           r"\d{1,2}:\d{2} (AM|PM)", r"[a-z]{1,8}@[a-z]{1,8}\.(com|org)", r"(ab|cd){2,3}x?", r"[^\n]{0,10}\.",
           r"-?[1-9][0-9]{0,3}", r"(true|false)"]
CHOICES = [["yes", "no"], ["red", "green", "blue"], ["Once", "Upon", "A time"], ["caf\u00e9", "th\u00e9"],
           ["positive", "negative", "neutral"]]
GBNF = 'root ::= "The " animal " is " ("big" | "small") "."\nanimal ::= "cat" | "dog" | [a-z]{3,6}\n'
GBNF_RE = r"The ([a-z]{3,6}) is (big|small)\."


def main():
    binary, fixtures = sys.argv[1], pathlib.Path(sys.argv[2])
    corpus = [json.loads(l) for l in (pathlib.Path(__file__).parent / "schema_corpus.jsonl").read_text().splitlines()]
    assert len(corpus) >= 100, len(corpus)
    requests, expect = [], {}
    for i, item in enumerate(corpus):
        q = {"id": f"schema-{item['name']}", "prompt": "Once upon a time", "max_tokens": 400}
        style = i % 3
        if style == 0:
            q["response_format"] = {"type": "json_schema",
                                    "json_schema": {"name": item["name"], "strict": True, "schema": item["schema"]}}
        elif style == 1:
            q["structured_outputs"] = {"json": item["schema"]}
        else:
            q["guided_json"] = item["schema"]
        if i % 2:
            q.update(temperature=1.0, seed=i)
        requests.append(q)
        expect[q["id"]] = ("schema", item["schema"])
    for i, rx in enumerate(REGEXES):
        q = {"id": f"regex-{i}", "prompt": "Lily said", "max_tokens": 60, "temperature": 1.0, "seed": i}
        q["structured_outputs" if i % 2 else "guided_regex"] = {"regex": rx} if i % 2 else rx
        requests.append(q)
        expect[q["id"]] = ("regex", rx)
    for i, ch in enumerate(CHOICES):
        q = {"id": f"choice-{i}", "prompt": "The dog", "max_tokens": 20, "temperature": 1.0, "seed": i}
        q["structured_outputs" if i % 2 else "guided_choice"] = {"choice": ch} if i % 2 else ch
        requests.append(q)
        expect[q["id"]] = ("choice", ch)
    for i in range(3):
        requests.append({"id": f"gbnf-{i}", "prompt": "Tim saw", "max_tokens": 40, "temperature": 1.0, "seed": i,
                         "guided_grammar" if i % 2 else "structured_outputs": GBNF if i % 2 else {"grammar": GBNF}})
        expect[f"gbnf-{i}"] = ("regex", GBNF_RE)
    bad = {"id": "bad-schema", "prompt": "x", "response_format": {"type": "json_schema", "json_schema": {
        "name": "b", "schema": {"type": "object", "properties": {"tags": {"type": "array", "uniqueItems": True}}}}}}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        inp, out = tmp / "in.jsonl", tmp / "out.jsonl"
        inp.write_text("".join(json.dumps(q) + "\n" for q in requests + [bad]))
        r = subprocess.run([binary, "batch", "-m", str(fixtures / "models/stories260K/stories260K.bin"),
                            "--tokenizer", str(fixtures / "models/stories260K/tok512.bin"), "--input", str(inp),
                            "--output", str(out), "--max-num-seqs", "64"],
                           capture_output=True, text=True, errors="replace")
        assert r.returncode == 1, (r.returncode, r.stderr)  # the bad line
        assert "unsupported JSON Schema keyword 'uniqueItems' at #/properties/tags" in r.stderr, r.stderr
        results = {}
        for line in out.read_text().splitlines():
            rec = json.loads(line)
            results[rec["id"]] = rec
    # The 2020-12 format checker ("time" is RFC 3339's full-time there; draft 3's is HH:MM:SS).
    checker = getattr(jsonschema.Draft202012Validator, "FORMAT_CHECKER", None) or jsonschema.draft202012_format_checker
    failures = []
    for q in requests:
        rec = results[q["id"]]
        kind, target = expect[q["id"]]
        text = rec["text"]
        try:
            assert rec["finish_reason"] == "stop", f"finish_reason {rec['finish_reason']}"
            if kind == "schema":
                jsonschema.validate(json.loads(text), target, cls=jsonschema.Draft202012Validator,
                                    format_checker=checker)
            elif kind == "regex":
                assert re.fullmatch(target, text), "no match"
            else:
                assert text in target, "not a choice"
        except Exception as e:  # collect all, report together
            failures.append(f"{q['id']}: {e}: {text!r}")
    tokens = sum(len(results[q["id"]]["token_ids"]) for q in requests)
    print(f"{len(requests)} constrained requests ({len(corpus)} schemas), {tokens} tokens, {len(failures)} failures")
    assert not failures, "\n".join(failures)


if __name__ == "__main__":
    main()
