// CacheLineAllocator: a std::vector allocator whose blocks start on a cache line (64 bytes), for buffers that
// threads write side by side. glibc's malloc puts a large block 16 bytes past a page start, so rows whose width is a
// whole number of lines would each straddle a line at every boundary between two threads' parts, and those lines
// bounce between the cores on every write.
#pragma once

#include <cstddef>
#include <new>

namespace parallm {

inline constexpr std::size_t kCacheLineBytes = 64;

template <class T>
struct CacheLineAllocator {
  using value_type = T;
  CacheLineAllocator() = default;
  template <class U>
  CacheLineAllocator(const CacheLineAllocator<U>&) noexcept {}  // NOLINT(google-explicit-constructor): rebinding
  T* allocate(std::size_t n) {
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{kCacheLineBytes}));
  }
  void deallocate(T* p, std::size_t) noexcept { ::operator delete(p, std::align_val_t{kCacheLineBytes}); }
  template <class U>
  bool operator==(const CacheLineAllocator<U>&) const noexcept {
    return true;
  }
};

}  // namespace parallm
