// libFuzzer target: the llama2.c checkpoint and tokenizer.bin parsers must return a value or an error on any
// input, never read out of bounds.
#include <cstddef>
#include <cstdint>

#include "formats/llama2c.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> bytes(data, size);
  auto ckpt = parallm::ParseLlama2cCheckpoint(bytes, "fuzz.bin");
  if (ckpt.ok()) {
    volatile float sink = 0;
    for (const auto& [name, t] : ckpt->tensors.tensors)
      if (t.nbytes >= 4) sink = sink + reinterpret_cast<const float*>(t.data)[t.nbytes / 4 - 1];
  }
  auto tok = parallm::ParseLlama2cTokenizer(bytes, "fuzz-tok.bin");
  (void)tok;
  return 0;
}
