// The _parallm extension module: the engine, its tokenizer and the collectors Python takes results from. The
// Python package (parallm/*.py) builds vLLM's and mlx_parallm's interfaces on top of it.
#include "binding.h"

namespace py = pybind11;

PYBIND11_MODULE(_parallm, m) {
  m.doc() = "parallm's C++ engine (continuous batching, paged KV cache); use the `parallm` package instead.";
  m.attr("__version__") = PARALLM_VERSION;
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const parallm::python::FileNotFound& e) {
      PyErr_SetString(PyExc_FileNotFoundError, e.what());
    }
  });
  parallm::python::BindCollector(m);
  parallm::python::BindTokenizer(m);
  parallm::python::BindEngine(m);
  parallm::python::BindStructured(m);
}
