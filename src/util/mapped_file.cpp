// MappedFile: mmap of a whole file, plus small whole-file read/write helpers.
#include "util/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace parallm {

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
  }
  ::close(fd);
  return file;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
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
