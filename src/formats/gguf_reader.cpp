// GGUF reader: parses the header, metadata and tensor infos of a GGUF v2/v3 file with every count, length
// and offset checked against the bytes actually present, then views each tensor's data in place.
#include <algorithm>
#include <cstring>
#include <limits>
#include <set>
#include <string_view>
#include <type_traits>
#include <utility>

#include "formats/gguf.h"
#include "util/mapped_file.h"

namespace parallm {
namespace {

// Each value costs ~100 bytes in memory; real arrays (vocabularies, merges) hold at most a few hundred thousand.
constexpr uint64_t kMaxArrayElements = uint64_t{1} << 24;
// Smallest possible encodings, used to reject counts the remaining bytes cannot hold before allocating:
// a kv pair is a key string (u64 length) + u32 type + a value of >= 1 byte; a tensor info is a name string
// + u32 n_dims + u32 type + u64 offset.
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;

std::string_view TypeName(GgufType t) {
  switch (t) {
    case GgufType::kU8: return "u8";
    case GgufType::kI8: return "i8";
    case GgufType::kU16: return "u16";
    case GgufType::kI16: return "i16";
    case GgufType::kU32: return "u32";
    case GgufType::kI32: return "i32";
    case GgufType::kF32: return "f32";
    case GgufType::kBool: return "bool";
    case GgufType::kString: return "string";
    case GgufType::kArray: return "array";
    case GgufType::kU64: return "u64";
    case GgufType::kI64: return "i64";
    case GgufType::kF64: return "f64";
  }
  return "?";
}

bool KnownType(uint32_t t) { return t <= static_cast<uint32_t>(GgufType::kF64); }

// Bytes of the smallest encoding of one value of type `t` (strings: the u64 length; arrays: type + count).
uint64_t MinEncodedBytes(GgufType t) {
  switch (t) {
    case GgufType::kU8: case GgufType::kI8: case GgufType::kBool: return 1;
    case GgufType::kU16: case GgufType::kI16: return 2;
    case GgufType::kU32: case GgufType::kI32: case GgufType::kF32: return 4;
    case GgufType::kU64: case GgufType::kI64: case GgufType::kF64: return 8;
    case GgufType::kString: return 8;
    case GgufType::kArray: return 4 + 8;
  }
  return 1;
}

// A bounds-checked little-endian reader over the whole file; `pos` is a file offset.
class Cursor {
 public:
  explicit Cursor(std::span<const uint8_t> bytes) : bytes_(bytes) {}

  uint64_t pos() const { return pos_; }
  uint64_t size() const { return bytes_.size(); }
  uint64_t remaining() const { return bytes_.size() - pos_; }

  Status Need(uint64_t n, std::string_view what) const {
    if (n <= remaining()) return Status::Ok();
    return Err("truncated: {} at offset {} needs {} bytes but the file ends at {}", what, pos_, n, size());
  }

  template <typename T>
  Status Read(T* out, std::string_view what) {
    static_assert(std::is_unsigned_v<T>);
    PARALLM_RETURN_IF_ERROR(Need(sizeof(T), what));
    T v = 0;
    for (size_t k = 0; k < sizeof(T); ++k) v |= static_cast<T>(static_cast<T>(bytes_[pos_ + k]) << (8 * k));
    pos_ += sizeof(T);
    *out = v;
    return Status::Ok();
  }

  // gguf_string_t: u64 length, then that many bytes (no terminator). The length is checked before allocating.
  Status ReadString(std::string* out, std::string_view what) {
    uint64_t len = 0;
    PARALLM_RETURN_IF_ERROR(Read(&len, what));
    if (len > remaining()) {
      return Err("truncated or corrupt: {} of {} bytes at offset {} runs past the end of the file ({} bytes)", what,
                 len, pos_, size());
    }
    out->assign(reinterpret_cast<const char*>(bytes_.data() + pos_), static_cast<size_t>(len));
    pos_ += len;
    return Status::Ok();
  }

