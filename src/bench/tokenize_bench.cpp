// The tokenizer encoding benchmark: English prose, long single pre-tokens at three sizes, and tokenizers.js.
#include "bench/tokenize_bench.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>

#include <fmt/format.h>

#include "bench/stats.h"
#include "util/splitmix64.h"

namespace parallm::bench {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// SplitMix64: a fixed sequence on every platform (std::mt19937's distributions are not portable).
struct Rng : SplitMix64 {
  // Skewed toward small indices, like word frequencies (the list below is roughly in frequency order).
  size_t Zipfish(size_t n) {
    const double u = static_cast<double>(Next() >> 11) / static_cast<double>(1ull << 53);
    return std::min(n - 1, static_cast<size_t>(u * u * static_cast<double>(n)));
  }
};

constexpr const char* kWords[] = {
    "the", "of", "and", "to", "a", "in", "is", "it", "that", "was", "for", "on", "are", "with", "as", "his",
    "they", "be", "at", "one", "have", "this", "from", "by", "hot", "word", "but", "what", "some", "we", "can",
    "out", "other", "were", "all", "there", "when", "up", "use", "your", "how", "said", "an", "each", "she",
    "which", "do", "their", "time", "if", "will", "way", "about", "many", "then", "them", "write", "would",
    "like", "so", "these", "her", "long", "make", "thing", "see", "him", "two", "has", "look", "more", "day",
    "could", "go", "come", "did", "number", "sound", "no", "most", "people", "my", "over", "know", "water",
    "than", "call", "first", "who", "may", "down", "side", "been", "now", "find", "any", "new", "work", "part",
    "take", "get", "place", "made", "live", "where", "after", "back", "little", "only", "round", "man", "year",
    "came", "show", "every", "good", "me", "give", "our", "under", "name", "very", "through", "just", "form",
    "sentence", "great", "think", "say", "help", "low", "line", "differ", "turn", "cause", "much", "mean",
    "before", "move", "right", "boy", "old", "too", "same", "tell", "does", "set", "three", "want", "air",
    "well", "also", "play", "small", "end", "put", "home", "read", "hand", "port", "large", "spell", "add",
    "even", "land", "here", "must", "big", "high", "such", "follow", "act", "why", "ask", "men", "change",
    "went", "light", "kind", "off", "need", "house", "picture", "try", "again", "animal", "point", "mother",
    "world", "near", "build", "self", "earth", "father", "head", "stand", "own", "page", "should", "country",
    "found", "answer", "school", "grow", "study", "still", "learn", "plant", "cover", "food", "sun", "four",
    "between", "state", "keep", "eye", "never", "last", "let", "thought", "city", "tree", "cross", "farm",
    "hard", "start", "might", "story", "saw", "far", "sea", "draw", "left", "late", "run", "while", "press",
    "close", "night", "real", "life", "few", "north", "remarkable", "unexpectedly", "infrastructure",
    "characteristically", "photosynthesis", "tokenization", "incomprehensible", "Mediterranean"};
constexpr const char* kNames[] = {"Alice", "Bob", "London", "Paris", "Tuesday", "March",
                                                "Dr. Smith", "Mr. Jones", "the Thames", "Europe", "Google",
                                                "Shakespeare"};
constexpr const char* kContractions[] = {"don't", "it's", "I'm", "we've", "they're", "can't",
                                                      "she'll", "wouldn't"};

std::string Sentence(Rng& rng) {
  std::string s;
  const size_t n = 4 + rng.Below(18);
  const bool quoted = rng.Below(12) == 0;
  if (quoted) s += '"';
  for (size_t i = 0; i < n; ++i) {
    if (i > 0) s += (i + 1 < n && rng.Below(9) == 0) ? ", " : " ";
    std::string w;
    switch (rng.Below(40)) {
      case 0: w = kNames[rng.Below(std::size(kNames))]; break;
      case 1: w = kContractions[rng.Below(std::size(kContractions))]; break;
      case 2: w = std::to_string(rng.Below(2) ? rng.Below(100) : 1000 + rng.Below(99000)); break;
      default: w = kWords[rng.Zipfish(std::size(kWords))];
    }
    if (i == 0 && w[0] >= 'a' && w[0] <= 'z') w[0] = static_cast<char>(w[0] - 'a' + 'A');
    s += w;
  }
  static constexpr const char* kEnds[] = {".", ".", ".", ".", "?", "!", ";", "..."};
  s += kEnds[rng.Below(std::size(kEnds))];
  if (quoted) s += '"';
  return s;
}

// Letters only: one pre-token as long as the text (no spaces, digits or punctuation to split at).
std::string LettersOnly(size_t bytes) {
  std::string out;
  for (size_t want = bytes + bytes / 2 + 64; out.size() < bytes; want *= 2) {
    out.clear();
    for (char c : EnglishText(want))
      if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) out += c;
  }
  out.resize(bytes);
  return out;
}

