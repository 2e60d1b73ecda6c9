// MappedFile: a read-only memory map of a whole file; weights are used in place from it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "util/status.h"

namespace parallm {

class MappedFile {
 public:
  // Maps `path` read-only. An empty file maps to an empty span.
  static Result<std::shared_ptr<MappedFile>> Open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  std::span<const uint8_t> bytes() const { return {data_, size_}; }

 private:
  MappedFile() = default;
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// Drops this process's pages of [p, p + n) where the range lies in a live MappedFile: the whole pages inside it (one
// shared with bytes outside the range stays). The bytes read the same afterwards: the file's page cache keeps them
// and a later read maps them in again. What it changes is the process's resident memory, which no longer counts
// them: for weights that were copied at load (repacked), the stored copy is not held twice. Any other memory is left
// alone (dropping anonymous pages would zero them). Returns the bytes dropped.
size_t ReleaseMappedPages(const void* p, size_t n);

// Reads a whole (small) file into a string, e.g. config.json.
Result<std::string> ReadTextFile(const std::string& path);
// Writes `bytes` to `path` atomically enough for tools: writes `path`.tmp then renames.
Status WriteFile(const std::string& path, std::span<const uint8_t> bytes);

}  // namespace parallm
