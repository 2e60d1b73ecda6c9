// Writes .npy files (NumPy format 1.0) so tests and users can load parallm's tensors with numpy.load.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "util/status.h"

namespace parallm {

// Writes a little-endian f32 array of `shape` (C order).
Status WriteNpyF32(const std::string& path, const std::vector<int64_t>& shape, const float* data);

}  // namespace parallm
