// safetensors files (Hugging Face): an 8-byte little-endian header length, a JSON header naming each
// tensor's dtype, shape and [begin, end) data offsets, then the data. Reader (mmap, views in place) and writer.
#pragma once

#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tensor/tensor.h"
#include "util/status.h"

namespace parallm {

struct SafetensorsFile {
  TensorSet tensors;
  std::map<std::string, std::string> metadata;  // the optional "__metadata__" string map
};

// Maps and parses `path`; rejects truncated files, bad JSON, unknown dtypes, offsets out of range or
// overlapping, sizes that disagree with dtype x shape, with errors naming the file.
Result<SafetensorsFile> ReadSafetensors(const std::string& path);
// Parses bytes in memory (fuzzing, tests); views point into `bytes`.
Result<SafetensorsFile> ParseSafetensors(std::span<const uint8_t> bytes, const std::string& name,
                                         std::shared_ptr<const void> owner = nullptr);

class SafetensorsWriter {
 public:
  void SetMetadata(const std::string& key, const std::string& value);
  // `data` must stay valid until Write() returns. Plain dtypes only (F32, F16, BF16, U32, I32, ...).
  Status AddTensor(const std::string& name, DType dtype, std::vector<int64_t> shape, const void* data, size_t nbytes);
  Status AddTensor(const std::string& name, DType dtype, std::vector<int64_t> shape, std::vector<uint8_t> bytes);
  size_t data_bytes() const;
  Status Write(const std::string& path) const;

 private:
  struct Pending {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    const void* data;
    size_t nbytes;
  };
  std::map<std::string, std::string> metadata_;
  std::vector<Pending> tensors_;
  std::vector<std::shared_ptr<std::vector<uint8_t>>> owned_;
};

}  // namespace parallm
