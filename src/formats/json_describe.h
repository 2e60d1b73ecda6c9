// How a JSON value read from a model's files is quoted in an error message: as a person wrote it.
#pragma once

#include <string>

#include <boost/json.hpp>
#include <fmt/format.h>

namespace parallm {

// boost::json::serialize prints 2.5 as 2.5E0; a double is printed the short way, everything else as JSON.
inline std::string DescribeJson(const boost::json::value& v) {
  if (v.is_double()) return fmt::format("{}", v.get_double());
  return boost::json::serialize(v);
}

}  // namespace parallm