std::string Repeat(std::string_view unit, size_t times) {
  std::string out;
  out.reserve(unit.size() * times);
  for (size_t i = 0; i < times; ++i) out += unit;
  return out;
}

struct Timing {
  size_t tokens = 0;
  double cold_s = 0, warm_s = 0;
};

// One cold run on a fresh tokenizer (when the options can load one), then `repeats` (>= 1) warm runs; warm_s is
// the best of them (the machine may be shared; the best run is the least disturbed one).
Timing TimeEncode(const Tokenizer& given, const TokenizeBenchOptions& o, const std::string& text) {
  std::optional<Tokenizer> fresh;
  if (o.load_fresh) {
    auto loaded = o.load_fresh();
    if (loaded.ok()) fresh.emplace(std::move(loaded).value());
  }
  const Tokenizer& tok = fresh ? *fresh : given;
  Timing t;
  auto start = Clock::now();
  t.tokens = tok.Encode(text, false, false).size();
  t.cold_s = SecondsSince(start);
  t.warm_s = 1e30;
  for (int r = 0; r < o.repeats; ++r) {
    start = Clock::now();
    const size_t n = tok.Encode(text, false, false).size();
    t.warm_s = std::min(t.warm_s, SecondsSince(start));
    if (n != t.tokens) t.tokens = 0;  // cannot happen unless Encode is not deterministic; shows as 0 tokens
  }
  return t;
}

double MBps(size_t bytes, double seconds) { return static_cast<double>(bytes) / 1e6 / std::max(seconds, 1e-12); }

struct LongCase {
  const char* name;
  std::function<std::string(size_t scale)> make;
};

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string ReadAll(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Runs bench.mjs on `files` (name, text) and returns its JSON, or the reason it could not.
Result<boost::json::object> RunReference(const TokenizeBenchOptions& o,
                                         const std::vector<std::pair<std::string, const std::string*>>& files) {
  const fs::path script = o.reference_script;
  if (!fs::exists(script)) return Err("{}: no such file", o.reference_script);
  if (!fs::exists(script.parent_path() / "node_modules" / "@huggingface" / "tokenizers"))
    return Err("tokenizers.js is not installed; run: npm ci --prefix {}", script.parent_path().string());
  if (o.reference_tokenizer_json.empty() || !fs::is_regular_file(o.reference_tokenizer_json))
    return Err("the reference needs a tokenizer.json ({} is not one)", o.reference_tokenizer_json);
  std::error_code ec;
  const fs::path dir = fs::temp_directory_path(ec) / fmt::format("parallm-tokenize-bench-{}", getpid());
  fs::create_directories(dir, ec);
  if (ec) return Err("{}: {}", dir.string(), ec.message());
  std::string command = fmt::format("node {} --repeats {} {}", ShellQuote(script.string()), o.repeats,
                                    ShellQuote(o.reference_tokenizer_json));
  for (const auto& [name, text] : files) {
    const fs::path path = dir / (name + ".txt");
    std::ofstream(path, std::ios::binary) << *text;
    command += " " + ShellQuote(path.string());
  }
  command += " 2>" + ShellQuote((dir / "stderr.txt").string());
  std::string out;
  int status = -1;
  if (FILE* pipe = popen(command.c_str(), "r")) {
    std::array<char, 4096> buffer;
    for (size_t n; (n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0;) out.append(buffer.data(), n);
    status = pclose(pipe);
  }
  const std::string err = ReadAll(dir / "stderr.txt");
  fs::remove_all(dir, ec);
  if (status == -1) return Err("cannot run node");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127) return Err("node is not installed");
    return Err("node {} failed (status {}): {}", script.filename().string(), status, err.substr(0, 500));
  }
  boost::system::error_code jec;
  boost::json::value v = boost::json::parse(out, jec);
  if (jec || !v.is_object() || !v.as_object().contains("files"))
    return Err("cannot read the reference's output: {}", out.substr(0, 200));
  return v.as_object();
}

double Number(const boost::json::object& o, const char* key) {
  const boost::json::value* v = o.if_contains(key);
  if (v == nullptr) return 0;
  if (v->is_double()) return v->as_double();
  if (v->is_int64()) return static_cast<double>(v->as_int64());
  if (v->is_uint64()) return static_cast<double>(v->as_uint64());
  return 0;
}

}  // namespace

