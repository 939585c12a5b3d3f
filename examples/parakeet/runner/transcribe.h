// The runner's pipeline: waveform -> preprocessor -> encoder -> greedy TDT decoding -> timed transcript.
// Mirrors runtime/transcribe.py step for step (encode, decode_frames, transcript, decode_tokens, transcribe); the
// single pass is split into those steps so that buffered decoding (buffered.h) can run them window by window.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "pte_model.h"
#include "tdt_greedy.h"
#include "timestamps.h"
#include "tokenizer.h"

namespace parakeet {

// Seconds elapsed since t0 (stage timings).
double seconds_since(std::chrono::steady_clock::time_point t0);
// A duration in seconds with two decimals, as the Python runner's messages print it ("%.2f").
std::string format_seconds(double s);

using Timings = std::vector<std::pair<std::string, double>>;  // preprocess, encode, decode (seconds), in this order

struct Transcript {
  std::string text;
  std::vector<Span> tokens, words, segments;
  double audio_seconds = 0.0;
  Timings timings;
  int64_t windows = 0;  // windows of buffered decoding; 0 for a single pass
};

// Greedy TDT state carried from one chunk of encoder frames to the next (decoding/tdt_greedy.py's
// TdtDecoderState): the prediction network's output and LSTM state after the last token, and the frame position.
struct TdtDecoderState {
  PteModel::DecoderState model;
  ChunkPosition position;
};

struct Encoded {
  HostTensor frames;  // projected encoder frames [1, T_enc, J]
  int64_t valid_frames = 0;
};

class Transcriber {
 public:
  // Throws TokenizerError when the tokenizer's size differs from the model's vocabulary, or (check_fingerprint)
  // when it is not the tokenizer the model was exported with; `warn` receives the note for a .pte without one.
  Transcriber(PteModel& model, const Tokenizer& tokenizer, bool check_fingerprint = true, const WarningSink& warn = {});

  double max_audio_seconds() const;
  PteModel& model() { return model_; }
  const ModelMetadata& metadata() const { return model_.metadata(); }

  // preprocessor + encoder on one waveform (1 .. max_audio_samples samples at the model's rate); adds the
  // preprocess and encode seconds to `timings`. Throws AudioRangeError when the audio is longer than the .pte takes.
  Encoded encode(const std::vector<float>& audio, Timings& timings);
  // The same over `size` samples at `audio` of which the first `valid` are the waveform: a caller that pads in its
  // own buffer (size whole hops, zeros after `valid`) spares the copy that padding makes here.
  Encoded encode(const float* audio, int64_t size, int64_t valid, Timings& timings);
  // The decoder's state before the first frame: the prediction network primed with blank.
  TdtDecoderState initial_decoder_state();
  // Greedy TDT decoding of encoder frames first .. first + count - 1, continuing from `state` (left unchanged, so a
  // caller can decode ahead and throw the result away); returns the tokens (absolute frames) and the new state.
  std::pair<std::vector<DecodedToken>, TdtDecoderState> decode_frames(const Encoded& encoded, int64_t first,
                                                                      int64_t count, const TdtDecoderState& state);
  // Text and token, word and segment spans (seconds) of decoded tokens, by NeMo's timestamp rules.
  Transcript transcript(const std::vector<DecodedToken>& tokens, double audio_seconds, const Timings& timings) const;
  // The transcript text of `tokens` alone (StreamingTranscriber's running text).
  std::string text_of(const std::vector<DecodedToken>& tokens) const;
  // Token spans (seconds) of `tokens`, as in transcript().
  std::vector<Span> token_spans_of(const std::vector<DecodedToken>& tokens) const;

  // Runs the four methods on one waveform (float32 at the model's rate) and decodes greedily.
  // Throws AudioRangeError when the audio is longer than the .pte supports.
  std::vector<DecodedToken> decode_tokens(const std::vector<float>& audio, Timings& timings);
  Transcript transcribe(const std::vector<float>& audio);
  // Runs the four methods once on `seconds` of silence (clamped to the .pte's range) and throws the result away, so
  // that the first real transcription does not pay the runtime's one-time costs inside its timing (XNNPACK sizes
  // its workspace and the memory-mapped weights are first touched on the first call: about 1 s on a full-size
  // model, whatever the audio's length). As SinglePassTranscriber.warm_up; the CLI counts it in its load time.
  void warm_up(double seconds = 0.5);

 private:
  std::vector<int> checked_ids(const std::vector<DecodedToken>& tokens) const;

  PteModel& model_;
  const Tokenizer& tokenizer_;
  std::vector<std::string> pieces_;
  Punctuation punctuation_;
};

}  // namespace parakeet