 private:
  std::span<const uint8_t> bytes_;
  uint64_t pos_ = 0;
};

Status ReadValue(Cursor& c, GgufType type, int depth, GgufValue* out);

// Array payload: u32 element type, u64 count, elements. `depth` counts enclosing arrays.
Status ReadArray(Cursor& c, int depth, GgufValue* out) {
  if (depth >= kGgufMaxArrayDepth)
    return Err("arrays nested more than {} deep at offset {}", kGgufMaxArrayDepth, c.pos());
  uint32_t elem_type = 0;
  uint64_t count = 0;
  PARALLM_RETURN_IF_ERROR(c.Read(&elem_type, "array element type"));
  if (!KnownType(elem_type)) return Err("array at offset {} has unknown element type {}", c.pos() - 4, elem_type);
  PARALLM_RETURN_IF_ERROR(c.Read(&count, "array length"));
  GgufType et = static_cast<GgufType>(elem_type);
  uint64_t min_bytes = MinEncodedBytes(et);
  if (count > c.remaining() / min_bytes) {
    return Err("truncated or corrupt: array of {} {} values at offset {} needs at least {} bytes per value but only {} "
               "bytes remain",
               count, TypeName(et), c.pos(), min_bytes, c.remaining());
  }
  if (count > kMaxArrayElements)
    return Err("array of {} values at offset {} exceeds the limit of {} values per array", count, c.pos(),
               kMaxArrayElements);
  out->array_type = et;
  out->array.clear();
  out->array.reserve(static_cast<size_t>(count));
  for (uint64_t k = 0; k < count; ++k) {
    GgufValue& v = out->array.emplace_back();
    Status st = ReadValue(c, et, depth + 1, &v);
    // Only the outermost index is named: a chain of "array element 0: " per level would drown the message.
    if (!st.ok()) return depth == 0 ? st.WithContext(fmt::format("array element {}", k)) : st;
  }
  return Status::Ok();
}

Status ReadValue(Cursor& c, GgufType type, int depth, GgufValue* out) {
  out->type = type;
  switch (type) {
    case GgufType::kU8: {
      uint8_t v = 0;
      PARALLM_RETURN_IF_ERROR(c.Read(&v, "u8 value"));
      out->u = v;
      return Status::Ok();
    }
    case GgufType::kI8: {
      uint8_t v = 0;
      PARALLM_RETURN_IF_ERROR(c.Read(&v, "i8 value"));
      out->i = static_cast<int8_t>(v);
      return Status::Ok();
    }
    case GgufType::kU16: {
      uint16_t v = 0;
      PARALLM_RETURN_IF_ERROR(c.Read(&v, "u16 value"));
      out->u = v;
      return Status::Ok();
    }
    case GgufType::kI16: {
      uint16_t v = 0;
      PARALLM_RETURN_IF_ERROR(c.Read(&v, "i16 value"));
      out->i = static_cast<int16_t>(v);
      return Status::Ok();
    }
    case GgufType::kU32: {
      uint32_t v = 0;
      PARALLM_RETURN_IF_ERROR(c.Read(&v, "u32 value"));
      out->u = v;
      return Status::Ok();
    }
    case GgufType::kI32: {
      uint32_t v = 0;
      PARALLM_RETURN_IF_ERROR(c.Read(&v, "i32 value"));
      out->i = static_cast<int32_t>(v);
      return Status::Ok();
    }
    case GgufType::kU64: {
      PARALLM_RETURN_IF_ERROR(c.Read(&out->u, "u64 value"));
      return Status::Ok();
    }
    case GgufType::kI64: {
      uint64_t v = 0;
      PARALLM_RETURN_IF_ERROR(c.Read(&v, "i64 value"));
      out->i = static_cast<int64_t>(v);
      return Status::Ok();
    }
    case GgufType::kF32: {
      uint32_t bits = 0;
      PARALLM_RETURN_IF_ERROR(c.Read(&bits, "f32 value"));
      float v;
      std::memcpy(&v, &bits, sizeof v);
      out->f = v;
      return Status::Ok();
    }
    case GgufType::kF64: {
      uint64_t bits = 0;
      PARALLM_RETURN_IF_ERROR(c.Read(&bits, "f64 value"));
      std::memcpy(&out->f, &bits, sizeof out->f);
      return Status::Ok();
    }
    case GgufType::kBool: {
      uint8_t v = 0;
      PARALLM_RETURN_IF_ERROR(c.Read(&v, "bool value"));
      // The specification: "Anything else [than 0 or 1] is invalid".
      if (v > 1) return Err("bool value {} at offset {} is neither 0 nor 1", v, c.pos() - 1);
      out->b = v == 1;
      return Status::Ok();
    }
    case GgufType::kString:
      return c.ReadString(&out->str, "string value");
    case GgufType::kArray:
      return ReadArray(c, depth, out);
  }
  return Err("unknown value type {}", static_cast<uint32_t>(type));
}

// a + b and a * b on byte counts, failing instead of wrapping.
bool AddOverflows(uint64_t a, uint64_t b, uint64_t* out) { return __builtin_add_overflow(a, b, out); }
bool MulOverflows(uint64_t a, uint64_t b, uint64_t* out) { return __builtin_mul_overflow(a, b, out); }

struct RawTensor {
  GgufTensorInfo info;
  uint64_t nbytes = 0;
  uint64_t begin = 0;  // absolute file offsets of the data, [begin, end)
  uint64_t end = 0;
};

// Reads one tensor info and checks what can be checked without the data section's position: dims, type,
// byte size (without overflow) and offset alignment.
Status ReadTensorInfo(Cursor& c, uint64_t alignment, RawTensor* t) {
  GgufTensorInfo& info = t->info;
  PARALLM_RETURN_IF_ERROR(c.ReadString(&info.name, "tensor name"));
  uint32_t n_dims = 0;
  PARALLM_RETURN_IF_ERROR(c.Read(&n_dims, "tensor dimension count"));
  if (n_dims > kGgufMaxDims)
    return Err("tensor '{}' has {} dimensions (at most {} are supported)", info.name, n_dims, kGgufMaxDims);
  std::vector<int64_t> ne(n_dims);  // innermost first, as in the file
  for (uint32_t d = 0; d < n_dims; ++d) {
    uint64_t v = 0;
    PARALLM_RETURN_IF_ERROR(c.Read(&v, "tensor dimension"));
    // ggml stores ne as int64; a u64 above INT64_MAX is a negative dimension there.
    int64_t s = static_cast<int64_t>(v);
    if (s <= 0) return Err("tensor '{}' has dimension {} of size {} (dimensions must be positive)", info.name, d, s);
    ne[d] = s;
  }
  uint32_t ggml_type = 0;
  PARALLM_RETURN_IF_ERROR(c.Read(&ggml_type, "tensor type"));
  std::optional<DType> dtype = DTypeFromGgmlType(ggml_type);
  if (!dtype) return Err("tensor '{}' has unknown or unsupported ggml type {}", info.name, ggml_type);
  info.dtype = *dtype;
  PARALLM_RETURN_IF_ERROR(c.Read(&info.offset, "tensor data offset"));
  if (info.offset % alignment != 0) {
    return Err("tensor '{}' data offset {} is not a multiple of the alignment {}", info.name, info.offset, alignment);
  }

  const DTypeInfo& dt = Info(info.dtype);
  int64_t ne0 = n_dims > 0 ? ne[0] : 1;  // a 0-dim tensor is a scalar
  if (ne0 % dt.block_elements != 0) {
    return Err("tensor '{}' of type {} has rows of {} elements, not a multiple of its block size {}", info.name, dt.name,
               ne0, dt.block_elements);
  }
  // Byte size = RowBytes(dtype, ne0) * (ne1 * ne2 * ne3), and the element count must fit in int64 (ggml's nelements).
  uint64_t nbytes = 0;
  uint64_t elements = static_cast<uint64_t>(ne0);
  bool overflow = MulOverflows(static_cast<uint64_t>(ne0 / dt.block_elements), dt.block_bytes, &nbytes);
  for (uint32_t d = 1; d < n_dims && !overflow; ++d) {
    overflow = MulOverflows(nbytes, static_cast<uint64_t>(ne[d]), &nbytes) ||
               MulOverflows(elements, static_cast<uint64_t>(ne[d]), &elements);
  }
  if (overflow || elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    std::vector<int64_t> shape(ne.rbegin(), ne.rend());
    return Err("tensor '{}' of type {} and shape {} is too large", info.name, dt.name, ShapeString(shape));
  }
  t->nbytes = nbytes;
  info.shape.assign(ne.rbegin(), ne.rend());  // outermost first
  return Status::Ok();
}

// general.alignment: any integer type is accepted (the specification says u32), nonzero power of two.
Status AlignmentFromMetadata(const GgufValue* v, uint64_t* alignment) {
  *alignment = kGgufDefaultAlignment;
  if (v == nullptr) return Status::Ok();
  std::optional<int64_t> a = v->AsInt();
  if (!a || v->type == GgufType::kBool) {
    return Err("general.alignment has type {}, expected an unsigned integer", TypeName(v->type));
  }
  if (*a <= 0 || (*a & (*a - 1)) != 0) return Err("general.alignment is {}, expected a nonzero power of two", *a);
  *alignment = static_cast<uint64_t>(*a);
  return Status::Ok();
}

}  // namespace

Result<GgufFile> GgufFile::Parse(std::span<const uint8_t> bytes, const std::string& name,
                                 std::shared_ptr<const void> owner) {
  auto fail = [&](const Status& st) { return st.WithContext(name); };
  Cursor c(bytes);
  GgufFile file;

  // Header: magic, version, tensor_count, metadata_kv_count.
  if (bytes.size() < 4 || std::memcmp(bytes.data(), "GGUF", 4) != 0) {
    std::string found;
    for (size_t k = 0; k < std::min<size_t>(4, bytes.size()); ++k) found += fmt::format("{:02x}", bytes[k]);
    return fail(Err("not a GGUF file: bad magic (expected 47475546 \"GGUF\", found {})", found.empty() ? "nothing" : found));
  }
  uint32_t magic = 0;
  PARALLM_RETURN_IF_ERROR(fail(c.Read(&magic, "magic")));
  PARALLM_RETURN_IF_ERROR(fail(c.Read(&file.version_, "version")));
  if (file.version_ == 1) {
    return fail(Err("GGUF version 1 is not supported (it used 32-bit counts and lengths); only versions 2 and 3 are"));
  }
  if (file.version_ == 0x02000000u || file.version_ == 0x03000000u) {
    return fail(Err("big-endian GGUF files are not supported (version field reads {:#010x})", file.version_));
  }
  if (file.version_ != 2 && file.version_ != 3) {
    return fail(Err("unsupported GGUF version {} (only versions 2 and 3 are)", file.version_));
  }
  uint64_t tensor_count = 0, kv_count = 0;
  PARALLM_RETURN_IF_ERROR(fail(c.Read(&tensor_count, "tensor count")));
  PARALLM_RETURN_IF_ERROR(fail(c.Read(&kv_count, "metadata count")));
  if (kv_count > c.remaining() / kMinKvBytes) {
    return fail(Err("truncated or corrupt: metadata count {} cannot fit in the {} bytes after the header", kv_count,
                    c.remaining()));
  }
  // Each tensor also needs at least one byte of data, but the infos alone already bound the count.
  if (tensor_count > c.remaining() / kMinTensorInfoBytes) {
    return fail(Err("truncated or corrupt: tensor count {} cannot fit in the {} bytes after the header", tensor_count,
                    c.remaining()));
  }

  // Metadata key/value pairs.
  file.metadata_.reserve(static_cast<size_t>(kv_count));
  for (uint64_t k = 0; k < kv_count; ++k) {
    std::string key;
    PARALLM_RETURN_IF_ERROR(fail(c.ReadString(&key, fmt::format("metadata key {}", k))));
    if (file.metadata_index_.count(key) != 0) return fail(Err("duplicate metadata key '{}'", key));
    uint32_t type = 0;
    PARALLM_RETURN_IF_ERROR(fail(c.Read(&type, "metadata value type").WithContext(fmt::format("metadata key '{}'", key))));
    if (!KnownType(type)) return fail(Err("metadata key '{}' has unknown value type {}", key, type));
    GgufValue value;
    Status st = ReadValue(c, static_cast<GgufType>(type), 0, &value);
    if (!st.ok()) return fail(st.WithContext(fmt::format("metadata key '{}'", key)));
    file.metadata_index_.emplace(key, file.metadata_.size());
    file.metadata_.emplace_back(std::move(key), std::move(value));
  }
  PARALLM_RETURN_IF_ERROR(fail(AlignmentFromMetadata(file.Find("general.alignment"), &file.alignment_)));

  // Tensor infos.
  std::vector<RawTensor> raw(static_cast<size_t>(tensor_count));
  std::set<std::string_view> names;
  for (RawTensor& t : raw) {
    PARALLM_RETURN_IF_ERROR(fail(ReadTensorInfo(c, file.alignment_, &t)));
    if (!names.insert(t.info.name).second) return fail(Err("duplicate tensor name '{}'", t.info.name));
  }

  // The data section starts at the next multiple of the alignment. Vocab-only files with no tensors end right
  // after the metadata without that padding; data_offset is then the file size.
  uint64_t pad = (file.alignment_ - c.pos() % file.alignment_) % file.alignment_;
  uint64_t data_offset = 0;
  if (AddOverflows(c.pos(), pad, &data_offset)) return fail(Err("alignment {} overflows", file.alignment_));
  file.data_offset_ = tensor_count == 0 ? std::min(data_offset, c.size()) : data_offset;

  for (RawTensor& t : raw) {
    if (AddOverflows(data_offset, t.info.offset, &t.begin) || AddOverflows(t.begin, t.nbytes, &t.end) ||
        t.end > c.size()) {
      return fail(Err("tensor '{}' data [{}, {}) extends past the end of the file ({} bytes)", t.info.name,
                      data_offset + t.info.offset, data_offset + t.info.offset + t.nbytes, c.size()));
    }
  }
  std::vector<const RawTensor*> by_offset;
  by_offset.reserve(raw.size());
  for (const RawTensor& t : raw) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(), [](const RawTensor* a, const RawTensor* b) { return a->begin < b->begin; });
  for (size_t k = 1; k < by_offset.size(); ++k) {
    const RawTensor& a = *by_offset[k - 1];
    const RawTensor& b = *by_offset[k];
    if (a.end > b.begin) {
      return fail(Err("tensors '{}' [{}, {}) and '{}' [{}, {}) overlap", a.info.name, a.begin, a.end, b.info.name,
                      b.begin, b.end));
    }
  }

