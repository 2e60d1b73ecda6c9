// Scheduler: decides, each step, which requests run and how many of their tokens (vLLM v1's phase-free
// design: a request's num_computed_tokens catches up to its tokens; chunked prefill and prefix-cache hits fall
// out of that). Running requests first (decode before new prefill), then waiting ones in (priority, arrival)
// order, within a token budget and a sequence limit; preempts by recompute when blocks run out. Emits plain
// data (SchedulerOutput) and never touches tensors.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "cache/kv_cache_manager.h"
#include "engine/request.h"
#include "engine/speculation.h"
#include "model/forward_batch.h"

namespace parallm {

struct SchedulerConfig {
  int32_t max_num_seqs = 64;             // requests running at once
  int32_t max_num_batched_tokens = 512;  // tokens per step (prefill chunks + decodes)
  int32_t max_model_len = 4096;          // prompt + output limit per request
  SpeculativeConfig speculative;         // drafts for decoding requests (off by default)
  // vLLM's max_loras: distinct LoRA adapters among the running requests (so in any one step) at most this many;
  // a waiting request for another adapter waits until one of them has no running request. 0: no limit.
  int32_t max_loras = 0;
  // Hybrid models: their SSD chunk (SsdChunk in model/mamba_mixer.h; 0: not a hybrid model). A prefill chunk that
  // ends inside the prompt's whole SSD chunks ends on a multiple of it, so that each of those chunks is computed in
  // one step (the invariant of model/mamba_mixer.h); max_num_batched_tokens must be at least this.
  int32_t ssd_chunk = 0;
  // The model runs each prompt's tokens below Bf16PromptEnd on MatMul's bf16 formula (Model::PromptsTakeBf16;
  // PromptRows in model/decoder.cpp): prefix caching then keys the blocks from there on apart (KVCacheManager's
  // int8_from), since another request's prompt would compute them the other way.
  bool bf16_prompts = false;
};

struct ScheduledRequest {
  Request* request;
  int32_t num_computed_tokens;  // before this step
  int32_t num_new_tokens;       // computed this step: tokens [num_computed_tokens, + num_new_tokens)
  bool samples;                 // the chunk reaches the request's last token: a new token is sampled
  // The last num_draft_tokens of the new tokens are the request's draft_tokens (speculative decoding): the
  // step samples at each of them as well, num_draft_tokens + 1 samples in all.
  int32_t num_draft_tokens = 0;
};

struct SchedulerOutput {
  std::vector<ScheduledRequest> scheduled;
  std::vector<RequestId> preempted;
  int32_t num_tokens = 0;
  bool empty() const { return scheduled.empty(); }
};

class Scheduler {
 public:
  Scheduler(const SchedulerConfig& config, KVCacheManager* kv);

  // Takes ownership; the request waits for its first Schedule().
  void Add(std::unique_ptr<Request> request);
  // Finishes a request at once (cancellation), and the copies forked from it: blocks are freed now. Unknown ids
  // are ignored.
  void Cancel(RequestId id) { Abort(id, FinishReason::kCancelled, /*with_copies=*/true); }
  // Finishes one request now with `reason` (e.g. kStop when a stop string matched in its text), and with
  // `with_copies` the copies forked from it too.
  void Abort(RequestId id, FinishReason reason, bool with_copies);
  // A copy forked from a running request after its prompt, with its first token already sampled. When
  // `shares_kv` its blocks were forked from the parent (KVCacheManager::Fork) and it runs at once; otherwise it
  // waits and recomputes (from the prefix cache when it can).
  void AddForked(std::unique_ptr<Request> child, const SampleResult& first, bool shares_kv);
  // Whether one more request may run now (max_num_seqs).
  bool HasRoomToRun() const { return static_cast<int32_t>(running_.size()) < config_.max_num_seqs; }

  // With a draft model: the running requests that decode next step and may draft (none when drafting is off this
  // step, disable_by_batch_size), each with how many tokens it may draft. The engine fills their model_draft
  // before Schedule.
  std::vector<std::pair<Request*, int32_t>> DraftCandidates() const;

