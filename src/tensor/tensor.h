// TensorView and TensorSet: non-owning views of stored tensors, and a named collection that keeps
// the memory (mmaps or buffers) behind them alive.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tensor/dtype.h"

namespace parallm {

// A stored tensor. `shape` is row-major, outermost first: a weight matrix y = W x with `out` rows and
// `in` columns has shape {out, in} (GGUF lists the same dims innermost first; its reader reverses them).
struct TensorView {
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  size_t nbytes = 0;

  int64_t NumElements() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  int64_t Dim(int i) const { return shape.at(static_cast<size_t>(i)); }
  int Rank() const { return static_cast<int>(shape.size()); }
};

// Tensors by name plus whatever owns their bytes (shared_ptr<void> keepalives: mmaps, heap buffers).
struct TensorSet {
  std::map<std::string, TensorView> tensors;
  std::vector<std::shared_ptr<const void>> owners;

  const TensorView* Find(const std::string& name) const {
    auto it = tensors.find(name);
    return it == tensors.end() ? nullptr : &it->second;
  }
};

// "[896, 4864]"
std::string ShapeString(const std::vector<int64_t>& shape);

}  // namespace parallm
