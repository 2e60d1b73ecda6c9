// PagedKvStorage: the memory that holds every layer's keys and values, carved into fixed-size blocks of
// `block_size` token slots, in f32, bf16 or int8 (KvDtype). Which request owns which block is the cache manager's
// business (engine); the model writes through slot_mapping (Write) and reads through block tables (View).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/attention.h"
#include "kernels/kv_dtype.h"
#include "util/zeroed_pages.h"

namespace parallm {

struct KvStorageShape {
  int n_layers = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int block_size = 16;  // token slots per block
  int num_blocks = 0;
  KvDtype dtype = KvDtype::kF32;
};

class PagedKvStorage {
 public:
  explicit PagedKvStorage(const KvStorageShape& shape);

  const KvStorageShape& shape() const { return shape_; }
  int64_t num_slots() const { return static_cast<int64_t>(shape_.num_blocks) * shape_.block_size; }
  // Bytes per block over all layers, K and V, scales included (what one block of 16 tokens costs).
  size_t BytesPerBlock() const { return BytesPerBlock(shape_); }
  static size_t BytesPerBlock(const KvStorageShape& shape);
  size_t TotalBytes() const { return BytesPerBlock() * static_cast<size_t>(shape_.num_blocks); }

  // Copies every layer's keys and values of block `src` into block `dst` (forked requests).
  void CopyBlock(int32_t src, int32_t dst);

  // Stores one token's keys and values (n_kv_heads x head_dim f32 each) in slot `slot` (= block * block_size +
  // offset) of `layer`, converted to the storage's type. A null `keys` or `values` leaves that half unwritten (the
  // halves of one slot may be written by two threads at once).
  void Write(int layer, int64_t slot, const float* keys, const float* values);

  // What the attention kernel reads of `layer`.
  PagedKvView View(int layer) const;

 private:
  using Buffer = ZeroedPages;
  struct Layer {
    Buffer keys, values;                // [num_slots, n_kv_heads, head_dim] of dtype
    Buffer key_scales, value_scales;    // int8: [num_slots, n_kv_heads] f32
  };

  char* Row(const Buffer& b, int64_t slot) const {
    return static_cast<char*>(b.get()) + static_cast<size_t>(slot) * slot_bytes_;
  }
  float* Scales(const Buffer& b, int64_t slot) const {
    return static_cast<float*>(b.get()) + slot * shape_.n_kv_heads;
  }

  KvStorageShape shape_;
  int64_t slot_elements_ = 0;  // n_kv_heads * head_dim
  size_t slot_bytes_ = 0;
  std::vector<Layer> layers_;
};

}  // namespace parallm
