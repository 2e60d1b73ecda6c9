// Where tests find the shared fixtures and a scratch folder.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>
#include <unistd.h>

namespace parallm::testing {

// ../shared, or $PARALLM_FIXTURES when set. A test that needs the fixtures stops at once, saying where it looked,
// when that folder is missing (instead of failing later on an empty file, or crashing on it).
inline std::string FixturePath(const std::string& relative) {
  const char* env = std::getenv("PARALLM_FIXTURES");
  std::string root = env != nullptr && *env != '\0' ? env : PARALLM_FIXTURES;
  if (!std::filesystem::is_directory(root + "/models")) {
    std::fprintf(stderr,
                 "the shared test fixtures are not at %s (no models/ there): set PARALLM_FIXTURES to the folder "
                 "that holds models/, tokenizers/ and chat-templates/\n",
                 root.c_str());
    std::exit(2);
  }
  return root + "/" + relative;
}

// A fresh empty folder under the system temp dir, unique to this process and `name`; removed when the test
// process exits normally (a crashed test leaves its files for a look).
inline std::string ScratchDir(const std::string& name) {
  struct Created {
    std::mutex mu;
    std::vector<std::filesystem::path> dirs;
    ~Created() {
      std::error_code ec;
      for (const auto& d : dirs) std::filesystem::remove_all(d, ec);
    }
  };
  static Created created;
  auto dir = std::filesystem::temp_directory_path() / ("parallm-test-" + std::to_string(::getpid()) + "-" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::lock_guard<std::mutex> lock(created.mu);
  created.dirs.push_back(dir);
  return dir.string();
}

}  // namespace parallm::testing
