// MappedFile and ReleaseMappedPages: a mapped file's pages leave the process's resident memory and read the same
// afterwards; memory that is not a mapped file is never touched.
#include "util/mapped_file.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "test_paths.h"

namespace parallm {
namespace {

// The process's resident bytes (/proc/self/statm's second field, in pages), mapped file pages included.
size_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  size_t total = 0, resident = 0;
  statm >> total >> resident;
  return resident * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
}

uint8_t PatternAt(size_t i) { return static_cast<uint8_t>((i * 2654435761u) >> 13); }

TEST(MappedFile, ReleasedPagesLeaveResidentMemoryAndReadTheSame) {
  constexpr size_t kBytes = size_t{16} << 20;
  const std::string path = testing::ScratchDir("mapped-file") + "/weights.bin";
  {
    std::vector<uint8_t> bytes(kBytes);
    for (size_t i = 0; i < kBytes; ++i) bytes[i] = PatternAt(i);
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), kBytes);
  }
  auto file = MappedFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().message();
  const uint8_t* data = (*file)->data();
  uint64_t sum = 0;
  for (size_t i = 0; i < kBytes; ++i) sum += data[i];  // every page mapped in
  const size_t before = ResidentBytes();

  // A range that starts and ends inside pages: only the whole pages between go.
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t released = ReleaseMappedPages(data + 100, kBytes - 200);
  EXPECT_EQ(released, kBytes - 2 * page);
  const size_t after = ResidentBytes();
  EXPECT_LE(after + released * 9 / 10, before) << "resident " << before << " -> " << after;

  uint64_t again = 0;
  for (size_t i = 0; i < kBytes; ++i) {
    ASSERT_EQ(data[i], PatternAt(i)) << "byte " << i;
    again += data[i];
  }
  EXPECT_EQ(again, sum);
}

TEST(MappedFile, ReleaseLeavesOtherMemoryAlone) {
  constexpr size_t kBytes = size_t{4} << 20;
  std::vector<uint8_t> heap(kBytes);
  for (size_t i = 0; i < kBytes; ++i) heap[i] = PatternAt(i);
  EXPECT_EQ(ReleaseMappedPages(heap.data(), kBytes), 0u);
  for (size_t i = 0; i < kBytes; i += 997) ASSERT_EQ(heap[i], PatternAt(i)) << "byte " << i;

  // A range running past a mapped file's end is not the file's either; nor is a file's range once it is closed.
  const std::string path = testing::ScratchDir("mapped-file-edge") + "/small.bin";
  {
    std::vector<char> bytes(size_t{1} << 20, 'x');
    std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  auto file = MappedFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().message();
  const uint8_t* data = (*file)->data();
  EXPECT_EQ(ReleaseMappedPages(data, (*file)->size() + 1), 0u);
  EXPECT_GT(ReleaseMappedPages(data, (*file)->size()), 0u);
  EXPECT_EQ(data[12345], 'x');
  file->reset();
  EXPECT_EQ(ReleaseMappedPages(data, size_t{1} << 20), 0u);
}

}  // namespace
}  // namespace parallm
