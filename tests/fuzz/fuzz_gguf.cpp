// libFuzzer target for the GGUF reader: any input must parse or fail with a message, and every tensor view
// of a parsed file must lie inside the input (ASan checks the touches below).
#include <cstddef>
#include <cstdint>
#include <span>

#include "formats/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = parallm::GgufFile::Parse(std::span<const uint8_t>(data, size), "fuzz");
  if (!r.ok()) {
    if (r.status().message().empty()) __builtin_trap();
    return 0;
  }
  // Touch the first and last byte of every tensor and every metadata accessor.
  volatile uint8_t sink = 0;
  for (const auto& [name, view] : r->tensors().tensors) {
    if (view.nbytes == 0) __builtin_trap();
    sink = sink + view.data[0] + view.data[view.nbytes - 1];
  }
  for (const auto& [key, value] : r->metadata()) {
    (void)r->GetInt(key);
    (void)r->GetFloat(key);
    (void)r->GetString(key);
  }
  (void)sink;
  return 0;
}
