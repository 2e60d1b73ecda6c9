// Vocab: reading and writing tokenizer.ggml.* metadata, and decoding ids to text.
#include "tokenizer/vocab.h"

#include "formats/gguf.h"
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
  for (int32_t i = 0; static_cast<int32_t>(v.tokens.size()) < size; ++i) {
    v.tokens.push_back("<|extra_" + std::to_string(i) + "|>");
    v.types.push_back(static_cast<int32_t>(TokenType::kUserDefined));
  }
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
    if (model == "llama") {
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
  if (model == "llama" && !out.empty() && out[0] == ' ') out.erase(0, 1);
  return out;
}

}  // namespace parallm
