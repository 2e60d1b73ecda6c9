// The pushdown automaton: stack expansion, memoized byte transitions, and the mask walk over the token trie.
#include "structured/matcher.h"

#include <algorithm>
#include <utility>

#include "structured/run_table.h"

namespace parallm::structured {

size_t CompiledGrammar::VectorHash::operator()(const std::vector<int32_t>& v) const {
  uint64_t h = 1469598103934665603ull;
  for (int32_t x : v) h = (h ^ static_cast<uint32_t>(x)) * 1099511628211ull;
  return static_cast<size_t>(h);
}

CompiledGrammar::CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenVocab> vocab)
    : grammar_(std::move(grammar)), vocab_(std::move(vocab)) {
  nodes_.push_back({-1, -1});  // id 0: the empty stack
  walk_.resize(static_cast<size_t>(vocab_->trie().max_depth()) + 1);
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

int32_t CompiledGrammar::num_run_masks() const {
  std::lock_guard lock(mu_);
  int32_t n = 0;
  for (const State& s : states_) n += s.mask != nullptr && s.run.table != nullptr;
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

const CompiledGrammar::CharStep& CompiledGrammar::Step(int32_t state) {
  // States live in a deque: the reference stays valid while Next() adds states.
  State& s = states_[static_cast<size_t>(state)];
  if (s.step_known) return s.step;
  s.step_known = true;
  // Every valid non-ASCII character must reach one same state. Its bytes are followed one at a time beside the
  // UTF-8 decoder's state (Utf8Step: no overlong forms, no surrogates, nothing past U+10FFFF), as (grammar state,
  // decoder state) pairs in the middle of a character, deduplicated per byte position.
  constexpr size_t kMaxPairs = 64;  // distinct pairs at one byte position, beyond which we give up
  int32_t target = kUnknown;
  bool utf8 = true;
  std::vector<std::pair<int32_t, int>> level, next_level;
  auto add = [](std::vector<std::pair<int32_t, int>>* v, std::pair<int32_t, int> x) {
    if (std::find(v->begin(), v->end(), x) == v->end()) v->push_back(x);
  };
  for (int b = 0xC2; b <= 0xF4 && utf8; ++b) {  // the lead bytes
    const int32_t n = Next(state, static_cast<uint8_t>(b));
    if (n == kDead) utf8 = false;
    else add(&level, {n, Utf8Step(0, static_cast<uint8_t>(b))});
  }
  while (utf8 && !level.empty()) {
    next_level.clear();
    for (const auto& [from, decoder] : level)
      for (int b = 0x80; b <= 0xBF && utf8; ++b) {  // the continuation bytes this character may take next
        const int after = Utf8Step(decoder, static_cast<uint8_t>(b));
        if (after < 0) continue;
        const int32_t n = Next(from, static_cast<uint8_t>(b));
        if (n == kDead || (after == 0 && target != kUnknown && n != target)) utf8 = false;
        else if (after == 0) target = n;  // a whole character
        else add(&next_level, {n, after});
      }
    if (next_level.size() > kMaxPairs) utf8 = false;
    level.swap(next_level);
  }
  if (!utf8) {
    // No common state for the other characters: the ASCII bytes that share the most common one.
    std::vector<std::pair<int32_t, int>> counts;
    for (int b = 0; b < 128; ++b) {
      const int32_t n = Next(state, static_cast<uint8_t>(b));
      if (n == kDead) continue;
      auto it = std::find_if(counts.begin(), counts.end(), [&](const auto& c) { return c.first == n; });
      if (it == counts.end()) counts.emplace_back(n, 1);
      else ++it->second;
    }
    target = kDead;
    int best = 0;
    for (const auto& [n, count] : counts)
      if (count > best) {
        best = count;
        target = n;
      }
    if (target == kDead) return s.step;
  }
  s.step.target = target;
  s.step.utf8 = utf8;
  for (int b = 0; b < 128; ++b)
    if (Next(state, static_cast<uint8_t>(b)) == target) s.step.ascii[static_cast<size_t>(b) >> 6] |= uint64_t{1} << (b & 63);
  return s.step;
}

const CompiledGrammar::Run& CompiledGrammar::RunOf(int32_t state) {
  State& s = states_[static_cast<size_t>(state)];
  if (s.run_known) return s.run;
  s.run_known = true;
  // The class is what this state's first character may be; an ASCII-only class must be wide enough for its runs
  // to matter ([a-zA-Z0-9_+-] in an e-mail address, not the digits of a number): a table is built per class.
  constexpr int kMinAsciiClass = 16;
  const CharStep first = Step(state);
  if (first.target == kDead) return s.run;
  const RunClass cls{first.ascii, first.utf8};
  if (!cls.utf8 && __builtin_popcountll(cls.ascii[0]) + __builtin_popcountll(cls.ascii[1]) < kMinAsciiClass)
    return s.run;
  // Follow the states that one character of the class leads to, until the class is refused whole (a counted
  // string at 0 left) or a state comes back (a loop).
  auto refuses_class = [&](int32_t x) {
    for (int b = 0; b < 128; ++b)
      if ((cls.ascii[static_cast<size_t>(b) >> 6] >> (b & 63) & 1) != 0 && Next(x, static_cast<uint8_t>(b)) != kDead)
        return false;
    if (cls.utf8)
      for (int b = 0xC2; b <= 0xF4; ++b)
        if (Next(x, static_cast<uint8_t>(b)) != kDead) return false;
    return true;
  };
  std::vector<int32_t> chain = {state};
  int32_t chars = -2;  // unknown
  for (int32_t j = 0; j <= RunTable::kMaxChars; ++j) {
    const int32_t x = chain.back();
    if (j > 0 && refuses_class(x)) {
      chars = j;
      break;
    }
    const CharStep& st = Step(x);
    const bool covers = (cls.ascii[0] & ~st.ascii[0]) == 0 && (cls.ascii[1] & ~st.ascii[1]) == 0 && (st.utf8 || !cls.utf8);
    if (st.target == kDead || !covers) return s.run;  // takes some of the class, not all: walk it
    if (std::find(chain.begin(), chain.end(), st.target) != chain.end()) {
      chars = Run::kForever;
      break;
    }
    chain.push_back(st.target);
  }
  if (chars == -2) return s.run;  // longer than the table counts
  const RunTable* table = vocab_->Runs(cls);
  if (table == nullptr) return s.run;
  s.run.table = table;
  s.run.chars = chars;
  return s.run;
}

void CompiledGrammar::Walk(int32_t state, const RunTable* table, uint32_t* bits) {
  const TokenTrie& trie = vocab_->trie();
  const TokenTrie::Node* nodes = trie.nodes().data();
  const int32_t* first = trie.first_token().data();
  const int32_t* ids = trie.token_ids().data();
  const size_t num_nodes = trie.nodes().size();
  const size_t num_tokens = trie.token_ids().size();
  // The walk marks allowed tokens by their preorder position, where a subtree is one range (set a word at a
  // time); they are turned into token ids at the end.
  preorder_.assign((num_tokens + 63) / 64, 0);
  uint64_t* pre = preorder_.data();
  size_t allowed = 0;
  auto allow = [&](int32_t begin, int32_t end) {
    if (begin >= end) return;
    allowed += static_cast<size_t>(end - begin);
    const size_t b = static_cast<size_t>(begin), e = static_cast<size_t>(end);
    const size_t wb = b >> 6, we = (e - 1) >> 6;
    const uint64_t head = ~uint64_t{0} << (b & 63), tail = ~uint64_t{0} >> (63 - ((e - 1) & 63));
    if (wb == we) {
      pre[wb] |= head & tail;
      return;
    }
    pre[wb] |= head;
    for (size_t w = wb + 1; w < we; ++w) pre[w] = ~uint64_t{0};
    pre[we] |= tail;
  };
  walk_[0] = state;
  // Preorder walk: a node's parent state is walk_[depth - 1]; a refused byte skips the whole subtree.
  for (size_t i = 0; i < num_nodes;) {
    const TokenTrie::Node node = nodes[i];
    if (table != nullptr && table->others_before[static_cast<size_t>(first[i])] ==
                                table->others_before[static_cast<size_t>(first[node.skip])]) {
      i = static_cast<size_t>(node.skip);  // only class tokens below: their answer is in `bits`
      continue;
    }
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
      const TokenTrie::ByteBits& loop = states_[static_cast<size_t>(next)].loop;
      const TokenTrie::ByteBits& below = trie.bytes_below(static_cast<int32_t>(i));
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
  // Into token ids: the allowed positions, or when they are most of the trie, every token of the trie but the
  // refused ones (a state inside a string allows nearly all).
  const size_t words = preorder_.size();
  if (allowed * 2 <= num_tokens) {
    for (size_t w = 0; w < words; ++w)
      for (uint64_t x = pre[w]; x != 0; x &= x - 1) {
        const int32_t id = ids[w * 64 + static_cast<size_t>(__builtin_ctzll(x))];
        bits[static_cast<uint32_t>(id) >> 5] |= 1u << (id & 31);
      }
    return;
  }
  // With a table: the class tokens are answered in `bits` already (those the walk skipped too), so only the
  // other tokens are set here and cleared where refused.
  const std::vector<uint32_t>& all = trie.tokens();
  if (table == nullptr)
    for (size_t w = 0; w < all.size(); ++w) bits[w] |= all[w];
  else
    for (size_t w = 0; w < all.size(); ++w) bits[w] |= all[w] & ~table->all[w];
  for (size_t w = 0; w < words; ++w) {
    uint64_t x = table == nullptr ? ~pre[w] : ~pre[w] & ~table->class_at[w];
    if (w == words - 1 && (num_tokens & 63) != 0) x &= (uint64_t{1} << (num_tokens & 63)) - 1;
    for (; x != 0; x &= x - 1) {
      const int32_t id = ids[w * 64 + static_cast<size_t>(__builtin_ctzll(x))];
      bits[static_cast<uint32_t>(id) >> 5] &= ~(1u << (id & 31));
    }
  }
}

std::shared_ptr<const std::vector<uint32_t>> CompiledGrammar::Mask(int32_t state) {
  if (const auto& m = states_[static_cast<size_t>(state)].mask) return m;
  std::shared_ptr<std::vector<uint32_t>> mask;
  const Run& run = RunOf(state);
  if (run.table != nullptr) {
    // The class tokens come precomputed; the walk answers the others.
    mask = std::make_shared<std::vector<uint32_t>>(run.chars == Run::kForever
                                                       ? run.table->all
                                                       : run.table->at_most[static_cast<size_t>(run.chars)]);
  } else {
    mask = std::make_shared<std::vector<uint32_t>>(static_cast<size_t>(vocab_->mask_words()), 0u);
  }
  Walk(state, run.table, mask->data());
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
