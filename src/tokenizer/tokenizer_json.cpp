// Tokenizer::FromTokenizerJson: assembles the pipeline from a Hugging Face tokenizer.json and the
// tokenizer_config.json beside it.
#include <filesystem>
#include <map>
#include <unordered_set>

#include "formats/hf_folder.h"
#include "tokenizer/bpe.h"
#include "tokenizer/json_util.h"
#include "tokenizer/tokenizer_impl.h"
#include "util/mapped_file.h"

namespace parallm {
namespace {

Result<std::vector<std::pair<std::string, std::string>>> ParseMerges(const boost::json::object& model) {
  std::vector<std::pair<std::string, std::string>> merges;
  const boost::json::value* list = model.if_contains("merges");
  if (list == nullptr) return merges;
  if (!list->is_array()) return Err("model.merges is not an array");
  merges.reserve(list->as_array().size());
  for (const boost::json::value& m : list->as_array()) {
    if (m.is_string()) {
      // "a b": like tokenizers.js's split(" ", 2), the part after a second space is ignored.
      const std::string_view s = m.as_string();
      const size_t sp = s.find(' ');
      if (sp == std::string_view::npos) return Err("merge '{}' has no space", std::string(s));
      const size_t sp2 = s.find(' ', sp + 1);
      merges.emplace_back(std::string(s.substr(0, sp)), std::string(s.substr(sp + 1, sp2 == std::string_view::npos ? std::string_view::npos : sp2 - sp - 1)));
    } else if (m.is_array() && m.as_array().size() == 2 && m.as_array()[0].is_string() && m.as_array()[1].is_string()) {
      merges.emplace_back(std::string(m.as_array()[0].as_string()), std::string(m.as_array()[1].as_string()));
    } else {
      return Err("a merge is neither \"a b\" nor [\"a\", \"b\"]");
    }
  }
  return merges;
}

// "<s>" or {"content": "<s>", ...} (tokenizer_config.json's two spellings of a token).
std::string TokenContent(const boost::json::value* v) {
  if (v != nullptr && v->is_object()) v = v->as_object().if_contains("content");
  return v != nullptr && v->is_string() ? std::string(v->as_string()) : std::string();
}

// The ids a post-processor puts before and after the sequence when add_special is set.
Status ParsePostProcessor(const boost::json::value& json, Tokenizer::Impl& m) {
  if (json.is_null()) return Status::Ok();
  if (!json.is_object()) return Err("post_processor is not an object");
  const boost::json::object& o = json.as_object();
  const std::string type = json_util::String(o, "type");
  auto lookup = [&](const std::string& piece) -> Result<int32_t> {
    auto it = m.piece_to_id.find(piece);
    if (it == m.piece_to_id.end()) return Err("post_processor token '{}' is not in the vocabulary", piece);
    return it->second;
  };
  if (type == "ByteLevel") return Status::Ok();
  if (type == "TemplateProcessing") {
    const boost::json::value* single = o.if_contains("single");
    if (single == nullptr || !single->is_array()) return Err("TemplateProcessing without \"single\"");
    const boost::json::value* specials = o.if_contains("special_tokens");
    bool after = false;
    for (const boost::json::value& item : single->as_array()) {
      if (!item.is_object()) continue;
      if (item.as_object().contains("Sequence")) {
        after = true;
        continue;
      }
      const boost::json::value* st = item.as_object().if_contains("SpecialToken");
      if (st == nullptr || !st->is_object()) continue;
      const std::string name = json_util::String(st->as_object(), "id");
      std::vector<int32_t> add;
      const boost::json::value* entry = specials && specials->is_object() ? specials->as_object().if_contains(name) : nullptr;
      const boost::json::value* entry_ids = entry && entry->is_object() ? entry->as_object().if_contains("ids") : nullptr;
      if (entry_ids != nullptr && entry_ids->is_array()) {
        for (const boost::json::value& id : entry_ids->as_array())
          if (id.is_int64()) add.push_back(static_cast<int32_t>(id.as_int64()));
      } else {
        PARALLM_ASSIGN_OR_RETURN(int32_t id, lookup(name));
        add.push_back(id);
      }
      auto& dst = after ? m.suffix_ids : m.prefix_ids;
      dst.insert(dst.end(), add.begin(), add.end());
    }
    return Status::Ok();
  }
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    auto id_of = [&](const char* key) -> Result<int32_t> {
      const boost::json::value* v = o.if_contains(key);
      if (v == nullptr || !v->is_array() || v->as_array().size() != 2 || !v->as_array()[1].is_int64())
        return Err("{} without \"{}\"", type, key);
      return static_cast<int32_t>(v->as_array()[1].as_int64());
    };
    PARALLM_ASSIGN_OR_RETURN(int32_t cls, id_of("cls"));
    PARALLM_ASSIGN_OR_RETURN(int32_t sep, id_of("sep"));
    m.prefix_ids.push_back(cls);
    m.suffix_ids.push_back(sep);
    return Status::Ok();
  }
  if (type == "Sequence") {
    const boost::json::value* list = o.if_contains("processors");
    if (list == nullptr || !list->is_array()) return Err("Sequence post_processor without \"processors\"");
    for (const boost::json::value& p : list->as_array()) PARALLM_RETURN_IF_ERROR(ParsePostProcessor(p, m));
    return Status::Ok();
  }
  return Err("unsupported post_processor type '{}'", type);
}

Result<Tokenizer::Impl*> Build(const std::string& path, std::unique_ptr<Tokenizer::Impl>& impl) {
  Tokenizer::Impl& m = *impl;
  PARALLM_ASSIGN_OR_RETURN(std::string text, ReadTextFile(path));
  PARALLM_ASSIGN_OR_RETURN(boost::json::value root, ParseJson(text, path));
  if (!root.is_object()) return Err("not a JSON object");
  const boost::json::object& j = root.as_object();
  const boost::json::value* model_json = j.if_contains("model");
  if (model_json == nullptr || !model_json->is_object()) return Err("no \"model\" object");
  const boost::json::object& model = model_json->as_object();
  if (json_util::String(model, "type", "BPE") != "BPE")
    return Err("model type '{}' is not supported (only BPE)", json_util::String(model, "type"));
  if (!json_util::String(model, "continuing_subword_prefix").empty() || !json_util::String(model, "end_of_word_suffix").empty())
    return Err("BPE continuing_subword_prefix / end_of_word_suffix are not supported");

  // Vocabulary by id: model.vocab, then added tokens (which may add ids past it).
  std::map<int64_t, std::string> by_id;
  const boost::json::value* vocab = model.if_contains("vocab");
  if (vocab == nullptr || !vocab->is_object()) return Err("model.vocab is missing");
  std::unordered_map<std::string, int32_t> bpe_vocab;
  bpe_vocab.reserve(vocab->as_object().size() + 1024);
  for (const auto& [piece, id] : vocab->as_object()) {
    if (!id.is_int64() || id.as_int64() < 0 || id.as_int64() > (1 << 24))
      return Err("token '{}' has an invalid id", std::string(piece));
    by_id[id.as_int64()] = std::string(piece);
    bpe_vocab[std::string(piece)] = static_cast<int32_t>(id.as_int64());
  }
  if (const boost::json::value* added = j.if_contains("added_tokens"); added && added->is_array()) {
    for (const boost::json::value& t : added->as_array()) {
      if (!t.is_object()) return Err("an added token is not an object");
      const boost::json::object& o = t.as_object();
      const boost::json::value* id = o.if_contains("id");
      if (id == nullptr || !id->is_int64() || id->as_int64() < 0 || id->as_int64() > (1 << 24))
        return Err("an added token has no valid id");
      AddedToken a;
      a.content = json_util::String(o, "content");
      a.id = static_cast<int32_t>(id->as_int64());
      a.special = json_util::Bool(o, "special", false);
      a.lstrip = json_util::Bool(o, "lstrip", false);
      a.rstrip = json_util::Bool(o, "rstrip", false);
      a.normalized = json_util::Bool(o, "normalized", !a.special);
      a.single_word = json_util::Bool(o, "single_word", false);
      by_id[a.id] = a.content;
      bpe_vocab[a.content] = a.id;  // tokenizers.js's model also knows added tokens
      m.added.push_back(std::move(a));
    }
  }
  if (by_id.empty()) return Err("empty vocabulary");
  const int64_t n = by_id.rbegin()->first + 1;
  for (int64_t id = 0; id < n; ++id) {
    auto it = by_id.find(id);
    m.vocab.tokens.push_back(it != by_id.end() ? it->second : "[PAD" + std::to_string(id) + "]");
    m.vocab.types.push_back(static_cast<int32_t>(it != by_id.end() ? TokenType::kNormal : TokenType::kUnused));
  }
  for (const AddedToken& a : m.added)
    m.vocab.types[static_cast<size_t>(a.id)] = static_cast<int32_t>(a.special ? TokenType::kControl : TokenType::kUserDefined);

  PARALLM_ASSIGN_OR_RETURN(auto merges, ParseMerges(model));
  BpeOptions options;
  options.byte_fallback = json_util::Bool(model, "byte_fallback", false);
  options.ignore_merges = json_util::Bool(model, "ignore_merges", false);
  options.fuse_unk = json_util::Bool(model, "fuse_unk", false);
  if (const std::string unk = json_util::String(model, "unk_token"); !unk.empty()) {
    auto it = bpe_vocab.find(unk);
    if (it != bpe_vocab.end()) options.unk_id = it->second;
  }
  m.vocab.unk = options.unk_id;
  m.vocab.merges.reserve(merges.size());
  for (const auto& [a, b] : merges) m.vocab.merges.push_back(a + " " + b);
  m.model = std::make_unique<BpeModel>(std::move(bpe_vocab), merges, options);

  const boost::json::value null;
  auto get = [&](const char* key) -> const boost::json::value& {
    const boost::json::value* v = j.if_contains(key);
    return v != nullptr ? *v : null;
  };
  {
    auto n = Normalizer::FromJson(get("normalizer"));
    if (!n.ok()) return n.status().WithContext("normalizer");
    m.normalizer = std::move(n).value();
  }
  {
    auto p = PreTokenizer::FromJson(get("pre_tokenizer"));
    if (!p.ok()) return p.status().WithContext("pre_tokenizer");
    m.pre_tokenizer = std::move(p).value();
  }
  std::unordered_set<std::string> added_contents;
  for (const AddedToken& a : m.added) added_contents.insert(a.content);
  {
    auto d = Decoder::FromJson(get("decoder"), added_contents);
    if (!d.ok()) return d.status().WithContext("decoder");
    m.decoder = std::move(d).value();
  }
  const boost::json::value& decoder = get("decoder");
  const bool byte_level = decoder.is_object() && json_util::String(decoder.as_object(), "type") == "ByteLevel";
  m.vocab.model = byte_level ? "gpt2" : "hf-sentencepiece";
  m.IndexAddedTokens();
  PARALLM_RETURN_IF_ERROR(ParsePostProcessor(get("post_processor"), m).WithContext("post_processor"));

  // tokenizer_config.json: BOS/EOS names, decode clean-up, extra special tokens.
  m.clean_up_spaces = true;  // transformers' and tokenizers.js's default when the config does not say
  const std::string config_path = (std::filesystem::path(path).parent_path() / "tokenizer_config.json").string();
  if (std::filesystem::exists(config_path)) {
    PARALLM_ASSIGN_OR_RETURN(std::string config_text, ReadTextFile(config_path));
    PARALLM_ASSIGN_OR_RETURN(boost::json::value config, ParseJson(config_text, config_path));
    if (config.is_object()) {
      const boost::json::object& c = config.as_object();
      auto id_of = [&](const char* key) -> int32_t {
        const std::string content = TokenContent(c.if_contains(key));
        auto it = m.piece_to_id.find(content);
        return content.empty() || it == m.piece_to_id.end() ? -1 : it->second;
      };
      m.vocab.bos = id_of("bos_token");
      m.vocab.eos = id_of("eos_token");
      m.clean_up_spaces = json_util::Bool(c, "clean_up_tokenization_spaces", true);
      if (const boost::json::value* extra = c.if_contains("additional_special_tokens"); extra && extra->is_array()) {
        for (const boost::json::value& t : extra->as_array()) {
          auto it = m.piece_to_id.find(TokenContent(&t));
          if (it != m.piece_to_id.end() && static_cast<size_t>(it->second) < m.special.size())
            m.special[static_cast<size_t>(it->second)] = true;
        }
      }
    }
  }
  for (int32_t id : m.prefix_ids) m.vocab.add_bos = m.vocab.add_bos || (id == m.vocab.bos && id >= 0);
  return &m;
}

}  // namespace

Result<Tokenizer> Tokenizer::FromTokenizerJson(const std::string& path) {
  auto impl = std::make_unique<Impl>();
  auto built = Build(path, impl);
  if (!built.ok()) return built.status().WithContext(path);
  return Tokenizer(std::shared_ptr<const Impl>(std::move(impl)));
}

}  // namespace parallm
