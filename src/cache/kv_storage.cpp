// PagedKvStorage: f32 keys and values per layer, slot-major.
#include "cache/kv_storage.h"

#include <algorithm>
#include <new>

#include "util/check.h"

namespace parallm {

PagedKvStorage::PagedKvStorage(const KvStorageShape& shape) : shape_(shape) {
  PARALLM_CHECK(shape.n_layers > 0 && shape.n_kv_heads > 0 && shape.head_dim > 0);
  PARALLM_CHECK(shape.block_size > 0 && shape.num_blocks > 0);
  slot_floats_ = static_cast<int64_t>(shape.n_kv_heads) * shape.head_dim;
  size_t floats = static_cast<size_t>(num_slots() * slot_floats_);
  // calloc, not std::vector<float>(floats): a large calloc maps zero pages that the OS fills in as blocks are
  // first written, where a vector writes every byte up front. With the default 2 GiB cache that was most of a
  // small model's start-up (seconds of page faults, tens under load), and RSS now shows the KV memory in use.
  for (int l = 0; l < shape.n_layers; ++l) {
    for (auto* buffers : {&k_, &v_}) {
      buffers->emplace_back(static_cast<float*>(std::calloc(floats, sizeof(float))));
      if (!buffers->back()) throw std::bad_alloc();
    }
  }
}

void PagedKvStorage::CopyBlock(int32_t src, int32_t dst) {
  PARALLM_CHECK(src >= 0 && src < shape_.num_blocks && dst >= 0 && dst < shape_.num_blocks);
  const int64_t n = slot_floats_ * shape_.block_size;
  for (int l = 0; l < shape_.n_layers; ++l) {
    std::copy_n(Key(l, static_cast<int64_t>(src) * shape_.block_size), n, Key(l, static_cast<int64_t>(dst) * shape_.block_size));
    std::copy_n(Value(l, static_cast<int64_t>(src) * shape_.block_size), n,
                Value(l, static_cast<int64_t>(dst) * shape_.block_size));
  }
}

size_t PagedKvStorage::BytesPerBlock(const KvStorageShape& s) {
  return 2 * sizeof(float) * static_cast<size_t>(s.n_layers) * static_cast<size_t>(s.block_size) *
         static_cast<size_t>(s.n_kv_heads) * static_cast<size_t>(s.head_dim);
}

}  // namespace parallm
