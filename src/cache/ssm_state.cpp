// SsmStateStorage and StateSlotPool: f32 state per Mamba layer, slot-major; a sorted free list of slots.
#include "cache/ssm_state.h"

#include <algorithm>
#include <functional>

#include "util/check.h"

namespace parallm {

int SsmStateShape::num_state_layers() const {
  return static_cast<int>(std::count(has_state.begin(), has_state.end(), 1));
}

size_t SsmStateShape::BytesPerSlot() const {
  return sizeof(float) * static_cast<size_t>(num_state_layers()) * static_cast<size_t>(conv_floats + ssm_floats);
}

SsmStateStorage::SsmStateStorage(const SsmStateShape& shape) : shape_(shape) {
  // No slot at all: a budget too small for one request's state (the engine then refuses every request).
  PARALLM_CHECK(shape.num_slots >= 0 && shape.conv_floats >= 0 && shape.ssm_floats > 0);
  conv_.resize(shape.has_state.size());
  ssm_.resize(shape.has_state.size());
  for (size_t l = 0; l < shape.has_state.size(); ++l) {
    if (!shape.has_state[l]) continue;
    conv_[l].assign(static_cast<size_t>(shape.conv_floats * shape.num_slots), 0.0f);
    ssm_[l].assign(static_cast<size_t>(shape.ssm_floats * shape.num_slots), 0.0f);
  }
}

float* SsmStateStorage::Conv(int layer, int slot) {
  PARALLM_CHECK(layer >= 0 && static_cast<size_t>(layer) < conv_.size() && shape_.has_state[static_cast<size_t>(layer)]);
  PARALLM_CHECK(slot >= 0 && slot < shape_.num_slots);
  return conv_[static_cast<size_t>(layer)].data() + static_cast<int64_t>(slot) * shape_.conv_floats;
}

float* SsmStateStorage::Ssm(int layer, int slot) {
  PARALLM_CHECK(layer >= 0 && static_cast<size_t>(layer) < ssm_.size() && shape_.has_state[static_cast<size_t>(layer)]);
  PARALLM_CHECK(slot >= 0 && slot < shape_.num_slots);
  return ssm_[static_cast<size_t>(layer)].data() + static_cast<int64_t>(slot) * shape_.ssm_floats;
}

void SsmStateStorage::Reset(int slot) {
  for (size_t l = 0; l < shape_.has_state.size(); ++l) {
    if (!shape_.has_state[l]) continue;
    std::fill_n(Conv(static_cast<int>(l), slot), shape_.conv_floats, 0.0f);
    std::fill_n(Ssm(static_cast<int>(l), slot), shape_.ssm_floats, 0.0f);
  }
}

void SsmStateStorage::CopySlot(int src, int dst) {
  for (size_t l = 0; l < shape_.has_state.size(); ++l) {
    if (!shape_.has_state[l]) continue;
    const int layer = static_cast<int>(l);
    std::copy_n(Conv(layer, src), shape_.conv_floats, Conv(layer, dst));
    std::copy_n(Ssm(layer, src), shape_.ssm_floats, Ssm(layer, dst));
  }
}

StateSlotPool::StateSlotPool(int num_slots) : num_slots_(num_slots) {
  PARALLM_CHECK(num_slots >= 0);
  for (int s = num_slots - 1; s >= 0; --s) free_.push_back(s);
}

int StateSlotPool::Allocate() {
  if (free_.empty()) return -1;
  const int s = free_.back();
  free_.pop_back();
  return s;
}

void StateSlotPool::Free(int slot) {
  PARALLM_CHECK_MSG(slot >= 0 && slot < num_slots_, "state slot out of range");
  auto at = std::lower_bound(free_.begin(), free_.end(), slot, std::greater<int>());
  PARALLM_CHECK_MSG(at == free_.end() || *at != slot, "state slot freed twice");
  free_.insert(at, slot);
}

void StateSlotPool::CheckIntegrity() const {
  for (size_t i = 0; i < free_.size(); ++i) {
    PARALLM_CHECK(free_[i] >= 0 && free_[i] < num_slots_);
    if (i > 0) PARALLM_CHECK_MSG(free_[i - 1] > free_[i], "state slot free list not strictly descending");
  }
}

}  // namespace parallm
