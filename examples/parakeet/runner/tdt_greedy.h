// Greedy TDT decoding, one utterance at a time: a port of decoding/tdt_greedy.py (NeMo's label-looping
// `greedy_batch` rules for batch size 1). The rules, in short:
//  - the prediction network is primed with blank (the start symbol) from a zero state;
//  - blank with duration 0 counts as duration 1; on blank the frame advances and the joint is asked again with
//    the same prediction (the prediction network does not run);
//  - a non-blank token is emitted at its frame with its duration and the prediction network advances on it;
//  - when the last max_symbols tokens were all emitted on the current frame and the last duration was 0, the
//    frame is forced forward by one.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

namespace parakeet {

struct DecodedToken {
  int64_t id;
  int64_t frame;     // encoder frame the token was emitted at
  int64_t duration;  // predicted duration in encoder frames
};

// joint(frame) -> (token id, duration index), using the prediction of the latest predict() call.
using JointFn = std::function<std::pair<int64_t, int64_t>(int64_t frame)>;
// predict(token): one prediction-network step on `token`, updating the prediction the joint sees.
using PredictFn = std::function<void(int64_t token)>;

// Where the next chunk of encoder frames starts (the frame part of decoding/tdt_greedy.py's TdtDecoderState;
// the prediction and LSTM state live with the caller's predict/joint functions).
struct ChunkPosition {
  int64_t time_jump = 0;       // frames by which the last duration reached past the previous chunk's end (>= 0)
  int64_t decoded_frames = 0;  // frames decoded in earlier chunks: the absolute frame of this chunk's frame 0
};

// Throws std::invalid_argument for a duration index outside `durations` or max_symbols < 1.
std::vector<DecodedToken> greedy_tdt_decode(int64_t num_frames, const JointFn& joint, const PredictFn& predict,
                                            int64_t blank_id, const std::vector<int64_t>& durations,
                                            std::optional<int64_t> max_symbols);

// One chunk of `num_frames` encoder frames (joint is called with 0 .. num_frames - 1), continuing from `position`
// and a prediction network already primed by the caller; NeMo's label-looping step with prev_batched_state.
// Decoding starts at frame position.time_jump; as in NeMo, the count behind max_symbols restarts in each chunk.
// Returns the tokens with absolute frames (position.decoded_frames + chunk frame) and updates `position`.
std::vector<DecodedToken> greedy_tdt_decode_chunk(int64_t num_frames, const JointFn& joint, const PredictFn& predict,
                                                  int64_t blank_id, const std::vector<int64_t>& durations,
                                                  std::optional<int64_t> max_symbols, ChunkPosition& position);

}  // namespace parakeet
