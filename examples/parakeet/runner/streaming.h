// A streaming transcription object: feed sample blocks, get the new final tokens with times (a port of
// runtime/streaming.py). Wraps BufferedDecoder and turns its tokens into timed text.
#pragma once

#include <string>
#include <vector>

#include "buffered.h"
#include "timestamps.h"
#include "transcribe.h"

namespace parakeet {

// New output of one feed()/finish() call.
struct StreamResult {
  std::vector<Span> tokens;  // token spans that became final (seconds from the start of the stream)
  std::string text;          // the text those tokens add to the transcript (may begin with a space)
  std::string draft_text;    // decoded ahead over the right context (partial only); may still change
  double final_until = 0.0;  // seconds of audio up to which the transcript is final
};

class StreamingTranscriber {
 public:
  // Throws ContextError when the window is longer than the .pte supports.
  StreamingTranscriber(Transcriber& transcriber, ContextSize context, bool partial = false);

  StreamResult feed(const std::vector<float>& samples);
  StreamResult finish();
  // Everything final so far, with token, word and segment spans.
  Transcript transcript() const;
  const BufferedDecoder& decoder() const { return decoder_; }

 private:
  StreamResult result(const StreamUpdate& update);

  Transcriber& transcriber_;
  BufferedDecoder decoder_;
  std::vector<DecodedToken> tokens_;
  std::string text_;
};

}  // namespace parakeet
