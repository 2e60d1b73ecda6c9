// PagedKvStorage: keys and values per layer, slot-major, in the storage's element type.
#include "cache/kv_storage.h"

#include <cstring>

#include "util/check.h"

namespace parallm {

// Each buffer is ZeroedPages: zero pages the OS fills in as blocks are first written (a std::vector(n) wrote every
// byte up front: with the default 2 GiB cache that was most of a small model's start-up, seconds of page faults),
// so RSS shows the KV memory in use, in 2 MiB steps per buffer (huge pages; never above --kv-cache-gb: 8 requests
// of 500 tokens on the 0.5B shape use 100 MB of blocks and showed ~440 MB). The rows start on a page, so rows of
// 64-byte multiples never straddle cache lines (a large calloc returned a page start plus 16 bytes, and every vector
// load of the attention kernel was split in two).
PagedKvStorage::PagedKvStorage(const KvStorageShape& shape) : shape_(shape) {
  PARALLM_CHECK(shape.n_layers > 0 && shape.n_kv_heads > 0 && shape.head_dim > 0);
  PARALLM_CHECK(shape.block_size > 0 && shape.num_blocks > 0);
  slot_elements_ = static_cast<int64_t>(shape.n_kv_heads) * shape.head_dim;
  slot_bytes_ = static_cast<size_t>(slot_elements_) * KvElementBytes(shape.dtype);
  const size_t slots = static_cast<size_t>(num_slots());
  const size_t scale_bytes = slots * static_cast<size_t>(shape.n_kv_heads) * KvScaleBytes(shape.dtype);
  layers_.resize(static_cast<size_t>(shape.n_layers));
  for (Layer& l : layers_) {
    l.keys = ZeroedPages(slots * slot_bytes_);
    l.values = ZeroedPages(slots * slot_bytes_);
    if (scale_bytes > 0) {
      l.key_scales = ZeroedPages(scale_bytes);
      l.value_scales = ZeroedPages(scale_bytes);
    }
  }
}

void PagedKvStorage::Write(int layer, int64_t slot, const float* keys, const float* values) {
  PARALLM_DCHECK(layer >= 0 && layer < shape_.n_layers && slot >= 0 && slot < num_slots());
  const Layer& l = layers_[static_cast<size_t>(layer)];
  const int D = shape_.head_dim;
  const size_t head_bytes = static_cast<size_t>(D) * KvElementBytes(shape_.dtype);
  const bool scaled = static_cast<bool>(l.key_scales);
  for (int h = 0; h < shape_.n_kv_heads; ++h) {
    if (keys != nullptr)
      EncodeKvRow(shape_.dtype, keys + h * D, D, Row(l.keys, slot) + h * head_bytes,
                  scaled ? Scales(l.key_scales, slot) + h : nullptr);
    if (values != nullptr)
      EncodeKvRow(shape_.dtype, values + h * D, D, Row(l.values, slot) + h * head_bytes,
                  scaled ? Scales(l.value_scales, slot) + h : nullptr);
  }
}

PagedKvView PagedKvStorage::View(int layer) const {
  const Layer& l = layers_[static_cast<size_t>(layer)];
  return PagedKvView{l.keys.get(),
                     l.values.get(),
                     slot_elements_,
                     shape_.block_size,
                     shape_.dtype,
                     static_cast<const float*>(l.key_scales.get()),
                     static_cast<const float*>(l.value_scales.get())};
}

void PagedKvStorage::CopyBlock(int32_t src, int32_t dst) {
  PARALLM_CHECK(src >= 0 && src < shape_.num_blocks && dst >= 0 && dst < shape_.num_blocks);
  const int64_t from = static_cast<int64_t>(src) * shape_.block_size, to = static_cast<int64_t>(dst) * shape_.block_size;
  const size_t bytes = slot_bytes_ * static_cast<size_t>(shape_.block_size);
  const size_t scale_bytes = static_cast<size_t>(shape_.block_size * shape_.n_kv_heads) * KvScaleBytes(shape_.dtype);
  for (const Layer& l : layers_) {
    std::memcpy(Row(l.keys, to), Row(l.keys, from), bytes);
    std::memcpy(Row(l.values, to), Row(l.values, from), bytes);
    if (scale_bytes > 0) {
      std::memcpy(Scales(l.key_scales, to), Scales(l.key_scales, from), scale_bytes);
      std::memcpy(Scales(l.value_scales, to), Scales(l.value_scales, from), scale_bytes);
    }
  }
}

size_t PagedKvStorage::BytesPerBlock(const KvStorageShape& s) {
  const size_t per_head = static_cast<size_t>(s.head_dim) * KvElementBytes(s.dtype) + KvScaleBytes(s.dtype);
  return 2 * static_cast<size_t>(s.n_layers) * static_cast<size_t>(s.block_size) * static_cast<size_t>(s.n_kv_heads) *
         per_head;
}

}  // namespace parallm
