// safetensors reader (validates every header field against the file before making views into it) and
// streaming writer (header padded to 8 bytes, then each tensor's bytes in the order they were added).
#include "formats/safetensors.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <string_view>
#include <unordered_set>

#include <boost/json.hpp>
#include <boost/json/basic_parser_impl.hpp>
#include <fmt/format.h>

#include "formats/json_describe.h"
#include "util/mapped_file.h"

namespace parallm {
namespace {

namespace json = boost::json;

constexpr size_t kLengthBytes = 8;  // the u64 little-endian header length
// The reference implementation (huggingface/safetensors) refuses headers above 100,000,000 bytes; so do we,
// so that a corrupt length cannot make us parse (or allocate for) gigabytes of "JSON".
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr std::string_view kMetadataKey = "__metadata__";

// ---- JSON header parsing: Boost.JSON's value builder plus a duplicate-key check ----
//
// boost::json::parse silently keeps the last of duplicate keys. In a safetensors header a repeated tensor
// name means two descriptions of one tensor, so this handler (for boost::json::basic_parser) builds the
// value with a value_stack as boost::json::parser does, and fails on the first key repeated in an object.
class HeaderJsonHandler {
 public:
  static constexpr size_t max_object_size = json::object::max_size();
  static constexpr size_t max_array_size = json::array::max_size();
  static constexpr size_t max_key_size = json::string::max_size();
  static constexpr size_t max_string_size = json::string::max_size();

  HeaderJsonHandler() { stack_.reset(); }

  json::value_stack& stack() { return stack_; }
  const std::string& duplicate_key() const { return duplicate_key_; }
  bool has_duplicate() const { return has_duplicate_; }

  bool on_document_begin(json::error_code&) { return true; }
  bool on_document_end(json::error_code&) { return true; }
  bool on_object_begin(json::error_code&) {
    keys_.emplace_back();
    return true;
  }
  bool on_object_end(size_t n, json::error_code&) {
    keys_.pop_back();
    stack_.push_object(n);
    return true;
  }
  bool on_array_begin(json::error_code&) { return true; }
  bool on_array_end(size_t n, json::error_code&) {
    stack_.push_array(n);
    return true;
  }
  bool on_key_part(json::string_view s, size_t, json::error_code&) {
    key_.append(s.data(), s.size());
    stack_.push_chars(s);
    return true;
  }
  bool on_key(json::string_view s, size_t, json::error_code& ec) {
    key_.append(s.data(), s.size());
    if (!keys_.back().insert(key_).second) {
      has_duplicate_ = true;
      duplicate_key_ = key_;
      ec = json::error::syntax;  // any error stops the parser; has_duplicate() says which
      return false;
    }
    key_.clear();
    stack_.push_key(s);
    return true;
  }
  bool on_string_part(json::string_view s, size_t, json::error_code&) {
    stack_.push_chars(s);
    return true;
  }
  bool on_string(json::string_view s, size_t, json::error_code&) {
    stack_.push_string(s);
    return true;
  }
  bool on_number_part(json::string_view, json::error_code&) { return true; }
  bool on_int64(int64_t i, json::string_view, json::error_code&) {
    stack_.push_int64(i);
    return true;
  }
  bool on_uint64(uint64_t u, json::string_view, json::error_code&) {
    stack_.push_uint64(u);
    return true;
  }
  bool on_double(double d, json::string_view, json::error_code&) {
    stack_.push_double(d);
    return true;
  }
  bool on_bool(bool b, json::error_code&) {
    stack_.push_bool(b);
    return true;
  }
  bool on_null(json::error_code&) {
    stack_.push_null();
    return true;
  }
  bool on_comment_part(json::string_view, json::error_code&) { return true; }
  bool on_comment(json::string_view, json::error_code&) { return true; }

