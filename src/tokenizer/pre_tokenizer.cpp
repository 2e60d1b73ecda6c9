// The pre-tokenizer kinds, their construction from tokenizer.json, and llama.cpp's GGUF regex sets.
#include "tokenizer/pre_tokenizer.h"

#include "tokenizer/byte_level.h"
#include "tokenizer/json_util.h"
#include "tokenizer/unicode.h"

namespace parallm {

std::vector<std::string> SplitText(const std::string& text, const Regex& pattern, SplitBehavior behavior,
                                   bool invert) {
  // Pieces in order, each flagged as a match of the (possibly inverted) pattern.
  std::vector<std::pair<std::string_view, bool>> pieces;
  const std::string_view s = text;
  size_t prev = 0;
  for (const auto& [b, e] : pattern.FindAll(s)) {
    if (b > prev) pieces.emplace_back(s.substr(prev, b - prev), invert);
    pieces.emplace_back(s.substr(b, e - b), !invert);
    prev = e;
  }
  if (prev < s.size()) pieces.emplace_back(s.substr(prev), invert);

  std::vector<std::string> out;
  switch (behavior) {
    case SplitBehavior::kRemoved:
      for (const auto& [p, m] : pieces)
        if (!m) out.emplace_back(p);
      break;
    case SplitBehavior::kIsolated:
      for (const auto& [p, m] : pieces) out.emplace_back(p);
      break;
    case SplitBehavior::kMergedWithPrevious: {
      bool prev_was_match = false;  // a match joins the piece before it
      for (const auto& [p, m] : pieces) {
        if (m && !out.empty() && !prev_was_match)
          out.back() += p;
        else
          out.emplace_back(p);
        prev_was_match = m;
      }
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      bool pending = false;  // the last piece is a match waiting for the piece after it
      for (const auto& [p, m] : pieces) {
        if (pending && !m)
          out.back() += p;
        else
          out.emplace_back(p);
        pending = m;
      }
      break;
    }
    case SplitBehavior::kContiguous: {
      bool prev_match = false;
      for (const auto& [p, m] : pieces) {
        if (m && prev_match && !out.empty())
          out.back() += p;
        else
          out.emplace_back(p);
        prev_match = m;
      }
      break;
    }
  }
  return out;
}

namespace {

class Split : public PreTokenizer {
 public:
  Split(Regex pattern, SplitBehavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}
  void PreTokenize(std::vector<std::string>& words, size_t) const override {
    std::vector<std::string> out;
    for (const std::string& w : words)
      for (std::string& piece : SplitText(w, pattern_, behavior_, invert_)) out.push_back(std::move(piece));
    words = std::move(out);
  }

 private:
  Regex pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

// GPT-2's split pattern as tokenizers.js writes it: JavaScript's \s (White_Space without U+0085, plus U+FEFF).
constexpr const char* kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

std::string JsWhiteSpacePattern(const char* pattern) {
  const std::string js_space =
      "\\t\\n\\x0B\\f\\r\\x20\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}\\x{FEFF}";
  std::string out;
  for (const char* p = pattern; *p; ++p) {
    if (p[0] == '\\' && (p[1] == 's' || p[1] == 'S')) {
      // Inside a class (after '[' or '^' of "[^") the set is spliced in; outside it becomes a class.
      const bool in_class = !out.empty() && (out.back() == '^' || out.back() == '[');
      if (in_class)
        out += js_space;
      else
        out += (p[1] == 's' ? "[" : "[^") + js_space + "]";
      ++p;
    } else {
      out.push_back(*p);
    }
  }
  return out;
}

class ByteLevel : public PreTokenizer {
 public:
  ByteLevel(bool add_prefix_space, bool use_regex) : add_prefix_space_(add_prefix_space) {
    if (use_regex) {
      auto r = Regex::Compile(JsWhiteSpacePattern(kGpt2Pattern));
      if (r.ok()) regex_ = std::make_unique<Regex>(std::move(r).value());
    }
  }
  void PreTokenize(std::vector<std::string>& words, size_t) const override {
    std::vector<std::string> out;
    for (std::string& w : words) {
      if (add_prefix_space_ && (w.empty() || w[0] != ' ')) w.insert(w.begin(), ' ');
      if (regex_) {
        for (const auto& [b, e] : regex_->FindAll(w)) out.push_back(ByteLevelEncode(std::string_view(w).substr(b, e - b)));
      } else {
        out.push_back(ByteLevelEncode(w));
      }
    }
    words = std::move(out);
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<Regex> regex_;
};

constexpr std::string_view kMetaspace = "\xE2\x96\x81";

class Metaspace : public PreTokenizer {
 public:
  Metaspace(std::string replacement, std::string prepend_scheme, bool split)
      : replacement_(std::move(replacement)), prepend_scheme_(std::move(prepend_scheme)), split_(split) {}
  void PreTokenize(std::vector<std::string>& words, size_t section_index) const override {
    std::vector<std::string> out;
    const Regex space = Regex::Literal(" ");
    for (const std::string& w : words) {
      std::string s = space.ReplaceAll(w, replacement_);
      const bool prepend = prepend_scheme_ == "always" || (prepend_scheme_ == "first" && section_index == 0);
      if (prepend && s.compare(0, replacement_.size(), replacement_) != 0) s = replacement_ + s;
      if (split_) {
        for (std::string& piece : SplitText(s, Regex::Literal(replacement_), SplitBehavior::kMergedWithNext, false))
          out.push_back(std::move(piece));
      } else {
        out.push_back(std::move(s));
      }
    }
    words = std::move(out);
  }

