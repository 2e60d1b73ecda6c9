// StructuredOutput: what a request asks its output to follow (a JSON Schema, any JSON object, a regex, a choice
// list or a GBNF grammar), and the GrammarCompiler that turns it into a CompiledGrammar for one vocabulary,
// caching by request so that many requests with the same schema share one automaton and its mask cache.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "structured/matcher.h"
#include "structured/token_vocab.h"
#include "util/status.h"

namespace parallm::structured {

struct StructuredOutput {
  enum class Kind { kJsonSchema, kJsonObject, kRegex, kChoice, kGbnf };
  Kind kind = Kind::kJsonObject;
  std::string text;                  // the schema (JSON text), regex or GBNF source
  std::vector<std::string> choices;  // kChoice
  // Text the output must start with before the grammar applies, and end with after it (e.g. a tool call's
  // `<tool_call>\n{"name": "f", "arguments": ` and `}\n</tool_call>`): literals around the grammar's root.
  std::string prefix;
  std::string suffix;
};

// The GBNF source for `spec` (its start rule is `root`). Errors name the schema path or the regex position.
Result<std::string> ToGbnf(const StructuredOutput& spec);

class GrammarCompiler {
 public:
  explicit GrammarCompiler(std::shared_ptr<const TokenVocab> vocab, size_t max_cached = 256)
      : vocab_(std::move(vocab)), max_cached_(max_cached) {}
  // Thread-safe. Errors start with what was wrong ("JSON schema: unsupported keyword 'x' at #/properties/y").
  Result<std::shared_ptr<const CompiledGrammar>> Compile(const StructuredOutput& spec);
  const TokenVocab& vocab() const { return *vocab_; }

 private:
  std::shared_ptr<const TokenVocab> vocab_;
  size_t max_cached_;
  std::mutex mu_;
  std::list<std::string> lru_;  // most recent first
  std::unordered_map<std::string, std::pair<std::shared_ptr<const CompiledGrammar>, std::list<std::string>::iterator>>
      cache_;
};

}  // namespace parallm::structured
