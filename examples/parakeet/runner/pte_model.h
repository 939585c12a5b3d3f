// An exported Parakeet TDT .pte loaded with ExecuTorch's C++ Module: its four compute methods and the metadata
// its constant methods hold. Mirrors runtime/pte_model.py; the method names and signatures are the .pte contract of
// src/parakeet_executorch/pte_format.py (tests/test_pte_format.py checks that the lists here match it).
#pragma once

#include <executorch/extension/module/module.h>
#include <executorch/extension/tensor/tensor.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace parakeet {

// Constants the runner needs, each read from the .pte's constant method of the same name (pte_format.py).
struct ModelMetadata {
  int64_t sample_rate = 0;     // Hz
  double window_stride = 0.0;  // seconds per feature frame
  int64_t hop_length = 0;      // samples per feature frame
  int64_t subsampling_factor = 0;
  int64_t blank_id = 0;
  int64_t vocab_size = 0;
  std::vector<int64_t> durations;
  int64_t num_lstm_layers = 0;
  int64_t pred_hidden = 0;
  int64_t joint_hidden = 0;
  int64_t max_symbols_per_step = 0;
  int64_t num_mel_features = 0;
  int64_t min_audio_samples = 0;
  int64_t max_audio_samples = 0;
  // Optional (later exports): hex SHA-256 of the tokenizer's serialized SentencePiece model; "" when absent.
  std::string tokenizer_sha256;

  // Samples the preprocessor method takes for n samples of audio: whole hops, at least its traced minimum. The
  // zeros past n lie past the length given with them, where NeMo's featurizer masks them out (pte_format.py).
  int64_t padded_samples(int64_t n) const {
    return std::max((n + hop_length - 1) / hop_length * hop_length, min_audio_samples);
  }
};

// A tensor the runner owns. Method outputs live in the method's planned memory and are overwritten by its next
// execution, so anything kept across calls (encoder frames, LSTM state, prediction) is copied into one of these.
struct HostTensor {
  std::vector<executorch::aten::SizesType> sizes;
  executorch::aten::ScalarType dtype = executorch::aten::ScalarType::Float;
  std::vector<uint8_t> bytes;

  static HostTensor zeros(std::vector<executorch::aten::SizesType> sizes, executorch::aten::ScalarType dtype);
  static HostTensor copy_of(const executorch::aten::Tensor& t);
  void assign(const executorch::aten::Tensor& t);  // copy, reusing the buffer
  // A non-owning tensor over [offset, offset + prod(view_sizes)) elements; the HostTensor must outlive it.
  executorch::extension::TensorPtr view(size_t element_offset,
                                        std::vector<executorch::aten::SizesType> view_sizes) const;
  executorch::extension::TensorPtr view() const { return view(0, sizes); }
};

class PteModel {
 public:
  static const std::vector<std::string>& required_methods();
  static const std::vector<std::string>& metadata_methods();

  // Throws PteModelError: missing or unreadable file, not an ExecuTorch program, a required method or metadata
  // entry missing, or a method that fails to load (e.g. a kernel or backend this runner was not linked with).
  explicit PteModel(const std::string& path, const std::optional<std::string>& data_path = std::nullopt);

  const ModelMetadata& metadata() const { return metadata_; }
  const std::string& path() const { return path_; }

  // Log-mel features of a hop-aligned waveform: float32 [samples] at `audio` (valid samples `length`; read, not
  // written) -> ([1, F, T_mel], frames).
  std::pair<HostTensor, int64_t> preprocessor(const float* audio, int64_t samples, int64_t length);
  // Projected encoder frames: [1, F, T_mel] -> ([1, T_enc, J], valid encoder frames).
  std::pair<HostTensor, int64_t> encoder(const HostTensor& features, int64_t feature_length);

  struct DecoderState {
    HostTensor h, c;        // [layers, 1, hidden]
    HostTensor prediction;  // [1, 1, J]
  };
  DecoderState initial_state() const;  // zero LSTM state, no prediction yet
  // One prediction-network step on `token`; updates state.h/c/prediction in place.
  void decoder_step(int64_t token, DecoderState& state);
  // Greedy joint on encoder frame `frame` of `encoded` and the state's prediction -> (token id, duration index).
  std::pair<int64_t, int64_t> joint(const HostTensor& encoded, int64_t frame, const DecoderState& state);

 private:
  std::vector<executorch::runtime::EValue> run(const std::string& method,
                                               const std::vector<executorch::runtime::EValue>& inputs);
  executorch::aten::ScalarType input_dtype(const std::string& method, size_t index);

  std::string path_;
  std::unique_ptr<executorch::extension::Module> module_;
  ModelMetadata metadata_;
  executorch::aten::ScalarType state_dtype_ = executorch::aten::ScalarType::Float;
};

// ExecuTorch logs through its platform layer; the runner keeps those lines off stderr (errors are reported as one
// line of its own) unless `verbose`. The last runtime error line is appended to PteModelError messages.
void set_runtime_logging(bool verbose);

}  // namespace parakeet