  file.infos_.reserve(raw.size());
  for (RawTensor& t : raw) {
    TensorView view;
    view.dtype = t.info.dtype;
    view.shape = t.info.shape;
    view.data = bytes.data() + t.begin;
    view.nbytes = static_cast<size_t>(t.nbytes);
    file.tensors_.tensors.emplace(t.info.name, std::move(view));
    file.infos_.push_back(std::move(t.info));
  }
  if (owner) file.tensors_.owners.push_back(std::move(owner));
  return file;
}

Result<GgufFile> GgufFile::Open(const std::string& path) {
  PARALLM_ASSIGN_OR_RETURN(std::shared_ptr<MappedFile> mapped, MappedFile::Open(path));
  std::span<const uint8_t> bytes = mapped->bytes();
  return Parse(bytes, path, std::move(mapped));
}

const GgufValue* GgufFile::Find(const std::string& key) const {
  auto it = metadata_index_.find(key);
  return it == metadata_index_.end() ? nullptr : &metadata_[it->second].second;
}

std::optional<int64_t> GgufFile::GetInt(const std::string& key) const {
  const GgufValue* v = Find(key);
  return v != nullptr ? v->AsInt() : std::nullopt;
}

std::optional<double> GgufFile::GetFloat(const std::string& key) const {
  const GgufValue* v = Find(key);
  return v != nullptr ? v->AsFloat() : std::nullopt;
}

std::optional<std::string> GgufFile::GetString(const std::string& key) const {
  const GgufValue* v = Find(key);
  const std::string* s = v != nullptr ? v->AsString() : nullptr;
  return s != nullptr ? std::optional<std::string>(*s) : std::nullopt;
}

}  // namespace parallm
