// Vocab: reading and writing tokenizer.ggml.* metadata, and decoding ids to text.
#include "tokenizer/vocab.h"

#include <filesystem>
#include <map>

#include "formats/gguf.h"
#include "formats/hf_folder.h"
#include "util/mapped_file.h"
#include "formats/llama2c.h"

namespace parallm {
namespace {

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581, SentencePiece's visible space

// GPT-2 byte-level mapping: printable bytes map to themselves, the rest to U+0100 + n in order.
std::vector<std::string> ByteToUnicode() {
  std::vector<std::string> table(256);
  int n = 0;
  for (int b = 0; b < 256; ++b) {
    bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    uint32_t cp = printable ? static_cast<uint32_t>(b) : static_cast<uint32_t>(256 + n++);
    std::string s;
    if (cp < 0x80) {
      s.push_back(static_cast<char>(cp));
    } else {
      s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
    table[static_cast<size_t>(b)] = s;
  }
  return table;
}

int HexNibble(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

Result<Vocab> Vocab::FromGguf(const GgufFile& file, const std::string& path) {
  Vocab v;
  auto model = file.GetString("tokenizer.ggml.model");
  if (!model) return Err("{}: no tokenizer.ggml.model", path);
  v.model = *model;
  const GgufValue* tokens = file.Find("tokenizer.ggml.tokens");
  if (tokens == nullptr || tokens->type != GgufType::kArray || tokens->array_type != GgufType::kString)
    return Err("{}: tokenizer.ggml.tokens is missing or not a string array", path);
  for (const GgufValue& t : tokens->array) v.tokens.push_back(t.str);
  const size_t n = v.tokens.size();
  if (const GgufValue* scores = file.Find("tokenizer.ggml.scores"); scores && scores->type == GgufType::kArray) {
    if (scores->array.size() != n) return Err("{}: {} scores for {} tokens", path, scores->array.size(), n);
    for (const GgufValue& s : scores->array) v.scores.push_back(static_cast<float>(s.AsFloat().value_or(0)));
  }
  if (const GgufValue* types = file.Find("tokenizer.ggml.token_type"); types && types->type == GgufType::kArray) {
    if (types->array.size() != n) return Err("{}: {} token types for {} tokens", path, types->array.size(), n);
    for (const GgufValue& t : types->array) v.types.push_back(static_cast<int32_t>(t.AsInt().value_or(1)));
  }
  if (const GgufValue* merges = file.Find("tokenizer.ggml.merges"); merges && merges->type == GgufType::kArray)
    for (const GgufValue& m : merges->array) v.merges.push_back(m.str);
  auto id = [&](const char* key) -> int32_t {
    auto x = file.GetInt(key);
    return x && *x >= 0 && static_cast<size_t>(*x) < n ? static_cast<int32_t>(*x) : -1;
  };
  v.bos = id("tokenizer.ggml.bos_token_id");
  v.eos = id("tokenizer.ggml.eos_token_id");
  v.unk = id("tokenizer.ggml.unknown_token_id");
  if (auto tmpl = file.GetString("tokenizer.chat_template")) v.chat_template = *tmpl;
  if (const GgufValue* add = file.Find("tokenizer.ggml.add_bos_token"); add && add->type == GgufType::kBool)
    v.add_bos = add->b;
  else
    v.add_bos = v.model == "llama";
  return v;
}

Vocab Vocab::FromLlama2c(const Llama2cTokenizer& tok) {
  Vocab v;
  v.model = "llama";
  v.scores = tok.scores;
  for (size_t i = 0; i < tok.pieces.size(); ++i) {
    std::string piece = tok.pieces[i];
    TokenType type = TokenType::kNormal;
    if (i == 0) {
      piece = "<unk>";
      type = TokenType::kUnknown;
    } else if (i == 1 || i == 2) {
      piece = i == 1 ? "<s>" : "</s>";  // stored as "\n<s>\n" and "\n</s>\n"
      type = TokenType::kControl;
    } else if (piece.size() == 6 && piece.rfind("<0x", 0) == 0 && piece[5] == '>') {
      type = TokenType::kByte;
    } else {
      std::string out;
      for (char ch : piece) {
        if (ch == ' ')
          out += kSpaceMark;
        else
          out.push_back(ch);
      }
      piece = out;
    }
    v.tokens.push_back(piece);
    v.types.push_back(static_cast<int32_t>(type));
  }
  v.unk = 0;
  v.bos = 1;
  v.eos = 2;
  v.add_bos = true;
  return v;
}

Result<Vocab> Vocab::FromTokenizerJson(const std::string& path) {
  PARALLM_ASSIGN_OR_RETURN(std::string text, ReadTextFile(path));
  PARALLM_ASSIGN_OR_RETURN(boost::json::value root, ParseJson(text, path));
  if (!root.is_object()) return Err("{}: not a JSON object", path);
  const boost::json::object& j = root.as_object();
  const boost::json::value* model = j.if_contains("model");
  if (model == nullptr || !model->is_object()) return Err("{}: no \"model\" object", path);
  const boost::json::object& m = model->as_object();
  const boost::json::value* type = m.if_contains("type");
  if (type == nullptr || !type->is_string() || type->as_string() != "BPE")
    return Err("{}: only BPE tokenizer models are supported", path);
  const boost::json::value* decoder = j.if_contains("decoder");
  const bool byte_level = decoder != nullptr && decoder->is_object() && decoder->as_object().contains("type") &&
                          decoder->as_object().at("type") == "ByteLevel";
  Vocab v;
  v.model = byte_level ? "gpt2" : "hf-sentencepiece";
  std::map<int64_t, std::pair<std::string, TokenType>> by_id;
  const boost::json::value* vocab = m.if_contains("vocab");
  if (vocab == nullptr || !vocab->is_object()) return Err("{}: model.vocab is missing", path);
  for (const auto& [piece, id] : vocab->as_object()) {
    if (!id.is_int64() || id.as_int64() < 0 || id.as_int64() > (1 << 24))
      return Err("{}: token '{}' has an invalid id", path, std::string(piece));
    by_id[id.as_int64()] = {std::string(piece), TokenType::kNormal};
  }
  if (const boost::json::value* added = j.if_contains("added_tokens"); added && added->is_array()) {
    for (const boost::json::value& t : added->as_array()) {
      if (!t.is_object() || !t.as_object().contains("id") || !t.as_object().contains("content")) continue;
      const auto& o = t.as_object();
      if (!o.at("id").is_int64() || !o.at("content").is_string()) continue;
      bool special = o.contains("special") && o.at("special").is_bool() && o.at("special").as_bool();
      by_id[o.at("id").as_int64()] = {std::string(o.at("content").as_string()),
                                      special ? TokenType::kControl : TokenType::kUserDefined};
    }
  }
  if (by_id.empty()) return Err("{}: empty vocabulary", path);
  const int64_t n = by_id.rbegin()->first + 1;
  for (int64_t id = 0; id < n; ++id) {
    auto it = by_id.find(id);
    v.tokens.push_back(it != by_id.end() ? it->second.first : "[PAD" + std::to_string(id) + "]");
    v.types.push_back(static_cast<int32_t>(it != by_id.end() ? it->second.second : TokenType::kUnused));
  }
  if (const boost::json::value* merges = m.if_contains("merges"); merges && merges->is_array()) {
    for (const boost::json::value& mg : merges->as_array()) {
      if (mg.is_string()) {
        v.merges.emplace_back(mg.as_string());
      } else if (mg.is_array() && mg.as_array().size() == 2 && mg.as_array()[0].is_string() &&
                 mg.as_array()[1].is_string()) {
        v.merges.push_back(std::string(mg.as_array()[0].as_string()) + " " + std::string(mg.as_array()[1].as_string()));
      } else {
        return Err("{}: a merge is neither \"a b\" nor [\"a\", \"b\"]", path);
      }
    }
  }
  // BOS/EOS come from tokenizer_config.json beside it: strings, or {"content": ...} objects.
  std::string config_path = (std::filesystem::path(path).parent_path() / "tokenizer_config.json").string();
  if (std::filesystem::exists(config_path)) {
    PARALLM_ASSIGN_OR_RETURN(std::string config_text, ReadTextFile(config_path));
    PARALLM_ASSIGN_OR_RETURN(boost::json::value config, ParseJson(config_text, config_path));
    if (config.is_object()) {
      auto find_id = [&](const char* key) -> int32_t {
        const boost::json::value* t = config.as_object().if_contains(key);
        if (t && t->is_object() && t->as_object().contains("content")) t = &t->as_object().at("content");
        if (t == nullptr || !t->is_string()) return -1;
        for (size_t i = 0; i < v.tokens.size(); ++i)
          if (v.tokens[i] == t->as_string()) return static_cast<int32_t>(i);
        return -1;
      };
      v.bos = find_id("bos_token");
      v.eos = find_id("eos_token");
      const boost::json::value* add = config.as_object().if_contains("add_bos_token");
      v.add_bos = add && add->is_bool() && add->as_bool() && v.bos >= 0;
      // chat_template: a string, or a list of {name, template} (the "default" one is kept).
      if (const boost::json::value* t = config.as_object().if_contains("chat_template")) {
        if (t->is_string()) {
          v.chat_template = std::string(t->as_string());
        } else if (t->is_array()) {
          for (const auto& entry : t->as_array())
            if (entry.is_object() && entry.as_object().contains("name") && entry.as_object().at("name") == "default" &&
                entry.as_object().contains("template") && entry.as_object().at("template").is_string())
              v.chat_template = std::string(entry.as_object().at("template").as_string());
        }
      }
    }
  }
  return v;
}

void Vocab::PadTo(int32_t n) {
  for (int32_t i = 0; size() < n; ++i) {
    tokens.push_back("<|extra_" + std::to_string(i) + "|>");
    types.push_back(static_cast<int32_t>(TokenType::kUnused));
    if (!scores.empty()) scores.push_back(0.0f);
  }
}

Vocab Vocab::ByteLevel(int32_t size) {
  Vocab v;
  v.model = "gpt2";
  std::vector<std::string> bytes = ByteToUnicode();
  for (int b = 0; b < 256; ++b) {
    v.tokens.push_back(bytes[static_cast<size_t>(b)]);
    v.types.push_back(static_cast<int32_t>(TokenType::kNormal));
  }
  v.bos = static_cast<int32_t>(v.tokens.size());
  v.tokens.push_back("<|bos|>");
  v.types.push_back(static_cast<int32_t>(TokenType::kControl));
  v.eos = static_cast<int32_t>(v.tokens.size());
  v.tokens.push_back("<|eos|>");
  v.types.push_back(static_cast<int32_t>(TokenType::kControl));
  v.PadTo(size);
  v.add_bos = false;
  return v;
}

void Vocab::WriteGguf(GgufWriter& writer) const {
  writer.Set("tokenizer.ggml.model", GgufValue::String(model));
  if (model == "gpt2") writer.Set("tokenizer.ggml.pre", GgufValue::String("default"));
  writer.Set("tokenizer.ggml.tokens", GgufValue::StringArray(tokens));
  if (!scores.empty()) writer.Set("tokenizer.ggml.scores", GgufValue::F32Array(scores));
  writer.Set("tokenizer.ggml.token_type", GgufValue::I32Array(types));
  if (model == "gpt2") writer.Set("tokenizer.ggml.merges", GgufValue::StringArray(merges));
  if (bos >= 0) writer.Set("tokenizer.ggml.bos_token_id", GgufValue::U32(static_cast<uint32_t>(bos)));
  if (eos >= 0) writer.Set("tokenizer.ggml.eos_token_id", GgufValue::U32(static_cast<uint32_t>(eos)));
  if (unk >= 0) writer.Set("tokenizer.ggml.unknown_token_id", GgufValue::U32(static_cast<uint32_t>(unk)));
  writer.Set("tokenizer.ggml.add_bos_token", GgufValue::Bool(add_bos));
  if (!chat_template.empty()) writer.Set("tokenizer.chat_template", GgufValue::String(chat_template));
}

std::string Vocab::Decode(std::span<const int32_t> ids) const {
  std::string out;
  static const std::vector<std::string> kBytes = ByteToUnicode();
  for (int32_t id : ids) {
    if (id < 0 || id >= size()) continue;
    const size_t i = static_cast<size_t>(id);
    const int32_t type = i < types.size() ? types[i] : static_cast<int32_t>(TokenType::kNormal);
    if (type == static_cast<int32_t>(TokenType::kControl) || type == static_cast<int32_t>(TokenType::kUnused)) continue;
    const std::string& piece = tokens[i];
    if (model != "gpt2") {  // SentencePiece pieces
      if (type == static_cast<int32_t>(TokenType::kByte) && piece.size() == 6) {
        int hi = HexNibble(piece[3]), lo = HexNibble(piece[4]);
        if (hi >= 0 && lo >= 0) {
          out.push_back(static_cast<char>(hi * 16 + lo));
          continue;
        }
      }
      for (size_t p = 0; p < piece.size();) {
        if (piece.compare(p, kSpaceMark.size(), kSpaceMark) == 0) {
          out.push_back(' ');
          p += kSpaceMark.size();
        } else {
          out.push_back(piece[p++]);
        }
      }
    } else {
      // Byte-level: each character of the piece stands for one byte.
      for (size_t p = 0; p < piece.size();) {
        size_t len = (static_cast<unsigned char>(piece[p]) >= 0xC0) ? 2 : 1;
        std::string ch = piece.substr(p, len);
        bool found = false;
        for (int b = 0; b < 256 && !found; ++b)
          if (kBytes[static_cast<size_t>(b)] == ch) {
            out.push_back(static_cast<char>(b));
            found = true;
          }
        if (!found) out += ch;  // special/user tokens keep their text
        p += len;
      }
    }
  }
  if (model != "gpt2" && !out.empty() && out[0] == ' ') out.erase(0, 1);
  return out;
}

}  // namespace parallm
