// StructuredOutput -> GBNF -> Grammar -> CompiledGrammar, with an LRU cache keyed by the request's spec.
#include "structured/structured_output.h"

#include <fmt/format.h>

#include "structured/gbnf.h"
#include "structured/json_schema.h"
#include "structured/regex_to_gbnf.h"

namespace parallm::structured {

Result<std::string> ToGbnf(const StructuredOutput& spec) {
  std::string gbnf;
  switch (spec.kind) {
    case StructuredOutput::Kind::kJsonSchema: {
      auto g = JsonSchemaToGbnf(std::string_view(spec.text));
      if (!g.ok()) return Err("JSON schema: {}", g.status().message());
      gbnf = std::move(*g);
      break;
    }
    case StructuredOutput::Kind::kJsonObject:
      gbnf = JsonObjectGbnf();
      break;
    case StructuredOutput::Kind::kRegex: {
      auto g = RegexToGbnf(spec.text);
      if (!g.ok()) return Err("regex: {}", g.status().message());
      gbnf = "root ::= " + *g + "\n";
      break;
    }
    case StructuredOutput::Kind::kChoice:
      if (spec.choices.empty()) return Err("choice: the list of choices is empty");
      gbnf = ChoiceGbnf(spec.choices);
      break;
    case StructuredOutput::Kind::kGbnf:
      gbnf = spec.text;
      break;
  }
  if (!spec.prefix.empty() || !spec.suffix.empty())
    gbnf = "structured-wrapped-root ::= " + GbnfLiteral(spec.prefix) + " root " + GbnfLiteral(spec.suffix) + "\n" + gbnf;
  return gbnf;
}

Result<std::shared_ptr<const CompiledGrammar>> GrammarCompiler::Compile(const StructuredOutput& spec) {
  std::string key = fmt::format("{}\x1f{}\x1f{}\x1f{}", static_cast<int>(spec.kind), spec.prefix, spec.suffix, spec.text);
  for (const std::string& c : spec.choices) key += "\x1f" + c;
  {
    std::lock_guard lock(mu_);
    if (auto it = cache_.find(key); it != cache_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second.second);
      return it->second.first;
    }
  }
  PARALLM_ASSIGN_OR_RETURN(std::string gbnf, ToGbnf(spec));
  const bool wrapped = !spec.prefix.empty() || !spec.suffix.empty();
  auto grammar = ParseGbnf(gbnf, wrapped ? "structured-wrapped-root" : "root");
  if (!grammar.ok())
    return Err("{}{}", spec.kind == StructuredOutput::Kind::kGbnf ? "grammar: " : "internal grammar error: ",
               grammar.status().message());
  auto compiled = std::make_shared<const CompiledGrammar>(std::move(*grammar), vocab_);
  std::lock_guard lock(mu_);
  if (auto it = cache_.find(key); it != cache_.end()) return it->second.first;  // another thread was first
  lru_.push_front(key);
  cache_.emplace(key, std::make_pair(compiled, lru_.begin()));
  while (cache_.size() > max_cached_) {
    cache_.erase(lru_.back());
    lru_.pop_back();
  }
  return std::shared_ptr<const CompiledGrammar>(compiled);
}

}  // namespace parallm::structured