std::string EnglishText(size_t bytes) {
  Rng rng{20240917};
  std::string text;
  text.reserve(bytes + 256);
  while (text.size() < bytes) {
    const size_t sentences = 2 + rng.Below(7);
    for (size_t i = 0; i < sentences && text.size() < bytes; ++i) {
      if (i > 0) text += ' ';
      text += Sentence(rng);
    }
    text += "\n\n";
  }
  text.resize(bytes);
  return text;
}

boost::json::object RunTokenizeBenchmark(const Tokenizer& tokenizer, const std::string& text, int repeats) {
  TokenizeBenchOptions o;
  o.repeats = repeats;
  return RunTokenizeBenchmark(tokenizer, text, o);
}

boost::json::object RunTokenizeBenchmark(const Tokenizer& tokenizer, const std::string& text,
                                         const TokenizeBenchOptions& options) {
  TokenizeBenchOptions o = options;
  o.repeats = std::max(o.repeats, 1);
  std::printf("tokenize: Encode (no special tokens), vocab %d, %s; warm = best of %d run(s)\n", tokenizer.size(),
              o.load_fresh ? "cold = first run on a freshly loaded tokenizer" : "cold = first run on this text",
              o.repeats);
  std::printf("%-24s %10s %9s %10s %10s %10s %10s %12s %7s\n", "case", "bytes", "tokens", "cold ms", "warm ms",
              "cold MB/s", "warm MB/s", "warm tok/s", "ratio");

  const Timing en = TimeEncode(tokenizer, o, text);
  std::printf("%-24s %10zu %9zu %10.1f %10.1f %10.2f %10.2f %12.0f %7s\n", "english", text.size(), en.tokens,
              en.cold_s * 1e3, en.warm_s * 1e3, MBps(text.size(), en.cold_s), MBps(text.size(), en.warm_s),
              static_cast<double>(en.tokens) / en.warm_s, "");
  boost::json::object english{{"bytes", text.size()},
                              {"tokens", en.tokens},
                              {"cold_s", en.cold_s},
                              {"warm_s", en.warm_s},
                              {"cold_mb_per_s", MBps(text.size(), en.cold_s)},
                              {"warm_mb_per_s", MBps(text.size(), en.warm_s)},
                              {"cold_tokens_per_s", static_cast<double>(en.tokens) / en.cold_s},
                              {"warm_tokens_per_s", static_cast<double>(en.tokens) / en.warm_s}};

  // Long single pre-tokens: BPE merges within one word, so a quadratic merge loop would show up as a time
  // ratio of 4 and 16 at 2x and 4x instead of 2 and 4.
  const std::vector<LongCase> cases = {
      {"no-spaces", [&](size_t k) { return LettersOnly(o.no_space_bytes * k); }},
      {"repeated-a", [&](size_t k) { return Repeat("a", o.repeat_chars * k); }},
      {"repeated-emoji", [&](size_t k) { return Repeat("\xF0\x9F\x99\x82", o.repeat_chars * k); }},  // U+1F642
  };
  boost::json::array long_inputs;
  std::vector<std::string> long_1x;
  std::vector<Timing> long_1x_timing;
  for (const LongCase& c : cases) {
    boost::json::array rows;
    double base = 0;
    for (size_t scale : {1, 2, 4}) {
      const std::string input = c.make(scale);
      const Timing t = TimeEncode(tokenizer, o, input);
      if (scale == 1) {
        base = t.warm_s;
        long_1x.push_back(input);
        long_1x_timing.push_back(t);
      }
      const double ratio = t.warm_s / std::max(base, 1e-12);
      const std::string label = fmt::format("{} {}x", c.name, scale);
      std::printf("%-24s %10zu %9zu %10.1f %10.1f %10.2f %10.2f %12.0f %7.2f\n", label.c_str(), input.size(),
                  t.tokens, t.cold_s * 1e3, t.warm_s * 1e3, MBps(input.size(), t.cold_s),
                  MBps(input.size(), t.warm_s), static_cast<double>(t.tokens) / t.warm_s, ratio);
      std::fflush(stdout);
      rows.push_back({{"scale", scale},
                      {"bytes", input.size()},
                      {"tokens", t.tokens},
                      {"cold_s", t.cold_s},
                      {"warm_s", t.warm_s},
                      {"mb_per_s", MBps(input.size(), t.warm_s)},
                      {"time_ratio", ratio}});
    }
    long_inputs.push_back({{"name", c.name}, {"unit_bytes", c.make(1).size()}, {"rows", std::move(rows)}});
  }

  boost::json::object report{{"benchmark", "tokenize"},
                             {"tokenizer_vocab", tokenizer.size()},
                             {"repeats", o.repeats},
                             {"english", english},
                             {"long_inputs", std::move(long_inputs)}};
  std::fflush(stdout);
  if (o.reference_script.empty()) return report;

  std::vector<std::pair<std::string, const std::string*>> files = {{"english", &text}};
  if (o.reference_long)
    for (size_t i = 0; i < cases.size(); ++i) files.emplace_back(cases[i].name, &long_1x[i]);
  std::printf("reference: node %s on the same text%s...\n", o.reference_script.c_str(),
              o.reference_long ? " and the 1x long inputs" : "");
  std::fflush(stdout);
  auto ref = RunReference(o, files);
  if (!ref.ok()) {
    std::printf("reference unavailable: %s\n", ref.status().message().c_str());
    report["reference"] = {{"available", false}, {"reason", ref.status().message()}};
    return report;
  }
  const boost::json::array& ref_files = ref->at("files").as_array();
  if (ref_files.size() != files.size()) {
    report["reference"] = {{"available", false}, {"reason", "the reference reported a different number of files"}};
    return report;
  }
  auto row = [](const boost::json::object& f) {
    return std::pair{static_cast<size_t>(Number(f, "tokens")),
                     std::pair{Number(f, "cold_ms") / 1e3, Number(f, "warm_ms") / 1e3}};
  };
  const auto [ref_tokens, ref_times] = row(ref_files[0].as_object());
  const auto [ref_cold, ref_warm] = ref_times;
  const std::string version = ref->contains("version") ? std::string(ref->at("version").as_string()) : "?";
  const std::string node = ref->contains("node") ? std::string(ref->at("node").as_string()) : "?";
  std::printf("%-24s %10zu %9zu %10.1f %10.1f %10.2f %10.2f %12.0f   (tokenizers.js %s, node %s)\n",
              "english (ref)", text.size(), ref_tokens, ref_cold * 1e3, ref_warm * 1e3, MBps(text.size(), ref_cold),
              MBps(text.size(), ref_warm), static_cast<double>(ref_tokens) / ref_warm, version.c_str(), node.c_str());
  boost::json::array ref_long;
  for (size_t i = 1; i < files.size(); ++i) {
    const auto [tokens, times] = row(ref_files[i].as_object());
    const Timing& mine = long_1x_timing[i - 1];
    const std::string label = std::string(cases[i - 1].name) + " 1x (ref)";
    std::printf("%-24s %10zu %9zu %10.1f %10.1f %10.2f %10.2f %12.0f   parallm %.1fx faster\n", label.c_str(),
                files[i].second->size(), tokens, times.first * 1e3, times.second * 1e3,
                MBps(files[i].second->size(), times.first), MBps(files[i].second->size(), times.second),
                static_cast<double>(tokens) / times.second, times.second / mine.warm_s);
    ref_long.push_back({{"name", cases[i - 1].name},
                        {"bytes", files[i].second->size()},
                        {"tokens", tokens},
                        {"cold_s", times.first},
                        {"warm_s", times.second},
                        {"speedup", times.second / mine.warm_s},
                        {"tokens_match", tokens == mine.tokens}});
  }
  const double cold_speedup = ref_cold / en.cold_s, warm_speedup = ref_warm / en.warm_s;
  std::printf("speedup on English: %.1fx cold, %.1fx warm (parallm MB/s over tokenizers.js MB/s)%s\n", cold_speedup,
              warm_speedup, ref_tokens == en.tokens ? "" : "; TOKEN COUNTS DIFFER");
  report["reference"] = {{"available", true},
                         {"version", version},
                         {"node", node},
                         {"english",
                          {{"bytes", text.size()},
                           {"tokens", ref_tokens},
                           {"cold_s", ref_cold},
                           {"warm_s", ref_warm},
                           {"cold_mb_per_s", MBps(text.size(), ref_cold)},
                           {"warm_mb_per_s", MBps(text.size(), ref_warm)},
                           {"tokens_match", ref_tokens == en.tokens}}},
                         {"long_inputs", std::move(ref_long)}};
  report["speedup"] = {{"cold", cold_speedup}, {"warm", warm_speedup}};
  std::fflush(stdout);
  return report;
}

}  // namespace parallm::bench
