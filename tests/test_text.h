// Assertions on text that tests share: an error message contains the part a user needs to read.
#pragma once

#include <string>

#include <gtest/gtest.h>

namespace parallm::testing {

// Passes when `text` contains `part`; on failure prints both.
inline ::testing::AssertionResult Contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << text << "\" does not contain \"" << part << "\"";
}

}  // namespace parallm::testing
