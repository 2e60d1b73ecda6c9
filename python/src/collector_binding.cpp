// _parallm.Collector and the results it hands out (finished requests, per-step deltas, sampled tokens' logprobs).
#include <pybind11/stl.h>

#include "binding.h"
#include "collector.h"

namespace py = pybind11;

namespace parallm::python {

void BindCollector(py::module_& m) {
  py::class_<TokenLogprob>(m, "TokenLogprob")
      .def_readonly("token", &TokenLogprob::token)
      .def_readonly("logprob", &TokenLogprob::logprob);
  py::class_<SampleResult>(m, "SampleResult", "One sampled token: its logprob and the top alternatives asked for.")
      .def_readonly("token", &SampleResult::token)
      .def_readonly("logprob", &SampleResult::logprob)
      .def_readonly("top", &SampleResult::top);
  py::class_<ChoiceResult>(m, "ChoiceResult", "One finished choice: all its text, tokens and logprobs.")
      .def_readonly("index", &ChoiceResult::index)
      .def_readonly("text", &ChoiceResult::text)
      .def_readonly("token_ids", &ChoiceResult::token_ids)
      .def_readonly("samples", &ChoiceResult::samples)
      .def_readonly("finish_reason", &ChoiceResult::finish_reason);
  py::class_<FinishedRequest>(m, "FinishedRequest", "A request whose choices are all done, or that was refused.")
      .def_readonly("tag", &FinishedRequest::tag)
      .def_readonly("choices", &FinishedRequest::choices)
      .def_readonly("prompt_tokens", &FinishedRequest::prompt_tokens)
      .def_readonly("cached_tokens", &FinishedRequest::cached_tokens)
      .def_readonly("error", &FinishedRequest::error)
      .def_readonly("ttft_seconds", &FinishedRequest::ttft_seconds)
      .def_readonly("total_seconds", &FinishedRequest::total_seconds);
  py::class_<ChoiceUpdate>(m, "ChoiceUpdate", "One choice's progress in one engine step.")
      .def_readonly("index", &ChoiceUpdate::index)
      .def_readonly("token_ids", &ChoiceUpdate::new_tokens)
      .def_readonly("samples", &ChoiceUpdate::new_samples)
      .def_readonly("text", &ChoiceUpdate::new_text)
      .def_readonly("finished", &ChoiceUpdate::finished)
      .def_property_readonly("finish_reason", [](const ChoiceUpdate& c) { return FinishReasonText(c.finish_reason); });
  py::class_<Delta>(m, "Delta", "One request's progress in one engine step.")
      .def_readonly("tag", &Delta::tag)
      .def_property_readonly("choices", [](const Delta& d) { return d.update.choices; })
      .def_property_readonly("prompt_tokens", [](const Delta& d) { return d.update.prompt_tokens; })
      .def_property_readonly("cached_tokens", [](const Delta& d) { return d.update.cached_tokens; })
      .def_property_readonly("done", [](const Delta& d) { return d.update.done; })
      .def_property_readonly("error", [](const Delta& d) { return d.update.error; })
      .def_readonly("elapsed_seconds", &Delta::elapsed_seconds);

  py::class_<Collector, std::shared_ptr<Collector>>(
      m, "Collector",
      "Receives the progress of the requests submitted with it. deltas=False: take_finished() returns whole "
      "requests; deltas=True: take_deltas() returns each step's progress. notify=True: fileno() becomes "
      "readable when there is something to take (for asyncio).")
      .def(py::init([](bool deltas, bool notify) { return std::make_shared<Collector>(deltas, notify); }),
           py::arg("deltas") = false, py::arg("notify") = false)
      .def("take_finished", &Collector::TakeFinished, py::arg("timeout") = -1.0,
           py::call_guard<py::gil_scoped_release>(),
           "Waits up to `timeout` seconds (< 0: no limit) for finished requests; returns all there are.")
      .def("take_deltas", &Collector::TakeDeltas, py::arg("timeout") = -1.0, py::call_guard<py::gil_scoped_release>(),
           "Waits up to `timeout` seconds (< 0: no limit) for progress; returns all there is.")
      .def("wait_idle", &Collector::WaitIdle, py::call_guard<py::gil_scoped_release>(),
           "Waits until every request submitted with this collector is done (after cancelling them).")
      .def("fileno", &Collector::fileno)
      .def_property_readonly("num_open", &Collector::num_open)
      .def_property_readonly("deltas", &Collector::deltas);
}

}  // namespace parallm::python
