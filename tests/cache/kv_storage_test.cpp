// PagedKvStorage's buffers: zeroed, starting on (at least) a cache line for every size and type (the attention
// kernel's rows then never straddle lines), and what Write stores is what View shows the kernel.
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "cache/kv_storage.h"

namespace parallm {
namespace {

TEST(PagedKvStorage, BuffersZeroedAndLineAligned) {
  // Small (page-aligned) and large (2 MiB-aligned, huge pages: 2 layers x 8 MiB) buffers, each type.
  for (int num_blocks : {3, 1024})
    for (KvDtype dtype : kKvDtypes) {
      SCOPED_TRACE(::testing::Message() << num_blocks << " blocks, " << KvDtypeName(dtype));
      PagedKvStorage kv(KvStorageShape{2, 2, 64, 16, num_blocks, dtype});
      for (int layer = 0; layer < 2; ++layer) {
        const PagedKvView view = kv.View(layer);
        for (const void* p : {view.keys, view.values}) {
          EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
          const auto* bytes = static_cast<const unsigned char*>(p);
          const size_t n = static_cast<size_t>(kv.num_slots() * view.slot_stride) * KvElementBytes(dtype);
          EXPECT_EQ(bytes[0], 0);
          EXPECT_EQ(bytes[n - 1], 0);
        }
        if (dtype == KvDtype::kInt8) {
          EXPECT_EQ(reinterpret_cast<uintptr_t>(view.key_scales) % 64, 0u);
          EXPECT_EQ(view.value_scales[kv.num_slots() * 2 - 1], 0.0f);
        }
      }
      // A slot written in the last block reads back through the view.
      std::vector<float> keys(128), values(128);
      for (int i = 0; i < 128; ++i) keys[static_cast<size_t>(i)] = 0.5f * i, values[static_cast<size_t>(i)] = -1.0f * i;
      const int64_t slot = kv.num_slots() - 1;
      kv.Write(1, slot, keys.data(), values.data());
      const PagedKvView view = kv.View(1);
      const size_t elem = KvElementBytes(dtype);
      const auto* krow = static_cast<const char*>(view.keys) + static_cast<size_t>(slot * view.slot_stride) * elem;
      const auto* vrow = static_cast<const char*>(view.values) + static_cast<size_t>(slot * view.slot_stride) * elem;
      const float kscale = dtype == KvDtype::kInt8 ? view.key_scales[slot * 2 + 1] : 1.0f;
      const float vscale = dtype == KvDtype::kInt8 ? view.value_scales[slot * 2 + 1] : 1.0f;
      // KV head 1, element 10: 0.5 * 74 and -74, within the type's rounding.
      const float tol = dtype == KvDtype::kF32 ? 0.0f : 0.3f;
      EXPECT_NEAR(DecodeKvElement(dtype, krow + 64 * elem, 10, kscale), 37.0f, tol);
      EXPECT_NEAR(DecodeKvElement(dtype, vrow + 64 * elem, 10, vscale), -74.0f, 2 * tol);
    }
}

}  // namespace
}  // namespace parallm
