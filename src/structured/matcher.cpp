// The pushdown automaton: stack expansion, memoized byte transitions, and the mask walk over the token trie.
#include "structured/matcher.h"

#include <algorithm>

namespace parallm::structured {

size_t CompiledGrammar::VectorHash::operator()(const std::vector<int32_t>& v) const {
  uint64_t h = 1469598103934665603ull;
  for (int32_t x : v) h = (h ^ static_cast<uint32_t>(x)) * 1099511628211ull;
  return static_cast<size_t>(h);
}

CompiledGrammar::CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenVocab> vocab)
    : grammar_(std::move(grammar)), vocab_(std::move(vocab)) {
  nodes_.push_back({-1, -1});  // id 0: the empty stack
  walk_.resize(static_cast<size_t>(vocab_->max_depth()) + 1);
}

int32_t CompiledGrammar::num_states() const {
  std::lock_guard lock(mu_);
  return static_cast<int32_t>(states_.size());
}

int32_t CompiledGrammar::num_cached_masks() const {
  std::lock_guard lock(mu_);
  int32_t n = 0;
  for (const State& s : states_) n += s.mask != nullptr;
  return n;
}

int32_t CompiledGrammar::Intern(int32_t pos, int32_t parent) {
  const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(pos)) << 32) | static_cast<uint32_t>(parent);
  auto [it, inserted] = node_ids_.try_emplace(key, static_cast<int32_t>(nodes_.size()));
  if (inserted) nodes_.push_back({pos, parent});
  return it->second;
}

// Pushes onto `out` every stack whose top is a byte element, reached from "match elements from `pos` on, then
// continue with stack `parent`" without consuming a byte; 0 when the whole input may end here. Left recursion
// was refused when the grammar was built, so this terminates; `expanded_` cuts repeated work in ambiguous
// grammars.
void CompiledGrammar::Expand(int32_t pos, int32_t parent, std::vector<int32_t>* out) {
  const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(pos)) << 32) | static_cast<uint32_t>(parent);
  if (std::find(expanded_.begin(), expanded_.end(), key) != expanded_.end()) return;
  expanded_.push_back(key);
  const GrammarElement& e = grammar_.elements()[static_cast<size_t>(pos)];
  switch (e.kind) {
    case GrammarElement::Kind::kBytes:
      out->push_back(Intern(pos, parent));
      return;
    case GrammarElement::Kind::kEnd:
      if (parent == 0) {
        out->push_back(0);
      } else {
        const StackNode n = nodes_[static_cast<size_t>(parent)];
        Expand(n.pos, n.parent, out);
      }
      return;
    case GrammarElement::Kind::kRule: {
      // A reference in tail position continues straight with `parent` (no frame to return to): loops written as
      // right recursion (x* is `star ::= x star | ""`) then run in constant stack depth, so their states repeat.
      const bool tail = grammar_.elements()[static_cast<size_t>(pos) + 1].kind == GrammarElement::Kind::kEnd;
      const int32_t ret = tail ? parent : Intern(pos + 1, parent);
      for (int32_t start : grammar_.alternatives(e.value)) Expand(start, ret, out);
      return;
    }
  }
}

int32_t CompiledGrammar::InternState(std::vector<int32_t> stacks) {
  if (stacks.empty()) return kDead;
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
  if (auto it = state_ids_.find(stacks); it != state_ids_.end()) return it->second;
  const int32_t id = static_cast<int32_t>(states_.size());
  State& s = states_.emplace_back();
  s.can_end = stacks.front() == 0;
  next_.resize(next_.size() + 256, kUnknown);
  loops_.push_back(-1);
  s.stacks = stacks;
  state_ids_.emplace(std::move(stacks), id);
  return id;
}

int32_t CompiledGrammar::InitialState() {
  if (initial_ == kUnknown) {
    std::vector<int32_t> stacks;
    expanded_.clear();
    for (int32_t start : grammar_.alternatives(grammar_.root())) Expand(start, 0, &stacks);
    initial_ = InternState(std::move(stacks));
  }
  return initial_;
}

int32_t CompiledGrammar::Next(int32_t state, uint8_t byte) {
  const size_t slot = static_cast<size_t>(state) * 256 + byte;
  if (next_[slot] != kUnknown) return next_[slot];
  std::vector<int32_t> out;
  expanded_.clear();
  for (int32_t stack : states_[static_cast<size_t>(state)].stacks) {
    if (stack == 0) continue;
    const StackNode n = nodes_[static_cast<size_t>(stack)];
    const GrammarElement& e = grammar_.elements()[static_cast<size_t>(n.pos)];
    if (grammar_.set(e.value).test(byte)) Expand(n.pos + 1, n.parent, &out);
  }
  const int32_t next = InternState(std::move(out));
  next_[slot] = next;  // after InternState, which may have grown the table
  return next;
}

bool CompiledGrammar::Loops(int32_t state) {
  State& s = states_[static_cast<size_t>(state)];
  if (!s.loop_known) {
    for (int b = 0; b < 256; ++b)
      if (Next(state, static_cast<uint8_t>(b)) == state) s.loop[static_cast<size_t>(b) >> 6] |= uint64_t{1} << (b & 63);
    s.loop_known = true;
    loops_[static_cast<size_t>(state)] = (s.loop[0] | s.loop[1] | s.loop[2] | s.loop[3]) != 0 ? 1 : 0;
  }
  return loops_[static_cast<size_t>(state)] == 1;
}

