// The decoder kinds and their construction from tokenizer.json.
#include "tokenizer/decoder.h"

#include "tokenizer/byte_level.h"
#include "tokenizer/json_util.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"

namespace parallm {
namespace {

constexpr std::string_view kMetaspace = "\xE2\x96\x81";

class ByteLevelDecoder : public Decoder {
 public:
  explicit ByteLevelDecoder(std::unordered_set<std::string> added) : added_(std::move(added)) {}
  void DecodeChain(std::vector<std::string>& pieces) const override {
    std::vector<std::string> out;
    std::string bytes;
    bool pending = false;
    auto flush = [&] {
      if (pending) out.push_back(unicode::ToValidUtf8(bytes));
      bytes.clear();
      pending = false;
    };
    for (std::string& p : pieces) {
      if (added_.count(p)) {
        flush();
        out.push_back(std::move(p));
        continue;
      }
      pending = true;
      for (size_t i = 0; i < p.size();) {
        const int b = CodePointToByte(unicode::DecodeAt(p, i));
        bytes.push_back(static_cast<char>(b < 0 ? 0 : b));  // tokenizers.js: a character outside the map -> 0
      }
    }
    flush();
    pieces = std::move(out);
  }

 private:
  std::unordered_set<std::string> added_;
};

class MetaspaceDecoder : public Decoder {
 public:
  explicit MetaspaceDecoder(std::string replacement) : replacement_(std::move(replacement)) {}
  void DecodeChain(std::vector<std::string>& pieces) const override {
    const Regex r = Regex::Literal(replacement_);
    for (size_t i = 0; i < pieces.size(); ++i) {
      pieces[i] = r.ReplaceAll(pieces[i], " ");
      if (i == 0 && !pieces[i].empty() && pieces[i][0] == ' ') pieces[i].erase(0, 1);
    }
  }

 private:
  std::string replacement_;
};

class ReplaceDecoder : public Decoder {
 public:
  ReplaceDecoder(Regex pattern, std::string content) : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void DecodeChain(std::vector<std::string>& pieces) const override {
    for (std::string& p : pieces) p = pattern_.ReplaceAll(p, content_);
  }

 private:
  Regex pattern_;
  std::string content_;
};

int ParseByteToken(const std::string& p) {
  if (p.size() != 6 || p.compare(0, 3, "<0x") != 0 || p[5] != '>') return -1;
  auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  const int hi = hex(p[3]), lo = hex(p[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

class ByteFallbackDecoder : public Decoder {
 public:
  void DecodeChain(std::vector<std::string>& pieces) const override {
    std::vector<std::string> out;
    std::string bytes;
    auto flush = [&] {
      if (bytes.empty()) return;
      std::string text = unicode::ToValidUtf8(bytes);
      // TextDecoder's default BOM handling drops a leading U+FEFF of each decoded run.
      if (text.compare(0, 3, "\xEF\xBB\xBF") == 0) text.erase(0, 3);
      out.push_back(std::move(text));
      bytes.clear();
    };
    for (std::string& p : pieces) {
      const int b = ParseByteToken(p);
      if (b >= 0) {
        bytes.push_back(static_cast<char>(b));
      } else {
        flush();
        out.push_back(std::move(p));
      }
    }
    flush();
    pieces = std::move(out);
  }
};

class FuseDecoder : public Decoder {
 public:
  void DecodeChain(std::vector<std::string>& pieces) const override {
    std::string all;
    for (const std::string& p : pieces) all += p;
    pieces.assign(1, std::move(all));
  }
};

class StripDecoder : public Decoder {
 public:
  StripDecoder(std::string content, size_t start, size_t stop) : content_(std::move(content)), start_(start), stop_(stop) {}
  void DecodeChain(std::vector<std::string>& pieces) const override {
    if (content_.empty()) return;
    for (std::string& p : pieces) {
      size_t b = 0, e = p.size();
      for (size_t i = 0; i < start_ && p.compare(b, content_.size(), content_) == 0; ++i) b += content_.size();
      for (size_t i = 0; i < stop_ && e >= b + content_.size() && p.compare(e - content_.size(), content_.size(), content_) == 0; ++i)
        e -= content_.size();
      p = p.substr(b, e - b);
    }
  }

 private:
  std::string content_;
  size_t start_, stop_;
};

class SequenceDecoder : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> parts) : parts_(std::move(parts)) {}
  void DecodeChain(std::vector<std::string>& pieces) const override {
    for (const auto& d : parts_) d->DecodeChain(pieces);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> parts_;
};

size_t Size(const boost::json::object& o, const char* key) {
  const boost::json::value* v = o.if_contains(key);
  return v != nullptr && v->is_int64() && v->as_int64() > 0 ? static_cast<size_t>(v->as_int64()) : 0;
}

}  // namespace

Result<std::unique_ptr<Decoder>> Decoder::FromJson(const boost::json::value& json,
                                                   const std::unordered_set<std::string>& added_contents) {
  if (json.is_null()) return std::unique_ptr<Decoder>();
  if (!json.is_object()) return Err("decoder is not an object");
  const boost::json::object& o = json.as_object();
  const std::string type = json_util::String(o, "type");
  if (type == "ByteLevel") return ByteLevel(added_contents);
  if (type == "Metaspace")
    return std::unique_ptr<Decoder>(new MetaspaceDecoder(json_util::String(o, "replacement", std::string(kMetaspace))));
  if (type == "Replace") {
    PARALLM_ASSIGN_OR_RETURN(Regex pattern, json_util::Pattern(o));
    return std::unique_ptr<Decoder>(new ReplaceDecoder(std::move(pattern), json_util::String(o, "content")));
  }
  if (type == "ByteFallback") return std::unique_ptr<Decoder>(new ByteFallbackDecoder());
  if (type == "Fuse") return std::unique_ptr<Decoder>(new FuseDecoder());
  if (type == "Strip")
    return std::unique_ptr<Decoder>(new StripDecoder(json_util::String(o, "content", " "), Size(o, "start"), Size(o, "stop")));
  if (type == "Sequence") {
    const boost::json::value* list = o.if_contains("decoders");
    if (list == nullptr || !list->is_array()) return Err("Sequence decoder without \"decoders\"");
    std::vector<std::unique_ptr<Decoder>> parts;
    for (const boost::json::value& v : list->as_array()) {
      PARALLM_ASSIGN_OR_RETURN(std::unique_ptr<Decoder> d, FromJson(v, added_contents));
      if (d) parts.push_back(std::move(d));
    }
    return std::unique_ptr<Decoder>(new SequenceDecoder(std::move(parts)));
  }
  return Err("unsupported decoder type '{}'", type);
}

std::unique_ptr<Decoder> Decoder::ByteLevel(const std::unordered_set<std::string>& added_contents) {
  return std::make_unique<ByteLevelDecoder>(added_contents);
}

std::unique_ptr<Decoder> Decoder::SentencePiece() {
  std::vector<std::unique_ptr<Decoder>> parts;
  parts.emplace_back(new ReplaceDecoder(Regex::Literal(kMetaspace), " "));
  parts.emplace_back(new ByteFallbackDecoder());
  parts.emplace_back(new FuseDecoder());
  parts.emplace_back(new StripDecoder(" ", 1, 0));
  return std::make_unique<SequenceDecoder>(std::move(parts));
}

std::string CleanUpTokenization(std::string text) {
  static const std::pair<const char*, const char*> kRules[] = {
      {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"},
      {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (const auto& [from, to] : kRules) text = Regex::Literal(from).ReplaceAll(text, to);
  return text;
}

}  // namespace parallm
