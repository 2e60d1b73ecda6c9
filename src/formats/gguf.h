// GGUF v2/v3 files (the llama.cpp format): a reader that maps the file and views its tensors in place,
// and a writer that follows the specification exactly (ggml/docs/gguf.md) so other engines load its output.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tensor/tensor.h"
#include "util/status.h"

namespace parallm {

// Limits both the reader and the writer keep, so whatever parallm writes it reads back.
inline constexpr uint32_t kGgufMaxDims = 4;             // GGML_MAX_DIMS
inline constexpr int kGgufMaxArrayDepth = 8;            // arrays of arrays are legal; this bounds the recursion
inline constexpr uint64_t kGgufDefaultAlignment = 32;   // GGUF_DEFAULT_ALIGNMENT

// gguf_metadata_value_type
enum class GgufType : uint32_t {
  kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7,
  kString = 8, kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12,
};

// One metadata value. Scalars keep their declared type; integers live in `i` (signed types) or `u`.
struct GgufValue {
  GgufType type = GgufType::kU32;
  uint64_t u = 0;
  int64_t i = 0;
  double f = 0;
  bool b = false;
  std::string str;
  GgufType array_type = GgufType::kU8;  // kArray only
  std::vector<GgufValue> array;         // kArray only (arrays may nest)

  // Integer value of any integer or bool type (u64 values above INT64_MAX give nullopt).
  std::optional<int64_t> AsInt() const;
  // Value of any float or integer type.
  std::optional<double> AsFloat() const;
  const std::string* AsString() const { return type == GgufType::kString ? &str : nullptr; }

  static GgufValue String(std::string s);
  static GgufValue U32(uint32_t v);
  static GgufValue I32(int32_t v);
  static GgufValue U64(uint64_t v);
  static GgufValue F32(float v);
  static GgufValue Bool(bool v);
  static GgufValue StringArray(const std::vector<std::string>& v);
  static GgufValue F32Array(const std::vector<float>& v);
  static GgufValue I32Array(const std::vector<int32_t>& v);
};

struct GgufTensorInfo {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;  // outermost first (the file lists ne0 = innermost first)
  uint64_t offset = 0;         // relative to the start of the tensor data section
};

class GgufFile {
 public:
  // Maps and parses `path`. Every error names the file and the problem (truncated, bad magic, unsupported
  // version or tensor type, misaligned or out-of-range offsets, overlapping tensors, duplicate names...).
  static Result<GgufFile> Open(const std::string& path);
  // Parses bytes already in memory (fuzzing, tests). Views point into `bytes`, which must outlive the result;
  // `owner` (may be null) is kept alive with the tensors. `name` is used in error messages.
  static Result<GgufFile> Parse(std::span<const uint8_t> bytes, const std::string& name,
                                std::shared_ptr<const void> owner = nullptr);

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // file offset of the tensor data section

  // Metadata in file order.
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return metadata_; }
  const GgufValue* Find(const std::string& key) const;
  std::optional<int64_t> GetInt(const std::string& key) const;
  std::optional<double> GetFloat(const std::string& key) const;
  std::optional<std::string> GetString(const std::string& key) const;

  // Tensor infos in file order, and views of their bytes (in `tensors().tensors`, keyed by name).
  const std::vector<GgufTensorInfo>& tensor_infos() const { return infos_; }
  const TensorSet& tensors() const { return tensors_; }
  TensorSet& mutable_tensors() { return tensors_; }

 private:
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::map<std::string, size_t> metadata_index_;
  std::vector<GgufTensorInfo> infos_;
  TensorSet tensors_;
};

// Writes GGUF v3. Metadata keys and tensors are written in the order they were added.
class GgufWriter {
 public:
  void Set(const std::string& key, GgufValue value);  // replaces an existing key in place
  // `data` must stay valid until Write() returns; nbytes must equal RowBytes(dtype, innermost dim) * rows.
  Status AddTensor(const std::string& name, DType dtype, std::vector<int64_t> shape, const void* data, size_t nbytes);
  // Takes ownership of the bytes.
  Status AddTensor(const std::string& name, DType dtype, std::vector<int64_t> shape, std::vector<uint8_t> bytes);
  // Fills rows [row_begin, row_end) of a tensor (a row: its innermost dimension, RowBytes of it) at `out`; called
  // from several threads at once for disjoint row ranges.
  using RowFiller = std::function<void(int64_t row_begin, int64_t row_end, uint8_t* out)>;
  // A tensor whose bytes are made while the file is written, a chunk of rows at a time over `threads` threads: a
  // model larger than memory streams to disk (Tensors() cannot view it).
  Status AddGeneratedTensor(const std::string& name, DType dtype, std::vector<int64_t> shape, RowFiller fill);
  void set_threads(int threads) { threads_ = threads; }
  // Writes the file; alignment is `general.alignment` if set (must be a power of two), else 32.
  Status Write(const std::string& path) const;
  // The tensors added so far as views (shapes outermost first), with the owned buffers as keepalives: a model
  // built in memory is used without a file.
  TensorSet Tensors() const;

 private:
  struct Pending {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    const void* data;
    size_t nbytes;
    RowFiller fill;  // generated tensors: data is null
  };
  int threads_ = 0;  // for generated tensors; 0: all cores
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::vector<Pending> tensors_;
  std::vector<std::shared_ptr<std::vector<uint8_t>>> owned_;
};

}  // namespace parallm
