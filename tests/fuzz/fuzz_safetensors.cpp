// libFuzzer entry point for the safetensors parser: any input must give a file or a clean error, and every
// view of a parsed file must lie inside the input (ASan reports a read outside it).
#include <cstddef>
#include <cstdint>
#include <span>

#include "formats/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> bytes(data, size);
  auto r = parallm::ParseSafetensors(bytes, "fuzz.safetensors");
  if (!r.ok()) {
    if (r.status().message().empty()) __builtin_trap();  // every error must say something
    return 0;
  }
  // Touch the first and last byte of every tensor, and check each view's size against dtype x shape.
  volatile uint8_t sink = 0;
  for (const auto& [name, view] : r->tensors.tensors) {
    if (view.nbytes != parallm::RowBytes(view.dtype, view.NumElements())) __builtin_trap();
    if (view.nbytes > 0) sink = sink + view.data[0] + view.data[view.nbytes - 1];
    if (view.data < data || view.data + view.nbytes > data + size) __builtin_trap();
  }
  (void)sink;
  return 0;
}
