// Grammar: building, validation (undefined and left-recursive rules) and the flat layout the matcher walks.
#include "structured/grammar.h"

#include <functional>

#include <fmt/format.h>

namespace parallm::structured {

int32_t Grammar::Rule(const std::string& name) {
  if (auto it = ids_.find(name); it != ids_.end()) return it->second;
  ids_[name] = static_cast<int32_t>(names_.size());
  names_.push_back(name);
  defined_.push_back(false);
  rules_.emplace_back();
  return static_cast<int32_t>(names_.size() - 1);
}

int32_t Grammar::NewHelperRule(const std::string& base) {
  // Helper names cannot clash with user rules: GBNF names have no '#'.
  names_.push_back(fmt::format("{}#{}", base, helper_count_++));
  defined_.push_back(true);
  rules_.emplace_back();
  return static_cast<int32_t>(names_.size() - 1);
}

void Grammar::AddAlternative(int32_t rule, std::vector<GrammarElement> sequence) {
  defined_[static_cast<size_t>(rule)] = true;
  rules_[static_cast<size_t>(rule)].push_back(std::move(sequence));
}

GrammarElement Grammar::Bytes(const ByteSet& set) {
  for (size_t i = 0; i < sets_.size(); ++i)
    if (sets_[i] == set) return {GrammarElement::Kind::kBytes, static_cast<int32_t>(i)};
  sets_.push_back(set);
  return {GrammarElement::Kind::kBytes, static_cast<int32_t>(sets_.size() - 1)};
}

Status Grammar::Finalize(const std::string& root_name) {
  const auto root_it = ids_.find(root_name);
  const int32_t root = root_it == ids_.end() ? -1 : root_it->second;
  if (root < 0 || !defined_[static_cast<size_t>(root)]) return Err("the grammar has no '{}' rule", root_name);
  for (size_t i = 0; i < names_.size(); ++i)
    if (!defined_[i]) return Err("rule '{}' is used but never defined", names_[i]);
  const size_t n = names_.size();
  // Nullable rules (can match the empty string), to fixpoint.
  std::vector<bool> nullable(n, false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      if (nullable[r]) continue;
      for (const auto& alt : rules_[r]) {
        bool all = true;
        for (const GrammarElement& e : alt)
          if (e.kind != GrammarElement::Kind::kRule || !nullable[static_cast<size_t>(e.value)]) all = false;
        if (all) {
          nullable[r] = changed = true;
          break;
        }
      }
    }
  }
  // Left recursion: a cycle through rules reachable at the left edge (behind nullable prefixes).
  std::vector<std::vector<int32_t>> left(n);
  for (size_t r = 0; r < n; ++r)
    for (const auto& alt : rules_[r])
      for (const GrammarElement& e : alt) {
        if (e.kind != GrammarElement::Kind::kRule) break;
        left[r].push_back(e.value);
        if (!nullable[static_cast<size_t>(e.value)]) break;
      }
  std::vector<uint8_t> color(n, 0);  // 0 new, 1 on the path, 2 done
  std::string cycle;
  std::function<bool(size_t)> visit = [&](size_t r) {
    color[r] = 1;
    for (int32_t next : left[r]) {
      const size_t s = static_cast<size_t>(next);
      if (color[s] == 1 || (color[s] == 0 && visit(s))) {
        if (cycle.empty()) cycle = names_[s];
        return true;
      }
    }
    color[r] = 2;
    return false;
  };
  for (size_t r = 0; r < n; ++r)
    if (color[r] == 0 && visit(r)) {
      std::string name = cycle.substr(0, cycle.find('#'));
      return Err("rule '{}' is left-recursive (it can reach itself without consuming a byte)", name);
    }
  elements_.clear();
  alt_starts_.assign(n, {});
  for (size_t r = 0; r < n; ++r)
    for (const auto& alt : rules_[r]) {
      alt_starts_[r].push_back(static_cast<int32_t>(elements_.size()));
      elements_.insert(elements_.end(), alt.begin(), alt.end());
      elements_.push_back({GrammarElement::Kind::kEnd, static_cast<int32_t>(r)});
    }
  rules_.clear();
  root_ = root;
  return Status::Ok();
}

namespace {

std::string SetToString(const ByteSet& s) {
  if (s.count() == 1)
    for (int b = 0; b < 256; ++b)
      if (s.test(static_cast<size_t>(b)))
        return b >= 0x20 && b < 0x7f && b != '"' && b != '\\' ? fmt::format("\"{}\"", static_cast<char>(b))
                                                               : fmt::format("[\\x{:02X}]", b);
  std::string out = "[";
  for (int b = 0; b < 256;) {
    if (!s.test(static_cast<size_t>(b))) {
      ++b;
      continue;
    }
    int e = b;
    while (e + 1 < 256 && s.test(static_cast<size_t>(e + 1))) ++e;
    out += e == b ? fmt::format("\\x{:02X}", b) : fmt::format("\\x{:02X}-\\x{:02X}", b, e);
    b = e + 1;
  }
  return out + "]";
}

}  // namespace

std::string Grammar::ToString() const {
  std::string out;
  for (size_t r = 0; r < names_.size(); ++r) {
    out += names_[r] + " ::=";
    bool first = true;
    for (int32_t start : alt_starts_[r]) {
      out += first ? " " : " | ";
      first = false;
      for (size_t p = static_cast<size_t>(start); elements_[p].kind != GrammarElement::Kind::kEnd; ++p) {
        const GrammarElement& e = elements_[p];
        out += e.kind == GrammarElement::Kind::kRule ? names_[static_cast<size_t>(e.value)]
                                                     : SetToString(sets_[static_cast<size_t>(e.value)]);
        out += ' ';
      }
    }
    out += '\n';
  }
  return out;
}

}  // namespace parallm::structured
