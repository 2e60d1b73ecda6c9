// PagedKvStorage: the memory that holds every layer's keys and values, carved into fixed-size blocks of
// `block_size` token slots. Which request owns which block is the cache manager's business (engine); the
// model only writes through slot_mapping and reads through block tables.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

namespace parallm {

struct KvStorageShape {
  int n_layers = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int block_size = 16;  // token slots per block
  int num_blocks = 0;
};

class PagedKvStorage {
 public:
  explicit PagedKvStorage(const KvStorageShape& shape);

  const KvStorageShape& shape() const { return shape_; }
  int64_t num_slots() const { return static_cast<int64_t>(shape_.num_blocks) * shape_.block_size; }
  // Bytes per block over all layers, K and V (what one block of 16 tokens costs).
  size_t BytesPerBlock() const { return BytesPerBlock(shape_); }
  static size_t BytesPerBlock(const KvStorageShape& shape);
  size_t TotalBytes() const { return BytesPerBlock() * static_cast<size_t>(shape_.num_blocks); }

  // Copies every layer's keys and values of block `src` into block `dst` (forked requests).
  void CopyBlock(int32_t src, int32_t dst);

  // Slot `slot` (= block * block_size + offset) of `layer`: n_kv_heads x head_dim contiguous f32.
  float* Key(int layer, int64_t slot) { return k_[static_cast<size_t>(layer)].get() + slot * slot_floats_; }
  float* Value(int layer, int64_t slot) { return v_[static_cast<size_t>(layer)].get() + slot * slot_floats_; }
  const float* Key(int layer, int64_t slot) const { return k_[static_cast<size_t>(layer)].get() + slot * slot_floats_; }
  const float* Value(int layer, int64_t slot) const {
    return v_[static_cast<size_t>(layer)].get() + slot * slot_floats_;
  }

 private:
  struct FreeDeleter {
    void operator()(float* p) const { std::free(p); }
  };
  using LayerBuffer = std::unique_ptr<float[], FreeDeleter>;

  KvStorageShape shape_;
  int64_t slot_floats_ = 0;
  std::vector<LayerBuffer> k_, v_;  // per layer: [num_blocks * block_size, n_kv_heads, head_dim]
};

}  // namespace parallm
