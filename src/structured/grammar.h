// Grammar: a context-free grammar over bytes, the one form that every front end (GBNF, JSON Schema, regular
// expressions, choice lists) compiles to and that the matcher runs as a pushdown automaton.
#pragma once

#include <bitset>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "util/status.h"

namespace parallm::structured {

using ByteSet = std::bitset<256>;

// One symbol of an alternative: a set of bytes (matches one byte), a reference to a rule, or the end marker that
// closes every alternative in the flattened form.
struct GrammarElement {
  enum class Kind : uint8_t { kBytes, kRule, kEnd };
  Kind kind = Kind::kEnd;
  int32_t value = 0;  // kBytes: index into sets(); kRule: rule id
};

class Grammar {
 public:
  // --- building ---
  // The id of the rule called `name`, created (undefined, no alternatives) on first use.
  int32_t Rule(const std::string& name);
  // A fresh helper rule named after `base` (for groups and repetitions).
  int32_t NewHelperRule(const std::string& base);
  void AddAlternative(int32_t rule, std::vector<GrammarElement> sequence);
  GrammarElement Bytes(const ByteSet& set);
  static GrammarElement RuleRef(int32_t rule) { return {GrammarElement::Kind::kRule, rule}; }
  // Marks a rule as defined even with no alternative yet (a definition site was seen).
  void MarkDefined(int32_t rule) { defined_[static_cast<size_t>(rule)] = true; }
  bool IsDefined(int32_t rule) const { return defined_[static_cast<size_t>(rule)]; }
  // Checks that every used rule is defined and none is left-recursive (the matcher's expansion would not end),
  // then lays the alternatives out flat. Errors name the rule.
  Status Finalize(const std::string& root_name);

  // --- reading (after Finalize) ---
  const std::vector<GrammarElement>& elements() const { return elements_; }
  // Start positions (in elements()) of the rule's alternatives.
  const std::vector<int32_t>& alternatives(int32_t rule) const { return alt_starts_[static_cast<size_t>(rule)]; }
  const ByteSet& set(int32_t index) const { return sets_[static_cast<size_t>(index)]; }
  int32_t root() const { return root_; }
  int32_t num_rules() const { return static_cast<int32_t>(names_.size()); }
  const std::string& rule_name(int32_t rule) const { return names_[static_cast<size_t>(rule)]; }
  // Readable form, one rule a line (for errors and debugging).
  std::string ToString() const;

 private:
  std::vector<std::string> names_;
  std::unordered_map<std::string, int32_t> ids_;
  std::vector<bool> defined_;
  std::vector<std::vector<std::vector<GrammarElement>>> rules_;  // while building
  std::vector<ByteSet> sets_;
  std::vector<GrammarElement> elements_;
  std::vector<std::vector<int32_t>> alt_starts_;
  int32_t root_ = -1;
  int32_t helper_count_ = 0;
};

}  // namespace parallm::structured
