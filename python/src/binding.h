// The pieces of the _parallm extension, each registered by its own file, and the errors they raise.
#pragma once

#include <stdexcept>
#include <string>

#include <pybind11/pybind11.h>

namespace parallm::python {

// Raised as Python's FileNotFoundError (a model or tokenizer path that does not exist).
struct FileNotFound : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void BindCollector(pybind11::module_& m);
void BindEngine(pybind11::module_& m);
void BindStructured(pybind11::module_& m);
void BindTokenizer(pybind11::module_& m);

}  // namespace parallm::python
