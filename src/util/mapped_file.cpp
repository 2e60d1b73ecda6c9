// MappedFile: mmap of a whole file, plus small whole-file read/write helpers.
#include "util/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <mutex>
#include <shared_mutex>
#include <sstream>
#include <utility>
#include <vector>

namespace parallm {
namespace {

// The live mappings (start, bytes), so ReleaseMappedPages acts only on file pages. Never destroyed: a MappedFile held
// by a static (a test's cached model) may close after the other statics are gone.
std::shared_mutex& MappingsMutex() {
  static auto* m = new std::shared_mutex;
  return *m;
}
std::vector<std::pair<uintptr_t, size_t>>& Mappings() {
  static auto* v = new std::vector<std::pair<uintptr_t, size_t>>;
  return *v;
}

}  // namespace

Result<std::shared_ptr<MappedFile>> MappedFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Err("{}: cannot open: {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return Err("{}: cannot stat: {}", path, std::strerror(e));
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    return Err("{}: is a directory, expected a file", path);
  }
  std::shared_ptr<MappedFile> file(new MappedFile());
  file->path_ = path;
  file->size_ = static_cast<size_t>(st.st_size);
  if (file->size_ > 0) {
    void* p = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      return Err("{}: cannot mmap {} bytes: {}", path, file->size_, std::strerror(e));
    }
    file->data_ = static_cast<const uint8_t*>(p);
    std::unique_lock lock(MappingsMutex());
    Mappings().emplace_back(reinterpret_cast<uintptr_t>(p), file->size_);
  }
  ::close(fd);
  return file;
}

MappedFile::~MappedFile() {
  if (data_ == nullptr) return;
  // Unmapped under the lock: a ReleaseMappedPages that found this mapping finishes before its pages can go to another.
  std::unique_lock lock(MappingsMutex());
  auto& v = Mappings();
  v.erase(std::remove(v.begin(), v.end(), std::make_pair(reinterpret_cast<uintptr_t>(data_), size_)), v.end());
  ::munmap(const_cast<uint8_t*>(data_), size_);
}

size_t ReleaseMappedPages(const void* p, size_t n) {
  const uintptr_t begin = reinterpret_cast<uintptr_t>(p), end = begin + n;
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t first = (begin + page - 1) / page * page, last = end / page * page;
  if (last <= first) return 0;
  std::shared_lock lock(MappingsMutex());  // releases of different ranges run at once
  const auto& v = Mappings();
  if (std::none_of(v.begin(), v.end(), [&](const auto& m) { return begin >= m.first && end <= m.first + m.second; }))
    return 0;
  // A private, read-only file mapping: the dropped pages come back from the file on the next read.
  if (::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED) != 0) return 0;
  return last - first;
}

Result<std::string> ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Err("{}: cannot open for reading: {}", path, std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Err("{}: read error", path);
  return ss.str();
}

Status WriteFile(const std::string& path, std::span<const uint8_t> bytes) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return Err("{}: cannot open for writing: {}", tmp, std::strerror(errno));
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!out) return Err("{}: write failed: {}", tmp, std::strerror(errno));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return Err("{}: cannot rename into place: {}", path, std::strerror(errno));
  return Status::Ok();
}

}  // namespace parallm