 private:
  std::string replacement_, prepend_scheme_;
  bool split_;
};

class RegexSplit : public PreTokenizer {
 public:
  RegexSplit(Regex regex, SplitBehavior behavior) : regex_(std::move(regex)), behavior_(behavior) {}
  void PreTokenize(std::vector<std::string>& words, size_t) const override {
    std::vector<std::string> out;
    for (const std::string& w : words)
      for (std::string& piece : SplitText(w, regex_, behavior_, false)) out.push_back(std::move(piece));
    words = std::move(out);
  }

 private:
  Regex regex_;
  SplitBehavior behavior_;
};

class SequencePreTokenizer : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> parts) : parts_(std::move(parts)) {}
  void PreTokenize(std::vector<std::string>& words, size_t section_index) const override {
    for (const auto& p : parts_) p->PreTokenize(words, section_index);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

Result<SplitBehavior> ParseBehavior(const std::string& name) {
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (name == "Contiguous") return SplitBehavior::kContiguous;
  return Err("unknown split behavior '{}'", name);
}

std::unique_ptr<PreTokenizer> MakeRegexSplit(const char* pcre2, SplitBehavior behavior) {
  auto r = Regex::Compile(pcre2);
  if (!r.ok()) {
    fmt::print(stderr, "internal error: built-in regex does not compile: {}\n", r.status().message());
    std::abort();
  }
  return std::make_unique<RegexSplit>(std::move(r).value(), behavior);
}

}  // namespace

Result<std::unique_ptr<PreTokenizer>> PreTokenizer::FromJson(const boost::json::value& json) {
  if (json.is_null()) return std::unique_ptr<PreTokenizer>();
  if (!json.is_object()) return Err("pre_tokenizer is not an object");
  const boost::json::object& o = json.as_object();
  const std::string type = json_util::String(o, "type");
  if (type == "Split") {
    PARALLM_ASSIGN_OR_RETURN(Regex pattern, json_util::Pattern(o));
    PARALLM_ASSIGN_OR_RETURN(SplitBehavior behavior, ParseBehavior(json_util::String(o, "behavior", "Isolated")));
    return std::unique_ptr<PreTokenizer>(new Split(std::move(pattern), behavior, json_util::Bool(o, "invert", false)));
  }
  if (type == "ByteLevel")
    return std::unique_ptr<PreTokenizer>(
        new ByteLevel(json_util::Bool(o, "add_prefix_space", true), json_util::Bool(o, "use_regex", true)));
  if (type == "Metaspace") {
    std::string scheme = json_util::String(o, "prepend_scheme", "");
    if (scheme.empty()) scheme = json_util::Bool(o, "add_prefix_space", true) ? "always" : "never";
    return std::unique_ptr<PreTokenizer>(
        new Metaspace(json_util::String(o, "replacement", std::string(kMetaspace)), scheme, json_util::Bool(o, "split", true)));
  }
  if (type == "Digits") {
    const bool individual = json_util::Bool(o, "individual_digits", false);
    return std::unique_ptr<PreTokenizer>(
        MakeRegexSplit("\\p{N}", individual ? SplitBehavior::kIsolated : SplitBehavior::kContiguous));
  }
  if (type == "Whitespace")
    return std::unique_ptr<PreTokenizer>(MakeRegexSplit(
        "[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}]+|[^\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{White_Space}]+",
        SplitBehavior::kIsolated));
  if (type == "WhitespaceSplit")
    return std::unique_ptr<PreTokenizer>(MakeRegexSplit("\\p{White_Space}+", SplitBehavior::kRemoved));
  if (type == "Sequence") {
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    const boost::json::value* list = o.if_contains("pretokenizers");
    if (list == nullptr || !list->is_array()) return Err("Sequence pre_tokenizer without \"pretokenizers\"");
    for (const boost::json::value& v : list->as_array()) {
      PARALLM_ASSIGN_OR_RETURN(std::unique_ptr<PreTokenizer> p, FromJson(v));
      if (p) parts.push_back(std::move(p));
    }
    return std::unique_ptr<PreTokenizer>(new SequencePreTokenizer(std::move(parts)));
  }
  return Err("unsupported pre_tokenizer type '{}'", type);
}

std::unique_ptr<PreTokenizer> PreTokenizer::ByteLevelOnly() {
  return std::make_unique<ByteLevel>(false, false);
}

Result<std::unique_ptr<PreTokenizer>> PreTokenizer::ForGgufPre(const std::string& pre) {
  // The regex sets of llama.cpp (llama-vocab.cpp, llm_tokenizer_bpe), in PCRE2 syntax; \s is White_Space.
  // llama.cpp's GPT-2 regex lacks the final "|\\s+"; the text it leaves unmatched is kept as its own piece
  // by the split, exactly what "|\\s+" matches, so tokenizers.js's ByteLevel pattern (kGpt2Pattern) is used.
  constexpr const char* kGpt2 = kGpt2Pattern;
  constexpr const char* kLlama3 =
      "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
      "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
  constexpr const char* kQwen2 =
      "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
      "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
  std::vector<const char*> regexes;
  if (pre == "default") {
    regexes = {"[\\p{P}\\$\\+<=>\\^~\\|]+", kGpt2, "\\p{N}+", "[0-9][0-9][0-9]"};
  } else if (pre == "gpt-2" || pre == "mpt" || pre == "olmo" || pre == "jais" || pre == "trillion") {
    regexes = {kGpt2};
  } else if (pre == "llama-bpe" || pre == "llama3" || pre == "smaug-bpe" || pre == "dbrx" || pre == "chatglm-bpe") {
    regexes = {kLlama3};
  } else if (pre == "qwen2" || pre == "stablelm2" || pre == "hunyuan" || pre == "deepseek-r1-qwen") {
    regexes = {kQwen2};
  } else if (pre == "deepseek-llm") {
    regexes = {
        "[\\r\\n]",
        "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-\\x{1F7D}ᾀ-ᾴᾶ-ᾼ\\x{1FBE}ῂ-ῄῆ-ῌῐ-\\x{1FD3}ῖ-\\x{1FDB}ῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤ\\x{2126}ℨ\\x{212A}-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+",
        "\\s?[!-/:-~！-／：-～‘-‟　-。]+",
        "\\s+$",
        "[一-龥ࠀ-一가-퟿]+",
        "\\p{N}+",
    };
  } else if (pre == "deepseek-coder") {
    regexes = {"[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", "[一-龥ࠀ-一가-퟿]+", "\\p{N}"};
  } else if (pre == "falcon") {
    regexes = {"[\\p{P}\\$\\+<=>\\^~\\|`]+", kGpt2, "[0-9][0-9][0-9]"};
  } else if (pre == "starcoder" || pre == "refact" || pre == "command-r" || pre == "smollm" ||
             pre == "codeshell" || pre == "exaone" || pre == "minerva-7b") {
    regexes = {"\\p{N}", kGpt2};
  } else {
    return Err("unsupported tokenizer.ggml.pre '{}' (supported: default, gpt-2, llama-bpe, qwen2, deepseek-llm, "
               "deepseek-coder, falcon, starcoder and their llama.cpp aliases)", pre);
  }
  std::vector<std::unique_ptr<PreTokenizer>> parts;
  for (const char* r : regexes) {
    // GPT-2's pattern is read as tokenizers.js's ByteLevel reads it (JavaScript \s, which counts U+FEFF and
    // not U+0085), so a GGUF GPT-2 vocabulary encodes like its tokenizer.json; the others take \s as
    // White_Space, as tokenizers.js's Split patterns do.
    auto regex = r == kGpt2 ? Regex::Compile(JsWhiteSpacePattern(kGpt2Pattern)) : Regex::FromOniguruma(r);
    if (!regex.ok()) return regex.status();
    parts.push_back(std::make_unique<RegexSplit>(std::move(regex).value(), SplitBehavior::kIsolated));
  }
  parts.push_back(ByteLevelOnly());
  return std::unique_ptr<PreTokenizer>(new SequencePreTokenizer(std::move(parts)));
}

}  // namespace parallm
