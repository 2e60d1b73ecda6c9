// _parallm.Tokenizer: a model's tokenizer and chat template (ModelText), as the engine and the CLI use them.
#include <memory>

#include <boost/json.hpp>
#include <pybind11/stl.h>

#include "binding.h"
#include "chat/model_text.h"

namespace py = pybind11;

namespace parallm::python {
namespace {

const Tokenizer& Need(const ModelText& t) {
  if (!t.has_tokenizer()) throw py::value_error(t.missing());
  return *t.tokenizer();
}

boost::json::value ParseJsonArg(const std::string& json, const char* what) {
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(json, ec);
  if (ec) throw py::value_error(fmt::format("{} is not valid JSON: {}", what, ec.message()));
  return v;
}

std::optional<int32_t> OptionalId(int32_t id) {
  if (id < 0) return std::nullopt;
  return id;
}

}  // namespace

void BindTokenizer(py::module_& m) {
  py::class_<ModelText, std::shared_ptr<ModelText>>(m, "Tokenizer", "A model's tokenizer and chat template.")
      .def_property_readonly("has_tokenizer", &ModelText::has_tokenizer)
      .def_property_readonly("has_chat_template", &ModelText::has_chat_template)
      .def_property_readonly("missing", &ModelText::missing, "Why there is no tokenizer.")
      .def(
          "encode",
          [](const ModelText& t, const std::string& text, bool add_special_tokens) {
            const Tokenizer& tok = Need(t);
            py::gil_scoped_release release;
            return tok.Encode(text, add_special_tokens, /*parse_special=*/true);
          },
          py::arg("text"), py::arg("add_special_tokens") = true)
      .def(
          "decode",
          [](const ModelText& t, const std::vector<int32_t>& ids, bool skip_special_tokens) {
            const Tokenizer& tok = Need(t);
            py::gil_scoped_release release;
            return tok.Decode(ids, skip_special_tokens);
          },
          py::arg("ids"), py::arg("skip_special_tokens") = true)
      .def(
          "render_chat",
          [](const ModelText& t, const std::string& messages_json, const std::string& extra_json) {
            boost::json::value messages = ParseJsonArg(messages_json, "messages");
            boost::json::value extra = ParseJsonArg(extra_json, "the template arguments");
            if (!messages.is_array()) throw py::value_error("messages must be a list of {'role', 'content'} dicts");
            if (!extra.is_object()) throw py::value_error("the template arguments must be a dict");
            Result<std::string> text = t.RenderChat(messages.as_array(), extra.as_object());
            if (!text.ok()) throw py::value_error(text.status().message());
            return *text;
          },
          py::arg("messages_json"), py::arg("extra_json") = "{}",
          "Renders messages (JSON) through the chat template with extra variables (JSON object).")
      .def_property_readonly("vocab_size", [](const ModelText& t) { return Need(t).size(); })
      .def_property_readonly("bos_token_id", [](const ModelText& t) { return OptionalId(Need(t).bos_id()); })
      .def_property_readonly("eos_token_id", [](const ModelText& t) { return OptionalId(Need(t).eos_id()); })
      .def(
          "id_to_token",
          [](const ModelText& t, int32_t id) -> std::optional<std::string> {
            const Tokenizer& tok = Need(t);
            if (id < 0 || id >= tok.size()) return std::nullopt;
            return tok.TokenText(id);
          },
          py::arg("id"))
      .def(
          "token_to_id",
          [](const ModelText& t, const std::string& piece) { return Need(t).TokenToId(piece); }, py::arg("piece"))
      .def(
          "is_special", [](const ModelText& t, int32_t id) { return Need(t).IsSpecial(id); }, py::arg("id"));
}

}  // namespace parallm::python
