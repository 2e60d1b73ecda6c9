// GGUF v3 writer: header, metadata and tensor infos are assembled in memory, then tensor data is streamed
// from the caller's buffers to `path`.tmp with zero padding to the alignment, and renamed into place.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <type_traits>
#include <utility>

#include "formats/gguf.h"
#include "util/check.h"
#include "util/thread_pool.h"

namespace parallm {
namespace {

constexpr uint32_t kVersion = 3;
constexpr size_t kMaxNameBytes = 64;        // the specification: tensor names are at most 64 bytes

// Little-endian encoding of the header, metadata and tensor infos.
class Encoder {
 public:
  std::vector<uint8_t>& bytes() { return out_; }

  template <typename T>
  void Put(T v) {
    static_assert(std::is_unsigned_v<T>);
    for (size_t k = 0; k < sizeof(T); ++k) out_.push_back(static_cast<uint8_t>(v >> (8 * k)));
  }
  void PutString(const std::string& s) {
    Put<uint64_t>(s.size());
    out_.insert(out_.end(), s.begin(), s.end());
  }

 private:
  std::vector<uint8_t> out_;
};

// Checks that a value is consistent (array elements all of the declared element type, bounded nesting)
// before anything is written.
Status ValidateValue(const GgufValue& v, int depth) {
  if (static_cast<uint32_t>(v.type) > static_cast<uint32_t>(GgufType::kF64)) {
    return Err("unknown value type {}", static_cast<uint32_t>(v.type));
  }
  if (v.type != GgufType::kArray) return Status::Ok();
  if (depth >= kGgufMaxArrayDepth) return Err("arrays nested more than {} deep", kGgufMaxArrayDepth);
  if (static_cast<uint32_t>(v.array_type) > static_cast<uint32_t>(GgufType::kF64)) {
    return Err("unknown array element type {}", static_cast<uint32_t>(v.array_type));
  }
  for (size_t k = 0; k < v.array.size(); ++k) {
    if (v.array[k].type != v.array_type) {
      return Err("array element {} has type {} but the array holds type {}", k, static_cast<uint32_t>(v.array[k].type),
                 static_cast<uint32_t>(v.array_type));
    }
    PARALLM_RETURN_IF_ERROR(ValidateValue(v.array[k], depth + 1).WithContext(fmt::format("array element {}", k)));
  }
  return Status::Ok();
}

// The value's payload (the type tag is written by the caller: once per kv, once per array).
void PutValue(Encoder& e, const GgufValue& v) {
  switch (v.type) {
    case GgufType::kU8: e.Put(static_cast<uint8_t>(v.u)); break;
    case GgufType::kI8: e.Put(static_cast<uint8_t>(v.i)); break;
    case GgufType::kU16: e.Put(static_cast<uint16_t>(v.u)); break;
    case GgufType::kI16: e.Put(static_cast<uint16_t>(v.i)); break;
    case GgufType::kU32: e.Put(static_cast<uint32_t>(v.u)); break;
    case GgufType::kI32: e.Put(static_cast<uint32_t>(v.i)); break;
    case GgufType::kU64: e.Put(v.u); break;
    case GgufType::kI64: e.Put(static_cast<uint64_t>(v.i)); break;
    case GgufType::kF32: {
      float f = static_cast<float>(v.f);
      uint32_t bits;
      std::memcpy(&bits, &f, sizeof bits);
      e.Put(bits);
      break;
    }
    case GgufType::kF64: {
      uint64_t bits;
      std::memcpy(&bits, &v.f, sizeof bits);
      e.Put(bits);
      break;
    }
    case GgufType::kBool: e.Put(static_cast<uint8_t>(v.b ? 1 : 0)); break;
    case GgufType::kString: e.PutString(v.str); break;
    case GgufType::kArray:
      e.Put(static_cast<uint32_t>(v.array_type));
      e.Put<uint64_t>(v.array.size());
      for (const GgufValue& x : v.array) PutValue(e, x);
      break;
  }
}

uint64_t AlignUp(uint64_t x, uint64_t alignment) { return (x + alignment - 1) / alignment * alignment; }

// A FILE* that is closed (and its file removed) unless Commit() renamed it into place.
class TmpFile {
 public:
  TmpFile(std::string tmp, std::string path) : tmp_(std::move(tmp)), path_(std::move(path)) {}
  ~TmpFile() {
    if (f_ != nullptr) std::fclose(f_);
    if (!committed_) std::remove(tmp_.c_str());
  }
  Status Open() {
    f_ = std::fopen(tmp_.c_str(), "wb");
    if (f_ == nullptr) return Err("{}: cannot open for writing: {}", tmp_, std::strerror(errno));
    return Status::Ok();
  }
  Status Write(const void* data, size_t n) {
    if (n != 0 && std::fwrite(data, 1, n, f_) != n) return Err("{}: write failed: {}", tmp_, std::strerror(errno));
    return Status::Ok();
  }
  Status Zeros(uint64_t n) {
    static const uint8_t kZeros[256] = {};
    for (; n > 0; n -= std::min<uint64_t>(n, sizeof kZeros)) {
      PARALLM_RETURN_IF_ERROR(Write(kZeros, static_cast<size_t>(std::min<uint64_t>(n, sizeof kZeros))));
    }
    return Status::Ok();
  }
  Status Commit() {
    int rc = std::fclose(f_);
    f_ = nullptr;
    if (rc != 0) return Err("{}: write failed on close: {}", tmp_, std::strerror(errno));
    if (std::rename(tmp_.c_str(), path_.c_str()) != 0) {
      return Err("{}: cannot rename into place: {}", path_, std::strerror(errno));
    }
    committed_ = true;
    return Status::Ok();
  }