  SchedulerOutput Schedule();
  // After the step ran: advances num_computed_tokens, caches full blocks, appends sampled tokens
  // (`sampled[i]` belongs to the i-th scheduled request that samples: one token, or with a draft the accepted
  // draft tokens and the one sampled after them), applies stop conditions, frees finished requests' blocks.
  // Returns the requests that finished this step (ownership passes to the caller).
  std::vector<std::unique_ptr<Request>> Update(const SchedulerOutput& out,
                                               const std::vector<std::vector<SampleResult>>& sampled);

  // Requests still waiting or running.
  int32_t num_unfinished() const { return static_cast<int32_t>(waiting_.size() + running_.size()); }
  // Requests finished between steps (cancelled, stopped) that the next Update hands out.
  bool has_finished_to_report() const { return !finished_.empty(); }
  int32_t num_running() const { return static_cast<int32_t>(running_.size()); }
  int32_t num_waiting() const { return static_cast<int32_t>(waiting_.size()); }
  const std::vector<Request*>& running() const { return running_; }
  const std::deque<Request*>& waiting() const { return waiting_; }
  int64_t num_preemptions() const { return num_preemptions_; }
  // Speculative decoding's totals over all requests.
  struct SpecStats {
    int64_t num_drafts = 0;           // (request, step) pairs that computed a draft
    int64_t num_draft_tokens = 0;
    int64_t num_accepted_tokens = 0;
  };
  const SpecStats& spec_stats() const { return spec_stats_; }

  // Aborts if any invariant is broken: every running request holds blocks for its computed tokens, waiting
  // requests hold none, no request is in two queues, the cache manager's own invariants; for a hybrid model, every
  // running request's computed tokens end on an SSD-chunk boundary or past its prompt's whole chunks.
  void CheckIntegrity() const;

 private:
  void Preempt(Request* r);
  void Finish(Request* r, FinishReason reason);
  bool StopsAfter(const Request& r) const;
  // How many of `num_new` tokens from `start` a step may compute for `r`: all of them, or with ssd_chunk set and the
  // end inside the prompt's whole SSD chunks, down to the last multiple of ssd_chunk (possibly none).
  int32_t SsdAlign(const Request& r, int32_t start, int32_t num_new) const;
  // The request's first position computed by the int8 formula when prompts run on the bf16 one (Bf16PromptEnd),
  // else -1: KVCacheManager's int8_from.
  int32_t Int8From(const Request& r) const { return config_.bf16_prompts ? Bf16PromptEnd(r.num_prompt_tokens) : -1; }
  // Caches r's full blocks among its computed tokens (`tokens`: its tokens, and accepted draft tokens after them),
  // keyed by its adapter and Int8From.
  void CacheFullBlocks(const Request& r, std::span<const int32_t> tokens);
  // Where the whole SSD chunks of r's prompt end (0 without ssd_chunk): prefill stays on chunk boundaries before it.
  int32_t WholeSsdChunksEnd(const Request& r) const;
  // Whether decoding requests draft this step (speculation on, and not over disable_by_batch_size requests).
  bool Drafting() const;
  // How many tokens a decoding request may draft: at most `budget`, and never past its max_tokens or the context.
  int32_t DraftRoom(const Request& r, int32_t budget) const;
  // The draft for a decoding request, at most `budget` tokens and never past its max_tokens or the context: by
  // prompt lookup, or what fits of the draft model's proposal.
  std::vector<int32_t> ProposeDraft(const Request& r, int32_t budget) const;
  // Appends a sampled token and finishes the request if it stops; returns whether it finished.
  bool AppendToken(Request* r, const SampleResult& result);

  SchedulerConfig config_;
  KVCacheManager* kv_;
  std::unordered_map<RequestId, std::unique_ptr<Request>> requests_;  // every unfinished request
  std::deque<Request*> waiting_;   // sorted by (priority, arrival); preempted requests go back to the front
  std::vector<Request*> running_;  // in the order they started running
  std::vector<std::unique_ptr<Request>> finished_;  // cancelled between steps, handed out by the next Update
  int64_t num_preemptions_ = 0;
  SpecStats spec_stats_;
};

}  // namespace parallm
