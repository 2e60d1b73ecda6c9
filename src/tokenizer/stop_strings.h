// StopStringMatcher: finds the first stop string in streamed text and says which text is final (safe to send
// to the client) so that no part of a stop string is ever sent.
//
// Feed text chunks in order (e.g. what IncrementalDetokenizer::Add returns). Text is held back while its end
// could still grow into a stop string: the longest suffix of the text that is a proper prefix of some stop
// string. The first stop string to complete in the text (the one ending earliest; among those ending at the
// same byte the longest) ends the stream, and the text is cut right before it. The result does not depend on
// how the text is split into chunks. Matching is on bytes, so multi-byte UTF-8 stop strings work, and since
// held-back and cut text starts where a stop string starts, valid UTF-8 chunks stay valid.
//
// Cost per chunk: O((held + chunk bytes) * number of stops); held text is shorter than the longest stop.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace parallm {

class StopStringMatcher {
 public:
  struct Step {
    std::string text;         // newly final text (when stopped: up to right before the stop string)
    bool stopped = false;     // a stop string matched; later Feed calls return nothing
    int32_t stop_index = -1;  // which of the constructor's stops matched, when stopped
  };

  // Empty stop strings are ignored.
  explicit StopStringMatcher(std::vector<std::string> stops);

  Step Feed(std::string_view chunk);
  // End of stream without a stop: the held-back text is final. Returns "" when stopped.
  std::string Flush();

  bool stopped() const { return stopped_; }
  // Bytes of text returned as final so far (by Feed and Flush).
  size_t final_size() const { return final_size_; }
  // Bytes fed but held back.
  size_t held_size() const { return held_.size(); }

 private:
  std::vector<std::string> stops_;
  std::vector<int32_t> stop_ids_;  // index into the constructor's list, per entry of stops_
  size_t max_stop_ = 0;
  std::string held_;
  size_t final_size_ = 0;
  bool stopped_ = false;
};

}  // namespace parallm
