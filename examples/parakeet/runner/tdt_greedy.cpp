#include "tdt_greedy.h"

#include <stdexcept>
#include <string>

namespace parakeet {
namespace {

std::pair<int64_t, int64_t> step(const JointFn& joint, int64_t frame, const std::vector<int64_t>& durations,
                                 int64_t blank_id) {
  const auto [label, duration_index] = joint(frame);
  if (duration_index < 0 || duration_index >= static_cast<int64_t>(durations.size())) {
    throw std::invalid_argument("joint returned duration index " + std::to_string(duration_index) + "; the model has " +
                                std::to_string(durations.size()) + " durations");
  }
  int64_t duration = durations[duration_index];
  if (label == blank_id && duration == 0) duration = 1;  // a blank must move on, or decoding would stall
  return {label, duration};
}

void check_max_symbols(std::optional<int64_t> max_symbols) {
  if (max_symbols && *max_symbols < 1) {
    throw std::invalid_argument("max_symbols must be >= 1, got " + std::to_string(*max_symbols));
  }
}

}  // namespace

std::vector<DecodedToken> greedy_tdt_decode(int64_t num_frames, const JointFn& joint, const PredictFn& predict,
                                            int64_t blank_id, const std::vector<int64_t>& durations,
                                            std::optional<int64_t> max_symbols) {
  check_max_symbols(max_symbols);
  predict(blank_id);
  ChunkPosition position;
  return greedy_tdt_decode_chunk(num_frames, joint, predict, blank_id, durations, max_symbols, position);
}

std::vector<DecodedToken> greedy_tdt_decode_chunk(int64_t num_frames, const JointFn& joint, const PredictFn& predict,
                                                  int64_t blank_id, const std::vector<int64_t>& durations,
                                                  std::optional<int64_t> max_symbols, ChunkPosition& position) {
  check_max_symbols(max_symbols);
  const int64_t offset = position.decoded_frames;
  std::vector<DecodedToken> tokens;
  int64_t t = position.time_jump;
  int64_t last_token_frame = -1;
  int64_t tokens_on_last_frame = 0;
  while (t < num_frames) {
    auto [label, duration] = step(joint, t, durations, blank_id);
    int64_t label_frame = t;
    t += duration;
    while (label == blank_id && t < num_frames) {
      label_frame = t;
      std::tie(label, duration) = step(joint, t, durations, blank_id);
      t += duration;
    }
    if (label == blank_id) break;  // ran past the last frame while looking for a token
    tokens.push_back({label, offset + label_frame, duration});
    if (last_token_frame == label_frame) {
      ++tokens_on_last_frame;
    } else {
      last_token_frame = label_frame;
      tokens_on_last_frame = 1;
    }
    predict(label);
    if (max_symbols && t < num_frames && tokens_on_last_frame >= *max_symbols && t == label_frame) ++t;
  }
  position = {t - num_frames, offset + num_frames};
  return tokens;
}

}  // namespace parakeet
