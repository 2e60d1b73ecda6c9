// Per-request recurrent state of hybrid models (Nemotron-H's Mamba-2 layers), beside the paged KV cache: a fixed
// number of state slots, each holding every Mamba layer's conv window and SSM state for one request. Unlike KV
// blocks a slot does not grow with the context: a request owns exactly one from admission until it finishes, is
// preempted or is cancelled. Which request owns which slot is the scheduler's business (StateSlotPool); the model
// reads and writes a sequence's slot through SequenceSlice::state_slot.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace parallm {

struct SsmStateShape {
  std::vector<char> has_state;  // [n_layers]: whether layer l is a Mamba layer (the others hold nothing)
  int64_t conv_floats = 0;      // per Mamba layer and slot: (conv_kernel - 1) x conv_dim
  int64_t ssm_floats = 0;       // per Mamba layer and slot: ssm_heads x ssm_head_dim x ssm_state
  int num_slots = 0;

  int num_state_layers() const;
  // Bytes one slot holds over all Mamba layers (what one request's state costs, whatever its length).
  size_t BytesPerSlot() const;
};

class SsmStateStorage {
 public:
  explicit SsmStateStorage(const SsmStateShape& shape);

  const SsmStateShape& shape() const { return shape_; }
  int num_slots() const { return shape_.num_slots; }
  size_t TotalBytes() const { return shape_.BytesPerSlot() * static_cast<size_t>(shape_.num_slots); }

  // Slot `slot` of Mamba layer `layer`: the conv window [conv_kernel - 1, conv_dim] (oldest first) and the SSM state
  // [heads, head_dim, state].
  float* Conv(int layer, int slot);
  float* Ssm(int layer, int slot);
  // Zeroes a slot (a sequence starting at position 0).
  void Reset(int slot);
  // Copies every layer's state of slot `src` into `dst` (n > 1: the copies fork from the parent's state).
  void CopySlot(int src, int dst);

 private:
  SsmStateShape shape_;
  std::vector<std::vector<float>> conv_, ssm_;  // per layer: [num_slots * conv_floats], [num_slots * ssm_floats]
};

// Which slots are free: handed out lowest id first, so tests can assert exact slot ids.
class StateSlotPool {
 public:
  explicit StateSlotPool(int num_slots);
  int num_slots() const { return num_slots_; }
  int num_free() const { return static_cast<int>(free_.size()); }
  // A free slot, or -1 when none is.
  int Allocate();
  void Free(int slot);
  // Aborts if a slot is free twice or out of range.
  void CheckIntegrity() const;

 private:
  int num_slots_;
  std::vector<int> free_;  // kept sorted descending: back() is the lowest free id
};

}  // namespace parallm
