// CompiledGrammar and GrammarMatcher: a grammar run as a pushdown automaton over bytes, and the allowed-token
// mask over a model's vocabulary for each state.
//
// Speed: a matcher state is a set of parse stacks; stacks are hash-consed (shared tails, one id per distinct
// stack) and stack sets are interned, so a state is one integer and the byte transitions between states are
// memoized in a 256-entry table per state: a lazily built DFA over the PDA's reachable configurations. The mask
// of a state is computed once by walking the vocabulary's byte trie against that DFA (a subtree is skipped as
// soon as its first byte is refused) and then cached, shared by every request that uses the same compiled
// grammar. In JSON most steps land in states seen before (inside a string, after a comma), so a step usually
// costs a cache lookup and a copy. A state that takes runs of one character class (inside a string; a counted
// string with k characters left) is not walked over the whole vocabulary: its mask is the vocabulary's
// precomputed class tokens of at most k characters plus a walk that skips every subtree of class tokens
// (RunTable).
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "structured/grammar.h"
#include "structured/token_vocab.h"

namespace parallm::structured {

class CompiledGrammar {
 public:
  CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenVocab> vocab);
  const Grammar& grammar() const { return grammar_; }
  const TokenVocab& vocab() const { return *vocab_; }
  int32_t vocab_size() const { return vocab_->size(); }
  // How many automaton states and cached masks exist so far (for tests and the benchmark).
  int32_t num_states() const;
  int32_t num_cached_masks() const;
  // How many of those came from a RunTable (a state that takes runs of a character class).
  int32_t num_run_masks() const;

 private:
  friend class GrammarMatcher;
  static constexpr int32_t kDead = -1;
  static constexpr int32_t kUnknown = -2;

  // One character from a state: the state that every valid non-ASCII character leads to (utf8), and the ASCII
  // bytes that lead there too; when the non-ASCII characters do not all lead to one state, the state that most
  // ASCII bytes lead to, and those bytes. target kDead when no byte leads anywhere.
  struct CharStep {
    int32_t target = kDead;
    std::array<uint64_t, 2> ascii{};
    bool utf8 = false;
  };
  // A state that takes runs of one character class (see RunTable): any `chars` characters of the class and then
  // none, or any number (kForever).
  struct Run {
    static constexpr int32_t kForever = -1;
    const RunTable* table = nullptr;  // null: not such a state
    int32_t chars = 0;
  };
  struct StackNode {
    int32_t pos;     // element index to match next (for a stack top: a kBytes element)
    int32_t parent;  // the stack below; 0 is the empty stack
  };
  struct State {
    std::vector<int32_t> stacks;  // sorted stack ids; 0 (empty stack) means the grammar may end here
    bool can_end = false;
    std::shared_ptr<const std::vector<uint32_t>> mask;
    // Bytes that lead back to this same state (inside a string, most of them); computed when first needed.
    bool loop_known = false;
    TokenTrie::ByteBits loop{};
    // Computed when first needed.
    bool step_known = false;
    CharStep step;
    bool run_known = false;
    Run run;
  };
  struct VectorHash {
    size_t operator()(const std::vector<int32_t>& v) const;
  };

  // All under mu_.
  int32_t InitialState();
  int32_t Next(int32_t state, uint8_t byte);
  std::shared_ptr<const std::vector<uint32_t>> Mask(int32_t state);
  // Whether `state` has self-loops (its loop bytes computed on first call).
  bool Loops(int32_t state);
  const CharStep& Step(int32_t state);
  const Run& RunOf(int32_t state);
  // ORs into `bits` the tokens of the vocabulary's trie that `state` allows; with a table, only those that are
  // not its class tokens (subtrees of class tokens are skipped: `bits` holds their answer already).
  void Walk(int32_t state, const RunTable* table, uint32_t* bits);
  int32_t Intern(int32_t pos, int32_t parent);
  void Expand(int32_t pos, int32_t parent, std::vector<int32_t>* out);
  int32_t InternState(std::vector<int32_t> stacks);

  Grammar grammar_;
  std::shared_ptr<const TokenVocab> vocab_;
  mutable std::mutex mu_;
  std::vector<StackNode> nodes_;
  std::unordered_map<uint64_t, int32_t> node_ids_;
  std::deque<State> states_;
  // next_[state * 256 + byte]: the state after `byte`, kDead, or kUnknown until first asked (one flat table: the
  // mask walk does one load per trie node when the transition is known).
  std::vector<int32_t> next_;
  // Per state: -1 until its loop bytes are known, then 1 when it has self-loops, 0 when not (one byte per state:
  // the mask walk asks at every node it accepts).
  std::vector<int8_t> loops_;
  std::unordered_map<std::vector<int32_t>, int32_t, VectorHash> state_ids_;
  std::vector<uint64_t> expanded_;  // (pos, parent) pairs seen in the current expansion
  std::vector<int32_t> walk_;       // per trie depth: the state reached (mask computation)
  std::vector<uint64_t> preorder_;  // the walk's allowed tokens, by position in its trie's token_ids()
  int32_t initial_ = kUnknown;
};

// One request's position in its grammar. Not thread-safe itself; many matchers may share a CompiledGrammar
// from different threads.
class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar);

  // The allowed next tokens as a bitmask (bit t of word t / 32), without end-of-sequence tokens: those are allowed
  // exactly when CanEnd(). Shared and immutable.
  std::shared_ptr<const std::vector<uint32_t>> Mask() const;
  // Writes Mask() into `out` (mask_words() words) and sets the bits of `eos_tokens` when CanEnd().
  void FillMask(std::span<uint32_t> out, std::span<const int32_t> eos_tokens) const;
  // Advances by one token's bytes; false (and no change) when the grammar does not allow them.
  bool AcceptToken(int32_t token);
  bool AcceptBytes(std::string_view bytes);
  // The output so far is a complete sentence of the grammar.
  bool CanEnd() const;
  // Complete, and nothing may follow: only end-of-sequence is allowed.
  bool IsTerminated() const;
  const CompiledGrammar& grammar() const { return *grammar_; }

 private:
  std::shared_ptr<CompiledGrammar> grammar_;
  int32_t state_;
};

}  // namespace parallm::structured
