// Helpers shared by the chat-template tests: whole-file reads and the frozen clock the goldens were made with.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

#include <boost/json.hpp>

#include "chat/chat_template.h"

namespace parallm::chat::test_util {

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// RenderOptions whose strftime_now() sees `doc["fixed_now"]` ({year, month, day, hour, minute}), as render.mjs does.
inline RenderOptions FixedNowFrom(const boost::json::object& doc) {
  const auto& now = doc.at("fixed_now").get_object();
  LocalTime t;
  t.year = static_cast<int>(now.at("year").to_number<int64_t>());
  t.month = static_cast<int>(now.at("month").to_number<int64_t>());
  t.day = static_cast<int>(now.at("day").to_number<int64_t>());
  t.hour = static_cast<int>(now.at("hour").to_number<int64_t>());
  t.minute = static_cast<int>(now.at("minute").to_number<int64_t>());
  return RenderOptions{t};
}

}  // namespace parallm::chat::test_util
