// ZeroedPages: anonymous mappings, over-mapped by 2 MiB and trimmed to a 2 MiB boundary for huge pages.
#include "util/zeroed_pages.h"

#include <algorithm>
#include <cstdint>
#include <new>
#include <utility>

#include <sys/mman.h>
#include <unistd.h>

namespace parallm {

ZeroedPages::ZeroedPages(size_t size) {
  constexpr size_t kHuge = size_t{2} << 20;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  size_ = (std::max<size_t>(size, 1) + page - 1) / page * page;
  const bool huge = size_ >= kHuge / 2;
  const size_t mapped = huge ? size_ + kHuge : size_;
  void* raw = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  if (!huge) {
    data_ = raw;
    return;
  }
  // Keep the 2 MiB-aligned part; the last partial 2 MiB stays in small pages.
  const uintptr_t base = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t start = (base + kHuge - 1) & ~uintptr_t{kHuge - 1};
  if (start > base) munmap(raw, start - base);
  munmap(reinterpret_cast<void*>(start + size_), base + mapped - (start + size_));
  data_ = reinterpret_cast<void*>(start);
#ifdef MADV_HUGEPAGE
  madvise(data_, size_, MADV_HUGEPAGE);  // advice only: ignored where unsupported
#endif
}

ZeroedPages::ZeroedPages(ZeroedPages&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

ZeroedPages& ZeroedPages::operator=(ZeroedPages&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) munmap(data_, size_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

ZeroedPages::~ZeroedPages() {
  if (data_ != nullptr) munmap(data_, size_);
}

}  // namespace parallm