 private:
  json::value_stack stack_;
  std::vector<std::unordered_set<std::string>> keys_;  // keys seen so far in each open object
  std::string key_;                                    // the key being read (it may arrive in parts)
  std::string duplicate_key_;
  bool has_duplicate_ = false;
};

// Parses the header text; `file_offset` is where it starts in the file, so errors give file positions.
Result<json::value> ParseHeaderJson(std::string_view text, size_t file_offset) {
  json::basic_parser<HeaderJsonHandler> parser{json::parse_options{}};  // strict JSON, UTF-8 checked
  json::error_code ec;
  size_t used = parser.write_some(false, text.data(), text.size(), ec);
  if (!ec && used < text.size()) ec = json::error::extra_data;
  if (parser.handler().has_duplicate())
    return Err("header names '{}' twice in one object (at byte {})", parser.handler().duplicate_key(),
               file_offset + used);
  if (ec) return Err("header is not valid JSON at byte {}: {}", file_offset + used, ec.message());
  return parser.handler().stack().release();
}

// A non-negative integer that fits `max`, or nullopt (negative, fractional, a string, too large).
std::optional<uint64_t> AsCount(const json::value& v, uint64_t max) {
  if (v.is_uint64()) return v.get_uint64() <= max ? std::optional<uint64_t>(v.get_uint64()) : std::nullopt;
  if (v.is_int64() && v.get_int64() >= 0 && static_cast<uint64_t>(v.get_int64()) <= max)
    return static_cast<uint64_t>(v.get_int64());
  return std::nullopt;
}

// Maps a safetensors dtype name ("F32", "BF16", "BOOL", ...) to a plain DType. Names are upper case in the
// format, and GGML block types ("Q8_0") are not safetensors dtypes, so both are refused here.
std::optional<DType> SafetensorsDType(std::string_view name) {
  std::optional<DType> t = ParseDType(name);
  if (!t || Info(*t).is_block_quantized) return std::nullopt;
  std::string upper(Name(*t));
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (upper != name) return std::nullopt;
  return t;
}

std::string SafetensorsName(DType t) {
  std::string upper(Name(t));
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return upper;
}

// One header entry after its own fields are checked; offsets are relative to the data section.
struct Entry {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t begin;
  uint64_t end;
};

// dtype x product(shape) in bytes, or nullopt on overflow. Elements must also fit int64 (TensorView counts
// elements as int64_t).
std::optional<uint64_t> ByteSize(DType dtype, const std::vector<int64_t>& shape) {
  uint64_t elements = 1;
  for (int64_t d : shape) {
    if (__builtin_mul_overflow(elements, static_cast<uint64_t>(d), &elements)) return std::nullopt;
  }
  if (elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(elements, static_cast<uint64_t>(Info(dtype).block_bytes), &bytes)) return std::nullopt;
  return bytes;
}

Result<Entry> ParseEntry(const std::string& name, const json::value& v, uint64_t data_bytes) {
  const json::object* obj = v.if_object();
  if (obj == nullptr) return Err("tensor '{}': entry is not a JSON object", name);
  Entry e{name, DType::kF32, {}, 0, 0};

  const json::value* dtype = obj->if_contains("dtype");
  if (dtype == nullptr) return Err("tensor '{}': missing \"dtype\"", name);
  if (!dtype->is_string()) return Err("tensor '{}': \"dtype\" is not a string", name);
  std::string_view dtype_name(dtype->get_string().data(), dtype->get_string().size());
  std::optional<DType> dt = SafetensorsDType(dtype_name);
  if (!dt)
    return Err(
        "tensor '{}' has dtype '{}', which parallm does not read (supported: F32, F16, BF16, F64, I8, U8, "
        "I16, I32, I64, U32, BOOL)",
        name, dtype_name);
  e.dtype = *dt;

  const json::value* shape = obj->if_contains("shape");
  if (shape == nullptr) return Err("tensor '{}': missing \"shape\"", name);
  if (!shape->is_array()) return Err("tensor '{}': \"shape\" is not an array", name);
  for (const json::value& d : shape->get_array()) {
    std::optional<uint64_t> n = AsCount(d, static_cast<uint64_t>(std::numeric_limits<int64_t>::max()));
    if (!n) return Err("tensor '{}': shape entry {} is not a non-negative integer", name, DescribeJson(d));
    e.shape.push_back(static_cast<int64_t>(*n));
  }

  const json::value* offsets = obj->if_contains("data_offsets");
  if (offsets == nullptr) return Err("tensor '{}': missing \"data_offsets\"", name);
  if (!offsets->is_array() || offsets->get_array().size() != 2)
    return Err("tensor '{}': \"data_offsets\" is not a [begin, end] pair", name);
  std::optional<uint64_t> begin = AsCount(offsets->get_array()[0], std::numeric_limits<uint64_t>::max());
  std::optional<uint64_t> end = AsCount(offsets->get_array()[1], std::numeric_limits<uint64_t>::max());
  if (!begin || !end) return Err("tensor '{}': \"data_offsets\" are not non-negative integers", name);
  if (*begin > *end) return Err("tensor '{}': data_offsets [{}, {}] end before they begin", name, *begin, *end);
  if (*end > data_bytes)
    return Err("tensor '{}': data_offsets [{}, {}] run past the end of the data ({} bytes)", name, *begin, *end,
               data_bytes);
  e.begin = *begin;
  e.end = *end;

  std::optional<uint64_t> expected = ByteSize(e.dtype, e.shape);
  if (!expected)
    return Err("tensor '{}': shape {} of {} is too large (size overflows)", name, ShapeString(e.shape), dtype_name);
  if (*expected != e.end - e.begin)
    return Err("tensor '{}': {} {} takes {} bytes but data_offsets [{}, {}] hold {}", name, dtype_name,
               ShapeString(e.shape), *expected, e.begin, e.end, e.end - e.begin);
  return e;
}

Status ParseMetadata(const json::value& v, std::map<std::string, std::string>& out) {
  const json::object* obj = v.if_object();
  if (obj == nullptr) return Err("\"__metadata__\" is not a JSON object");
  for (const auto& kv : *obj) {
    if (!kv.value().is_string()) return Err("\"__metadata__\" value for '{}' is not a string", std::string(kv.key()));
    out[std::string(kv.key())] = std::string(kv.value().get_string());
  }
  return Status::Ok();
}

// The reference implementation (safetensors' Metadata::validate and read_metadata) requires the tensors,
// sorted by offset, to tile the data section exactly: each starts where the previous one ended and the last
// ends at the end of the file. Every conforming writer produces that, so we require it too: a gap or trailing
// bytes mean a damaged or hand-made file, and an overlap would alias two tensors.
Status CheckTiling(std::vector<const Entry*> entries, uint64_t data_bytes) {
  std::sort(entries.begin(), entries.end(), [](const Entry* a, const Entry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t expected_begin = 0;
  const Entry* previous = nullptr;
  for (const Entry* e : entries) {
    if (e->begin < expected_begin)
      return Err("tensors '{}' [{}, {}] and '{}' [{}, {}] overlap", previous->name, previous->begin, previous->end,
                 e->name, e->begin, e->end);
    if (e->begin > expected_begin)
      return Err("gap of {} bytes before tensor '{}' (data_offsets [{}, {}]); tensors must be contiguous",
                 e->begin - expected_begin, e->name, e->begin, e->end);
    expected_begin = e->end;
    previous = e;
  }
  if (expected_begin != data_bytes)
    return Err("the tensors cover {} bytes of data but the file holds {} after the header", expected_begin, data_bytes);
  return Status::Ok();
}

Result<SafetensorsFile> Parse(std::span<const uint8_t> bytes, std::shared_ptr<const void> owner) {
  if (bytes.size() < kLengthBytes) return Err("file is {} bytes, too short for the 8-byte header length", bytes.size());
  uint64_t header_bytes = 0;
  for (size_t i = 0; i < kLengthBytes; ++i) header_bytes |= static_cast<uint64_t>(bytes[i]) << (8 * i);
  if (header_bytes > kMaxHeaderBytes)
    return Err("header length {} is over the {} byte limit (not a safetensors file?)", header_bytes, kMaxHeaderBytes);
  if (header_bytes > bytes.size() - kLengthBytes)
    return Err("header length {} runs past the end of the file ({} bytes)", header_bytes, bytes.size());
  const size_t data_start = kLengthBytes + static_cast<size_t>(header_bytes);
  const uint64_t data_bytes = bytes.size() - data_start;

  std::string_view text(reinterpret_cast<const char*>(bytes.data()) + kLengthBytes, header_bytes);
  PARALLM_ASSIGN_OR_RETURN(json::value header, ParseHeaderJson(text, kLengthBytes));
  const json::object* root = header.if_object();
  if (root == nullptr) return Err("header is JSON but not an object");

  SafetensorsFile file;
  std::vector<Entry> entries;
  entries.reserve(root->size());
  for (const auto& kv : *root) {
    std::string name(kv.key());
    if (name == kMetadataKey) {
      PARALLM_RETURN_IF_ERROR(ParseMetadata(kv.value(), file.metadata));
      continue;
    }
    PARALLM_ASSIGN_OR_RETURN(Entry e, ParseEntry(name, kv.value(), data_bytes));
    entries.push_back(std::move(e));
  }
  std::vector<const Entry*> sorted;
  sorted.reserve(entries.size());
  for (const Entry& e : entries) sorted.push_back(&e);
  PARALLM_RETURN_IF_ERROR(CheckTiling(std::move(sorted), data_bytes));

  // Views point into `bytes`. Data is 8-byte aligned when the header length is a multiple of 8, as writers
  // pad it; other files may give unaligned views, which the loaders copy or read bytewise.
  for (Entry& e : entries) {
    TensorView view;
    view.dtype = e.dtype;
    view.shape = std::move(e.shape);
    view.data = bytes.data() + data_start + e.begin;
    view.nbytes = static_cast<size_t>(e.end - e.begin);
    file.tensors.tensors.emplace(std::move(e.name), std::move(view));
  }
  if (owner) file.tensors.owners.push_back(std::move(owner));
  return file;
}

// Closes `f` (if open) and removes the partial file, returning `status`.
Status Abandon(std::FILE* f, const std::string& tmp, Status status) {
  if (f != nullptr) std::fclose(f);
  std::remove(tmp.c_str());
  return status;
}

}  // namespace

Result<SafetensorsFile> ParseSafetensors(std::span<const uint8_t> bytes, const std::string& name,
                                         std::shared_ptr<const void> owner) {
  Result<SafetensorsFile> r = Parse(bytes, std::move(owner));
  if (!r.ok()) return r.status().WithContext(name);
  return r;
}

Result<SafetensorsFile> ReadSafetensors(const std::string& path) {
  PARALLM_ASSIGN_OR_RETURN(std::shared_ptr<MappedFile> mapped, MappedFile::Open(path));
  std::span<const uint8_t> bytes = mapped->bytes();
  return ParseSafetensors(bytes, path, std::move(mapped));
}

void SafetensorsWriter::SetMetadata(const std::string& key, const std::string& value) { metadata_[key] = value; }

Status SafetensorsWriter::AddTensor(const std::string& name, DType dtype, std::vector<int64_t> shape, const void* data,
                                    size_t nbytes) {
  if (name == kMetadataKey) return Err("cannot store a tensor named '{}' in safetensors", name);
  if (Info(dtype).is_block_quantized)
    return Err("tensor '{}': {} is a GGML block type, which safetensors cannot store", name, Name(dtype));
  for (int64_t d : shape)
    if (d < 0) return Err("tensor '{}': shape {} has a negative dimension", name, ShapeString(shape));
  std::optional<uint64_t> expected = ByteSize(dtype, shape);
  if (!expected || *expected != nbytes)
    return Err("tensor '{}': {} {} needs {} bytes, got {}", name, Name(dtype), ShapeString(shape),
               expected ? std::to_string(*expected) : std::string("too many"), nbytes);
  if (nbytes > 0 && data == nullptr) return Err("tensor '{}': no data", name);
  for (const Pending& p : tensors_)
    if (p.name == name) return Err("tensor '{}' added twice", name);
  tensors_.push_back(Pending{name, dtype, std::move(shape), data, nbytes});
  return Status::Ok();
}

Status SafetensorsWriter::AddTensor(const std::string& name, DType dtype, std::vector<int64_t> shape,
                                    std::vector<uint8_t> bytes) {
  auto owned = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
  PARALLM_RETURN_IF_ERROR(AddTensor(name, dtype, std::move(shape), owned->data(), owned->size()));
  owned_.push_back(std::move(owned));
  return Status::Ok();
}

size_t SafetensorsWriter::data_bytes() const {
  size_t total = 0;
  for (const Pending& p : tensors_) total += p.nbytes;
  return total;
}

Status SafetensorsWriter::Write(const std::string& path) const {
  // Header: "__metadata__" first (as the reference writer does), then tensors in the order added, their
  // data laid end to end. boost::json::object keeps insertion order when serialized.
  json::object header;
  if (!metadata_.empty()) {
    json::object meta;
    for (const auto& [k, v] : metadata_) meta[k] = v;
    header[kMetadataKey] = std::move(meta);
  }
  uint64_t offset = 0;
  for (const Pending& p : tensors_) {
    json::array shape;
    for (int64_t d : p.shape) shape.push_back(d);
    header[p.name] = json::object{{"dtype", SafetensorsName(p.dtype)},
                                  {"shape", std::move(shape)},
                                  {"data_offsets", json::array{offset, offset + p.nbytes}}};
    offset += p.nbytes;
  }
  std::string text = json::serialize(header);
  // Pad with spaces so the data starts 8-byte aligned (8 + header length is then a multiple of 8).
  text.append((8 - text.size() % 8) % 8, ' ');
  uint8_t length[kLengthBytes];
  for (size_t i = 0; i < kLengthBytes; ++i)
    length[i] = static_cast<uint8_t>(static_cast<uint64_t>(text.size()) >> (8 * i));

  // Stream to path.tmp and rename, so a reader never sees a half-written file and tensors are never copied
  // into one big buffer (files reach hundreds of MB).
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) return Err("{}: cannot open for writing: {}", tmp, std::strerror(errno));
  auto put = [&](const void* data, size_t n) { return n == 0 || std::fwrite(data, 1, n, f) == n; };
  if (!put(length, sizeof(length)) || !put(text.data(), text.size()))
    return Abandon(f, tmp, Err("{}: write failed: {}", tmp, std::strerror(errno)));
  for (const Pending& p : tensors_)
    if (!put(p.data, p.nbytes))
      return Abandon(f, tmp, Err("{}: write failed in tensor '{}': {}", tmp, p.name, std::strerror(errno)));
  if (std::fclose(f) != 0) return Abandon(nullptr, tmp, Err("{}: write failed: {}", tmp, std::strerror(errno)));
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return Abandon(nullptr, tmp, Err("{}: cannot rename into place: {}", path, std::strerror(errno)));
  return Status::Ok();
}

}  // namespace parallm
