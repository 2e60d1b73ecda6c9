// The normalizer kinds and their construction from tokenizer.json.
#include "tokenizer/normalizer.h"

#include <vector>

#include "tokenizer/json_util.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"

namespace parallm {
namespace {

class UnicodeForm : public Normalizer {
 public:
  explicit UnicodeForm(unicode::NormalForm form) : form_(form) {}
  std::string Normalize(std::string text) const override { return unicode::Normalize(text, form_); }

 private:
  unicode::NormalForm form_;
};

class Lowercase : public Normalizer {
 public:
  std::string Normalize(std::string text) const override { return unicode::ToLower(text); }
};

class Strip : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  std::string Normalize(std::string text) const override {
    std::string_view s = text;
    if (left_) s = unicode::TrimStartJs(s);
    if (right_) s = unicode::TrimEndJs(s);
    return std::string(s);
  }

 private:
  bool left_, right_;
};

class Replace : public Normalizer {
 public:
  Replace(Regex pattern, std::string content) : pattern_(std::move(pattern)), content_(std::move(content)) {}
  std::string Normalize(std::string text) const override { return pattern_.ReplaceAll(text, content_); }

 private:
  Regex pattern_;
  std::string content_;
};

class Prepend : public Normalizer {
 public:
  explicit Prepend(std::string prefix) : prefix_(std::move(prefix)) {}
  // tokenizers.js prepends to every non-empty section; Rust's tokenizers does the same (empty input stays empty).
  std::string Normalize(std::string text) const override { return text.empty() ? text : prefix_ + text; }

 private:
  std::string prefix_;
};

class SequenceNormalizer : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> parts) : parts_(std::move(parts)) {}
  std::string Normalize(std::string text) const override {
    for (const auto& p : parts_) text = p->Normalize(std::move(text));
    return text;
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

}  // namespace

Result<std::unique_ptr<Normalizer>> Normalizer::FromJson(const boost::json::value& json) {
  if (json.is_null()) return std::unique_ptr<Normalizer>();
  if (!json.is_object()) return Err("normalizer is not an object");
  const boost::json::object& o = json.as_object();
  const std::string type = json_util::String(o, "type");
  if (type == "NFC") return std::unique_ptr<Normalizer>(new UnicodeForm(unicode::NormalForm::kNfc));
  if (type == "NFD") return std::unique_ptr<Normalizer>(new UnicodeForm(unicode::NormalForm::kNfd));
  if (type == "NFKC") return std::unique_ptr<Normalizer>(new UnicodeForm(unicode::NormalForm::kNfkc));
  if (type == "NFKD") return std::unique_ptr<Normalizer>(new UnicodeForm(unicode::NormalForm::kNfkd));
  if (type == "Lowercase") return std::unique_ptr<Normalizer>(new Lowercase());
  if (type == "Strip")
    return std::unique_ptr<Normalizer>(new Strip(json_util::Bool(o, "strip_left", true), json_util::Bool(o, "strip_right", true)));
  if (type == "Prepend") return std::unique_ptr<Normalizer>(new Prepend(json_util::String(o, "prepend")));
  if (type == "Replace") {
    PARALLM_ASSIGN_OR_RETURN(Regex pattern, json_util::Pattern(o));
    return std::unique_ptr<Normalizer>(new Replace(std::move(pattern), json_util::String(o, "content")));
  }
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Normalizer>> parts;
    const boost::json::value* list = o.if_contains("normalizers");
    if (list == nullptr || !list->is_array()) return Err("Sequence normalizer without \"normalizers\"");
    for (const boost::json::value& v : list->as_array()) {
      PARALLM_ASSIGN_OR_RETURN(std::unique_ptr<Normalizer> n, FromJson(v));
      if (n) parts.push_back(std::move(n));
    }
    return std::unique_ptr<Normalizer>(new SequenceNormalizer(std::move(parts)));
  }
  return Err("unsupported normalizer type '{}'", type);
}

std::unique_ptr<Normalizer> Normalizer::SentencePieceSpaces() {
  std::vector<std::unique_ptr<Normalizer>> parts;
  parts.emplace_back(new Prepend("\xE2\x96\x81"));
  parts.emplace_back(new Replace(Regex::Literal(" "), "\xE2\x96\x81"));
  return std::unique_ptr<Normalizer>(new SequenceNormalizer(std::move(parts)));
}

}  // namespace parallm