std::shared_ptr<const std::vector<uint32_t>> CompiledGrammar::Mask(int32_t state) {
  if (const auto& m = states_[static_cast<size_t>(state)].mask) return m;
  auto mask = std::make_shared<std::vector<uint32_t>>(static_cast<size_t>(vocab_->mask_words()), 0u);
  uint32_t* bits = mask->data();
  const TokenVocab::TrieNode* trie = vocab_->trie().data();
  const int32_t* first = vocab_->first_token().data();
  const int32_t* ids = vocab_->token_ids().data();
  const size_t nodes = vocab_->trie().size();
  auto allow = [&](int32_t begin, int32_t end) {
    for (int32_t t = begin; t < end; ++t) bits[static_cast<uint32_t>(ids[t]) >> 5] |= 1u << (ids[t] & 31);
  };
  walk_[0] = state;
  // Preorder walk: a node's parent state is walk_[depth - 1]; a refused byte skips the whole subtree.
  for (size_t i = 0; i < nodes;) {
    const TokenVocab::TrieNode node = trie[i];
    const int32_t from = walk_[node.depth - 1u];
    int32_t next = next_[static_cast<size_t>(from) * 256 + node.byte];
    if (next == kUnknown) next = Next(from, node.byte);
    if (next == kDead) {
      i = static_cast<size_t>(node.skip);
      continue;
    }
    walk_[node.depth] = next;
    // A state with self-loops (inside a string: one more ordinary character) whose loop bytes cover everything
    // below this node: every path below stays in it, so the whole subtree is allowed without walking it. The
    // loop bytes of a state are computed the first time it loops (inside a string, at once); from then on any
    // node that reaches the state takes the shortcut (e.g. after a multi-byte character brought it back).
    const int8_t loops = loops_[static_cast<size_t>(next)];
    if (node.skip > static_cast<int32_t>(i) + 1 && (loops == 1 || (loops < 0 && next == from && Loops(next)))) {
      const TokenVocab::ByteBits& loop = states_[static_cast<size_t>(next)].loop;
      const TokenVocab::ByteBits& below = vocab_->bytes_below(static_cast<int32_t>(i));
      bool covered = true;
      for (size_t k = 0; k < 4; ++k) covered &= (below[k] & ~loop[k]) == 0;
      if (covered) {
        allow(first[i], first[node.skip]);
        i = static_cast<size_t>(node.skip);
        continue;
      }
    }
    allow(first[i], first[i + 1]);
    ++i;
  }
  states_[static_cast<size_t>(state)].mask = mask;
  return mask;
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar)
    // The compiled grammar's caches change under its lock; its language never does.
    : grammar_(std::const_pointer_cast<CompiledGrammar>(std::move(grammar))) {
  std::lock_guard lock(grammar_->mu_);
  state_ = grammar_->InitialState();
}

std::shared_ptr<const std::vector<uint32_t>> GrammarMatcher::Mask() const {
  if (state_ == CompiledGrammar::kDead)
    return std::make_shared<std::vector<uint32_t>>(static_cast<size_t>(grammar_->vocab().mask_words()), 0u);
  std::lock_guard lock(grammar_->mu_);
  return grammar_->Mask(state_);
}

void GrammarMatcher::FillMask(std::span<uint32_t> out, std::span<const int32_t> eos_tokens) const {
  const auto mask = Mask();
  std::copy(mask->begin(), mask->end(), out.begin());
  if (CanEnd())
    for (int32_t t : eos_tokens)
      if (t >= 0 && static_cast<size_t>(t >> 5) < out.size()) out[static_cast<size_t>(t) >> 5] |= 1u << (t & 31);
}

bool GrammarMatcher::AcceptBytes(std::string_view bytes) {
  if (state_ == CompiledGrammar::kDead) return false;
  std::lock_guard lock(grammar_->mu_);
  int32_t s = state_;
  for (char c : bytes) {
    s = grammar_->Next(s, static_cast<uint8_t>(c));
    if (s == CompiledGrammar::kDead) return false;
  }
  state_ = s;
  return true;
}

bool GrammarMatcher::AcceptToken(int32_t token) {
  if (token < 0 || token >= grammar_->vocab_size()) return false;
  const std::string& bytes = grammar_->vocab().bytes(token);
  return !bytes.empty() && AcceptBytes(bytes);
}

bool GrammarMatcher::CanEnd() const {
  if (state_ == CompiledGrammar::kDead) return false;
  std::lock_guard lock(grammar_->mu_);
  return grammar_->states_[static_cast<size_t>(state_)].can_end;
}

bool GrammarMatcher::IsTerminated() const {
  if (state_ == CompiledGrammar::kDead) return true;
  std::lock_guard lock(grammar_->mu_);
  const auto& stacks = grammar_->states_[static_cast<size_t>(state_)].stacks;
  return stacks.size() == 1 && stacks[0] == 0;
}

}  // namespace parallm::structured
