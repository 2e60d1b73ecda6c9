// ZeroedPages: a large zero-filled buffer mapped straight from the kernel (never from malloc's heap), aligned and
// advised for transparent huge pages: the repacked weights and the KV cache, which every step streams.
#pragma once

#include <cstddef>

namespace parallm {

// Owns at least `size` bytes of zeroes mapped anonymously; the kernel fills pages in on first write, so the parts
// never written cost no memory. A buffer of 1 MiB or more starts on a 2 MiB boundary and is advised as transparent
// huge pages (taken where the system gives them on request, its common `madvise` setting): streamed weights and
// a sequence's scattered KV blocks then miss the TLB far less, and first writes fault 512 times less often.
//
// Mapped rather than malloc'd: malloc serves such sizes from its heap once its mmap threshold has risen, and the
// huge-page advice cut that heap into hundreds of mappings; request-time allocations around them were handed back
// to the kernel and faulted in again (the grammar mask's first visits took ~1.4x as long with a model loaded).
class ZeroedPages {
 public:
  ZeroedPages() = default;
  explicit ZeroedPages(size_t size);  // throws std::bad_alloc when the mapping fails
  ZeroedPages(ZeroedPages&& other) noexcept;
  ZeroedPages& operator=(ZeroedPages&& other) noexcept;
  ZeroedPages(const ZeroedPages&) = delete;
  ZeroedPages& operator=(const ZeroedPages&) = delete;
  ~ZeroedPages();

  void* get() const { return data_; }
  size_t size() const { return size_; }  // mapped bytes: the size asked for, rounded up to whole pages
  explicit operator bool() const { return data_ != nullptr; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace parallm
