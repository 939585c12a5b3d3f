// The runner's pipeline: waveform -> preprocessor -> encoder -> greedy TDT decoding -> timed transcript.
// Mirrors runtime/transcribe.py step for step (decode_tokens, transcribe).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "pte_model.h"
#include "tdt_greedy.h"
#include "timestamps.h"
#include "tokenizer.h"

namespace parakeet {

struct Transcript {
  std::string text;
  std::vector<Span> tokens, words, segments;
  double audio_seconds = 0.0;
  std::vector<std::pair<std::string, double>> timings;  // preprocess, encode, decode (seconds), in this order
};

class Transcriber {
 public:
  // Throws TokenizerError when the tokenizer's size differs from the model's vocabulary, or (check_fingerprint)
  // when it is not the tokenizer the model was exported with; `warn` receives the note for a .pte without one.
  Transcriber(PteModel& model, const Tokenizer& tokenizer, bool check_fingerprint = true,
              const WarningSink& warn = {});

  double max_audio_seconds() const;
  // Runs the four methods on one waveform (float32 at the model's rate) and decodes greedily.
  // Throws AudioRangeError when the audio is longer than the .pte supports.
  std::vector<DecodedToken> decode_tokens(const std::vector<float>& audio,
                                          std::vector<std::pair<std::string, double>>& timings);
  Transcript transcribe(const std::vector<float>& audio);

 private:
  PteModel& model_;
  const Tokenizer& tokenizer_;
  std::vector<std::string> pieces_;
  Punctuation punctuation_;
};

}  // namespace parakeet
