// DraftModel: loading and checking a draft model, and its batched greedy proposals over its own KV cache.
#include "engine/draft_model.h"

#include <algorithm>

#include "model/synthetic_model.h"
#include "util/check.h"

namespace parallm {

Status CheckDraftModel(const Model& draft, const Model& target) {
  const int32_t dv = draft.config().vocab, tv = target.config().vocab;
  if (dv != tv)
    return Err("the draft model's vocabulary has {} tokens and the target's {}: a draft model must share the target's "
               "vocabulary (the same tokenizer)", dv, tv);
  const std::optional<Vocab>& a = draft.loaded().vocab;
  const std::optional<Vocab>& b = target.loaded().vocab;
  if (a.has_value() && b.has_value() && a->tokens != b->tokens) {
    size_t i = 0;
    while (i < a->tokens.size() && i < b->tokens.size() && a->tokens[i] == b->tokens[i]) ++i;
    return Err("the draft model's vocabulary differs from the target's (token {} is \"{}\" in the draft, \"{}\" in the "
               "target): a draft model must share the target's tokenizer", i,
               i < a->tokens.size() ? a->tokens[i] : "", i < b->tokens.size() ? b->tokens[i] : "");
  }
  if (draft.has_state())
    return Err("the draft model is a hybrid (Mamba) model: its recurrent state cannot drop rejected draft tokens");
  return Status::Ok();
}

Result<std::shared_ptr<Model>> LoadDraftModel(const SpeculativeConfig& config, const Model& target) {
  PARALLM_CHECK(config.method == SpeculativeConfig::Method::kDraftModel);
  Result<std::unique_ptr<Model>> draft = LoadModelSpec(config.model);
  if (!draft.ok()) return draft.status().WithContext("speculative draft model");
  if (Status s = CheckDraftModel(**draft, target); !s.ok()) return s.WithContext("speculative draft model " + config.model);
  return std::shared_ptr<Model>(std::move(*draft));
}

DraftModel::DraftModel(std::shared_ptr<Model> model, int32_t num_blocks, int32_t block_size, KvDtype dtype,
                       int32_t max_batch_tokens, ThreadPool* pool)
    : model_(std::move(model)),
      kv_storage_(model_->KvShape(num_blocks, block_size, dtype)),
      kv_manager_(num_blocks, block_size, /*enable_prefix_caching=*/false, model_->config().UniformSlidingWindow()),
      max_batch_tokens_(std::max(1, max_batch_tokens)),
      pool_(pool) {
  PARALLM_CHECK_MSG(!model_->has_state(), "a hybrid model cannot draft (CheckDraftModel)");
}

void DraftModel::Free(RequestId id) {
  kv_manager_.Free(id);
  cached_.erase(id);
}

std::vector<int32_t> DraftModel::Run() {
  batch_.tokens = tokens_;
  batch_.positions = positions_;
  batch_.slot_mapping = slots_;
  batch_.logits_indices = logits_indices_;
  // The draft's tokens are its greedy picks: only each row's argmax comes back (MatMulArgMax), no logits.
  std::vector<int32_t> greedy(logits_indices_.size());
  model_->ForwardArgMax(batch_, kv_storage_, greedy.data(), pool_);
  return greedy;
}

void DraftModel::Propose(std::span<Task> tasks) {
  const int32_t bs = kv_manager_.block_size();
  const int32_t context = model_->config().context_length;
  // Each live task: its index in `tasks` and how many tokens it drafts.
  struct Live {
    Task* task;
    int32_t num_draft;
    std::vector<int32_t>* cached;
  };
  std::vector<Live> live;
  for (Task& t : tasks) {
    t.draft->clear();
    const int32_t n = static_cast<int32_t>(t.tokens.size());
    // The draft feeds positions up to n + num_draft - 2 (its last token is proposed, not fed).
    const int32_t num_draft = std::min(t.max_draft, context - n + 1);
    if (n == 0 || num_draft <= 0) continue;
    auto [it, added] = cached_.try_emplace(t.id);
    std::vector<int32_t>& cached = it->second;
    // Keep what still matches the request's tokens (drafted tokens it rejected are dropped); the last token runs
    // again at least, for the logits the first draft token comes from.
    const size_t common = static_cast<size_t>(
        std::mismatch(cached.begin(), cached.end(), t.tokens.begin(), t.tokens.end()).first - cached.begin());
    cached.resize(std::min(common, static_cast<size_t>(n - 1)));
    const int32_t kept = static_cast<int32_t>(cached.size());
    if (!kv_manager_.AllocateSlots(t.id, kept, n - kept + num_draft - 1)) {
      if (added) cached_.erase(it);  // no room: no draft this step (a draft never waits or preempts)
      continue;
    }
    live.push_back({&t, num_draft, &cached});
  }
  if (live.empty()) return;

  auto add = [&](const Live& l, std::span<const int32_t> new_tokens) {
    std::vector<int32_t>& cached = *l.cached;
    const int32_t from = static_cast<int32_t>(cached.size());
    const int32_t end = from + static_cast<int32_t>(new_tokens.size());
    std::span<const int32_t> table = kv_manager_.BlockTable(l.task->id);
    PARALLM_CHECK(static_cast<int64_t>(table.size()) * bs >= end);
    batch_.sequences.push_back(SequenceSlice{static_cast<int32_t>(tokens_.size()), end - from, end, table});
    for (int32_t p = from; p < end; ++p) {
      tokens_.push_back(new_tokens[static_cast<size_t>(p - from)]);
      positions_.push_back(p);
      slots_.push_back(static_cast<int64_t>(table[static_cast<size_t>(p / bs)]) * bs + p % bs);
    }
    cached.insert(cached.end(), new_tokens.begin(), new_tokens.end());
    logits_indices_.push_back(static_cast<int32_t>(tokens_.size()) - 1);
  };
  auto clear = [&] {
    batch_.sequences.clear();
    tokens_.clear();
    positions_.clear();
    slots_.clear();
    logits_indices_.clear();
  };

  // First the tokens each request has that the draft's cache lacks (one or two after an accepted step, the whole
  // context the first time), in passes of at most max_batch_tokens: the last one's logits give the first draft token.
  for (bool pending = true; pending;) {
    clear();
    pending = false;
    int32_t budget = max_batch_tokens_;
    std::vector<Live*> finishing;
    for (Live& l : live) {
      const int32_t from = static_cast<int32_t>(l.cached->size());
      const int32_t n = static_cast<int32_t>(l.task->tokens.size());
      if (from >= n) continue;
      if (budget == 0) {
        pending = true;
        continue;
      }
      const int32_t m = std::min(n - from, budget);
      add(l, l.task->tokens.subspan(static_cast<size_t>(from), static_cast<size_t>(m)));
      budget -= m;
      if (from + m == n) {
        finishing.push_back(&l);
      } else {
        logits_indices_.pop_back();  // a chunk that stops short of the last token samples nothing
        pending = true;
      }
    }
    if (tokens_.empty()) break;
    const std::vector<int32_t> greedy = Run();
    PARALLM_CHECK(greedy.size() == finishing.size());
    for (size_t i = 0; i < finishing.size(); ++i) finishing[i]->task->draft->push_back(greedy[i]);
  }
  // Then one token a pass: each draft token fed back for the next, while a request wants more.
  for (int32_t step = 1;; ++step) {
    clear();
    std::vector<Live*> feeding;
    for (Live& l : live)
      if (step < l.num_draft) {
        const int32_t last = l.task->draft->back();
        add(l, std::span<const int32_t>(&last, 1));
        feeding.push_back(&l);
      }
    if (feeding.empty()) break;
    const std::vector<int32_t> greedy = Run();
    for (size_t i = 0; i < feeding.size(); ++i) feeding[i]->task->draft->push_back(greedy[i]);
  }
}

}  // namespace parallm
