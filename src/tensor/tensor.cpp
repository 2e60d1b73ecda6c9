// TensorView helpers.
#include "tensor/tensor.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace parallm {

std::string ShapeString(const std::vector<int64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

}  // namespace parallm