 private:
  std::string tmp_, path_;
  std::FILE* f_ = nullptr;
  bool committed_ = false;
};

}  // namespace

void GgufWriter::Set(const std::string& key, GgufValue value) {
  for (auto& [k, v] : metadata_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  metadata_.emplace_back(key, std::move(value));
}

Status GgufWriter::AddTensor(const std::string& name, DType dtype, std::vector<int64_t> shape, const void* data,
                             size_t nbytes) {
  if (name.empty()) return Err("tensor name is empty");
  if (name.size() > kMaxNameBytes) return Err("tensor name '{}' is longer than {} bytes", name, kMaxNameBytes);
  for (const Pending& p : tensors_) {
    if (p.name == name) return Err("duplicate tensor name '{}'", name);
  }
  if (!GgmlTypeOf(dtype)) return Err("tensor '{}': dtype {} has no GGUF type", name, Name(dtype));
  if (shape.empty() || shape.size() > kGgufMaxDims) {
    return Err("tensor '{}' has {} dimensions (1 to {} are supported)", name, shape.size(), kGgufMaxDims);
  }
  for (int64_t d : shape) {
    if (d <= 0) return Err("tensor '{}' has shape {} (dimensions must be positive)", name, ShapeString(shape));
  }
  const DTypeInfo& info = Info(dtype);
  int64_t ne0 = shape.back();  // innermost
  if (ne0 % info.block_elements != 0) {
    return Err("tensor '{}' of type {} has rows of {} elements, not a multiple of its block size {}", name, info.name,
               ne0, info.block_elements);
  }
  uint64_t expected = 0;
  bool overflow = __builtin_mul_overflow(static_cast<uint64_t>(ne0 / info.block_elements), info.block_bytes, &expected);
  for (size_t d = 0; d + 1 < shape.size() && !overflow; ++d) {
    overflow = __builtin_mul_overflow(expected, static_cast<uint64_t>(shape[d]), &expected);
  }
  if (overflow) return Err("tensor '{}' of shape {} is too large", name, ShapeString(shape));
  if (expected != nbytes) {
    return Err("tensor '{}' of type {} and shape {} needs {} bytes, got {}", name, info.name, ShapeString(shape),
               expected, nbytes);
  }
  if (data == nullptr) return Err("tensor '{}' has no data", name);
  tensors_.push_back(Pending{name, dtype, std::move(shape), data, nbytes, nullptr});
  return Status::Ok();
}

Status GgufWriter::AddGeneratedTensor(const std::string& name, DType dtype, std::vector<int64_t> shape, RowFiller fill) {
  if (!fill) return Err("tensor '{}' has no data", name);
  if (shape.empty() || shape.back() <= 0) return Err("tensor '{}' has shape {}", name, ShapeString(shape));
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < shape.size(); ++d) rows *= shape[d];
  const size_t nbytes = RowBytes(dtype, shape.back()) * static_cast<size_t>(std::max<int64_t>(rows, 0));
  static const uint8_t kPlaceholder = 0;  // passes AddTensor's checks; the bytes come from `fill`
  PARALLM_RETURN_IF_ERROR(AddTensor(name, dtype, std::move(shape), &kPlaceholder, nbytes));
  tensors_.back().data = nullptr;
  tensors_.back().fill = std::move(fill);
  return Status::Ok();
}

Status GgufWriter::AddTensor(const std::string& name, DType dtype, std::vector<int64_t> shape,
                             std::vector<uint8_t> bytes) {
  auto owned = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
  PARALLM_RETURN_IF_ERROR(AddTensor(name, dtype, std::move(shape), owned->data(), owned->size()));
  owned_.push_back(std::move(owned));
  return Status::Ok();
}

TensorSet GgufWriter::Tensors() const {
  TensorSet set;
  for (const Pending& p : tensors_) {
    PARALLM_CHECK_MSG(p.data != nullptr, "GgufWriter::Tensors: a generated tensor has no bytes before Write");
    TensorView v;
    v.dtype = p.dtype;
    v.shape = p.shape;
    v.data = static_cast<const uint8_t*>(p.data);
    v.nbytes = p.nbytes;
    set.tensors[p.name] = std::move(v);
  }
  set.owners.assign(owned_.begin(), owned_.end());
  return set;
}

Status GgufWriter::Write(const std::string& path) const {
  auto fail = [&](const Status& st) { return st.WithContext(path); };
  uint64_t alignment = kGgufDefaultAlignment;
  for (const auto& [key, value] : metadata_) {
    PARALLM_RETURN_IF_ERROR(fail(ValidateValue(value, 0).WithContext(fmt::format("metadata key '{}'", key))));
    if (key != "general.alignment") continue;
    // The specification types general.alignment as u32; other readers (llama.cpp) insist on it.
    if (value.type != GgufType::kU32) return fail(Err("general.alignment must be a u32 value"));
    if (value.u == 0 || value.u > UINT32_MAX || (value.u & (value.u - 1)) != 0) {
      return fail(Err("general.alignment is {}, expected a nonzero power of two", value.u));
    }
    alignment = value.u;
  }

  // Offsets relative to the data section: each tensor starts at the next multiple of the alignment.
  std::vector<uint64_t> offsets;
  offsets.reserve(tensors_.size());
  uint64_t next = 0;
  for (const Pending& t : tensors_) {
    offsets.push_back(next);
    next = AlignUp(next + t.nbytes, alignment);
  }

  Encoder e;
  e.Put<uint32_t>(0x46554747);  // "GGUF" read as a little-endian u32
  e.Put(kVersion);
  e.Put<uint64_t>(tensors_.size());
  e.Put<uint64_t>(metadata_.size());
  for (const auto& [key, value] : metadata_) {
    e.PutString(key);
    e.Put(static_cast<uint32_t>(value.type));
    PutValue(e, value);
  }
  for (size_t k = 0; k < tensors_.size(); ++k) {
    const Pending& t = tensors_[k];
    e.PutString(t.name);
    e.Put(static_cast<uint32_t>(t.shape.size()));
    for (auto it = t.shape.rbegin(); it != t.shape.rend(); ++it) e.Put(static_cast<uint64_t>(*it));  // ne0 first
    e.Put(*GgmlTypeOf(t.dtype));
    e.Put(offsets[k]);
  }
  // Padding to the alignment before the data section.
  e.bytes().resize(AlignUp(e.bytes().size(), alignment), 0);

  TmpFile out(path + ".tmp", path);
  PARALLM_RETURN_IF_ERROR(out.Open());
  PARALLM_RETURN_IF_ERROR(out.Write(e.bytes().data(), e.bytes().size()));
  // Tensor data straight from the callers' buffers, each padded to the alignment (also after the last one,
  // as llama.cpp and gguf-py do, so readers that load the padded data section find all of it).
  std::unique_ptr<ThreadPool> pool;
  std::vector<uint8_t> chunk;
  for (const Pending& t : tensors_) {
    if (t.fill) {
      // Generated: ~64 MiB of rows at a time, cut over the threads, then written.
      if (pool == nullptr) pool = std::make_unique<ThreadPool>(threads_);
      const size_t row_bytes = RowBytes(t.dtype, t.shape.back());
      const int64_t rows = static_cast<int64_t>(t.nbytes / row_bytes);
      const int64_t per_chunk = std::max<int64_t>(1, static_cast<int64_t>((size_t{64} << 20) / row_bytes));
      chunk.resize(static_cast<size_t>(std::min(rows, per_chunk)) * row_bytes);
      for (int64_t r0 = 0; r0 < rows; r0 += per_chunk) {
        const int64_t n = std::min(per_chunk, rows - r0);
        const int64_t parts = std::min<int64_t>(n, pool->num_threads() * 4);
        pool->ParallelFor(parts, [&](int64_t part, int) {
          auto [b, e] = SplitRange(n, parts, part);
          t.fill(r0 + b, r0 + e, chunk.data() + static_cast<size_t>(b) * row_bytes);
        });
        PARALLM_RETURN_IF_ERROR(out.Write(chunk.data(), static_cast<size_t>(n) * row_bytes));
      }
    } else {
      PARALLM_RETURN_IF_ERROR(out.Write(t.data, t.nbytes));
    }
    PARALLM_RETURN_IF_ERROR(out.Zeros(AlignUp(t.nbytes, alignment) - t.nbytes));
  }
  return out.Commit();
}

}  // namespace parallm
