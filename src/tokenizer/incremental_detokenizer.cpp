// IncrementalDetokenizer: decode a bounded window per token, release the part of its text that is final.
#include "tokenizer/incremental_detokenizer.h"

#include <algorithm>
#include <string_view>

#include "util/check.h"

namespace parallm {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// transformers' clean_up_tokenization patterns (" .", " n't", " 's", " ' ", ...) are a space followed by these
// characters. Clean-up is not monotone in the text: one rule's output feeds the next ("  ' s" -> " 's" ->
// "'s"), and an earlier rule can take a later rule's match away when text is added (" ' " -> "'", but " ' ."
// -> " '.", the space before the quote is back). So the final text ends before the earliest space or quote
// in the last kCleanUpReach bytes that only pattern characters follow; no change reaches past a character
// outside the patterns.
constexpr std::string_view kCleanUpChars = " .?!,'ntmsver";
constexpr size_t kCleanUpReach = 8;

// Bytes of the emitted text that a shorter window must reproduce before new text, so that its start (the
// decoder's start-of-text rules, a split character, clean-up at its edge) lies in text that is already out.
size_t SlideMargin(bool clean_up) { return clean_up ? kCleanUpReach : 1; }

}  // namespace

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tokenizer, std::span<const int32_t> prompt,
                                               bool skip_special)
    : tokenizer_(tokenizer), skip_special_(skip_special), clean_up_(tokenizer.clean_up_tokenization_spaces()) {
  // The prompt's last visible tokens (what Decode does not drop) become the context, extended while they have
  // no text at all (so that the start-of-text rules do not apply mid-text). Bounded: 256 ids at most are read.
  auto visible = [&](int32_t id) {
    return id >= 0 && id < tokenizer_.size() && !(skip_special_ && tokenizer_.IsSpecial(id));
  };
  std::vector<int32_t> reversed;
  size_t want = kContextTokens;
  size_t i = prompt.size();
  const size_t stop = prompt.size() > 256 ? prompt.size() - 256 : 0;
  while (true) {
    while (i > stop && reversed.size() < want) {
      const int32_t id = prompt[--i];
      if (visible(id)) reversed.push_back(id);
    }
    window_.assign(reversed.rbegin(), reversed.rend());
    text_ = DecodeWindow(window_);
    if (!text_.empty() || i == stop || want >= 4 * kContextTokens) break;
    want *= 2;
  }
  emitted_ = text_.size();
  next_slide_ = std::max(next_slide_, window_.size() + kContextTokens);
}

std::string IncrementalDetokenizer::DecodeWindow(std::span<const int32_t> ids) const {
  return tokenizer_.Decode(ids, skip_special_);
}

size_t IncrementalDetokenizer::FinalEnd(const std::string& text) const {
  size_t end = text.size();
  while (end >= kReplacement.size() && std::string_view(text).substr(end - kReplacement.size()) == kReplacement)
    end -= kReplacement.size();
  if (clean_up_) {
    const std::string_view s = std::string_view(text).substr(0, end);
    const size_t from = end > kCleanUpReach ? end - kCleanUpReach : 0;
    for (size_t i = from; i < end; ++i) {
      if ((s[i] == ' ' || s[i] == '\'') && s.find_first_not_of(kCleanUpChars, i) == std::string_view::npos) return i;
    }
  }
  return end;
}

std::string IncrementalDetokenizer::Add(int32_t id) {
  PARALLM_CHECK_MSG(!flushed_, "IncrementalDetokenizer::Add after Flush");
  if (id < 0 || id >= tokenizer_.size() || (skip_special_ && tokenizer_.IsSpecial(id))) return {};
  window_.push_back(id);
  std::string text = DecodeWindow(window_);
  // What was emitted stays; only the prompt's own tail can change (a character its last byte token began, a
  // space clean-up removes). Then the new text starts where the two agree, at a character boundary.
  if (text.compare(0, emitted_, text_, 0, emitted_) != 0) {
    size_t same = 0;
    while (same < emitted_ && same < text.size() && text[same] == text_[same]) ++same;
    while (same > 0 && same < text.size() && (static_cast<unsigned char>(text[same]) & 0xC0) == 0x80) --same;
    emitted_ = same;
  }
  text_ = std::move(text);
  std::string out;
  const size_t end = FinalEnd(text_);
  if (end > emitted_) {
    out = text_.substr(emitted_, end - emitted_);
    emitted_ = end;
  }
  MaybeSlide();
  return out;
}

std::string IncrementalDetokenizer::Flush() {
  PARALLM_CHECK_MSG(!flushed_, "IncrementalDetokenizer::Flush twice");
  flushed_ = true;
  std::string out = text_.substr(emitted_);
  emitted_ = text_.size();
  return out;
}

void IncrementalDetokenizer::MaybeSlide() {
  if (window_.size() < next_slide_) return;
  // A shorter window must end with the same pending text and the `margin` emitted bytes before it.
  const size_t margin = SlideMargin(clean_up_);
  const size_t pending = text_.size() - emitted_;
  if (emitted_ >= margin) {
    const size_t must = pending + margin;
    for (size_t keep = kContextTokens; keep < window_.size(); keep *= 2) {
      const std::span<const int32_t> tail(window_.data() + (window_.size() - keep), keep);
      std::string t = DecodeWindow(tail);
      if (t.size() < must || t.compare(t.size() - must, must, text_, text_.size() - must, must) != 0) continue;
      window_.erase(window_.begin(), window_.end() - static_cast<std::ptrdiff_t>(keep));
      emitted_ = t.size() - pending;
      text_ = std::move(t);
      next_slide_ = keep + kContextTokens;
      return;
    }
  }
  // No shorter window reproduces the text yet (e.g. a run of U+FFFD is held): try again at twice the size,
  // which keeps the attempts amortized O(1) per token.
  next_slide_ = window_.size() * 2;
}

}  // namespace parallm
