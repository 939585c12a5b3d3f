#include "pte_model.h"

#include <executorch/runtime/platform/platform.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <numeric>

#include "errors.h"
#include "et_errors.h"
#include "xnnpack_options.h"

namespace parakeet {

using executorch::aten::ScalarType;
using executorch::aten::SizesType;
using executorch::aten::Tensor;
using executorch::extension::Module;
using executorch::extension::TensorPtr;
using executorch::runtime::Error;
using executorch::runtime::EValue;

namespace {

bool g_verbose = false;
std::string g_last_runtime_error;

void emit_log(et_timestamp_t, et_pal_log_level_t level, const char* filename, const char*, size_t line,
              const char* message, size_t length) {
  const std::string text = printable_log_line(message, length);
  if (level == kError || level == kFatal) g_last_runtime_error = text;
  if (g_verbose)
    std::fprintf(stderr, "[executorch %c %s:%zu] %s\n", static_cast<char>(level), filename, line, text.c_str());
}

void install_logger() {
  static std::once_flag once;
  std::call_once(once,
                 [] { executorch::runtime::register_pal(executorch::runtime::PalImpl::create(emit_log, __FILE__)); });
}

std::string runtime_detail(Error e) {
  std::string out = describe_error(e);
  if (!g_last_runtime_error.empty()) out += "; runtime says: " + g_last_runtime_error;
  g_last_runtime_error.clear();
  return out;
}

int64_t read_int(const EValue& v, const std::string& what) {
  if (v.isInt()) return v.toInt();
  if (v.isBool()) return v.toBool();
  if (v.isTensor()) {
    const Tensor& t = v.toTensor();
    if (t.numel() == 1) {
      switch (t.scalar_type()) {
        case ScalarType::Long: return t.const_data_ptr<int64_t>()[0];
        case ScalarType::Int: return t.const_data_ptr<int32_t>()[0];
        default: break;
      }
    }
  }
  throw PteModelError(what + " is not an integer");
}

double read_double(const EValue& v, const std::string& what) {
  if (v.isDouble()) return v.toDouble();
  if (v.isInt()) return static_cast<double>(v.toInt());
  if (v.isTensor()) {
    const Tensor& t = v.toTensor();
    if (t.numel() == 1 && t.scalar_type() == ScalarType::Float) return t.const_data_ptr<float>()[0];
    if (t.numel() == 1 && t.scalar_type() == ScalarType::Double) return t.const_data_ptr<double>()[0];
  }
  throw PteModelError(what + " is not a number");
}

const Tensor& tensor_output(const std::vector<EValue>& outputs, size_t i, const std::string& method) {
  if (i >= outputs.size() || !outputs[i].isTensor()) {
    throw PteModelError("method " + method + " returned " + std::to_string(outputs.size()) +
                        " outputs, expected a tensor at position " + std::to_string(i) +
                        "; re-export the model with parakeet-export");
  }
  return outputs[i].toTensor();
}

int64_t scalar_output(const std::vector<EValue>& outputs, size_t i, const std::string& method) {
  const Tensor& t = tensor_output(outputs, i, method);
  return read_int(EValue(t), "output " + std::to_string(i) + " of method " + method);
}

}  // namespace

void set_runtime_logging(bool verbose) {
  g_verbose = verbose;
  install_logger();
}

HostTensor HostTensor::zeros(std::vector<SizesType> sizes, ScalarType dtype) {
  HostTensor h;
  h.dtype = dtype;
  const size_t n = std::accumulate(sizes.begin(), sizes.end(), size_t{1},
                                   [](size_t a, SizesType b) { return a * static_cast<size_t>(b); });
  h.sizes = std::move(sizes);
  h.bytes.assign(n * executorch::runtime::elementSize(dtype), 0);
  return h;
}

HostTensor HostTensor::copy_of(const Tensor& t) {
  HostTensor h;
  h.assign(t);
  return h;
}

void HostTensor::assign(const Tensor& t) {
  sizes.assign(t.sizes().begin(), t.sizes().end());
  dtype = t.scalar_type();
  bytes.resize(t.nbytes());
  if (t.nbytes()) std::memcpy(bytes.data(), t.const_data_ptr(), t.nbytes());
}

TensorPtr HostTensor::view(size_t element_offset, std::vector<SizesType> view_sizes) const {
  auto* base = const_cast<uint8_t*>(bytes.data()) + element_offset * executorch::runtime::elementSize(dtype);
  return executorch::extension::make_tensor_ptr(std::move(view_sizes), base, dtype);
}

const std::vector<std::string>& PteModel::required_methods() {
  static const std::vector<std::string> names = {"preprocessor", "encoder", "decoder_step", "joint"};
  return names;
}

const std::vector<std::string>& PteModel::metadata_methods() {
  static const std::vector<std::string> names = {
      "sample_rate",          "window_stride",    "hop_length",        "subsampling_factor", "blank_id",
      "vocab_size",           "durations",        "num_lstm_layers",   "pred_hidden",        "joint_hidden",
      "max_symbols_per_step", "num_mel_features", "min_audio_samples", "max_audio_samples"};
  return names;
}

PteModel::PteModel(const std::string& path, const std::optional<std::string>& data_path) : path_(path) {
  install_logger();
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw PteModelError("model file not found: " + path + ". Export one with parakeet-export.");
  }
  if (std::filesystem::file_size(path, ec) == 0 && !ec) {
    throw PteModelError("model file " + path + " is empty (0 bytes): export it again with parakeet-export");
  }
  if (data_path && !std::filesystem::is_regular_file(*data_path, ec)) {
    throw PteModelError("data file not found: " + *data_path +
                        ". Pass the .ptd written next to the .pte, or drop --data_path.");
  }
  // One set of memory-planned buffers for all methods, sized by the largest (the encoder's), instead of one set
  // each: the methods run one at a time and every output is copied out (HostTensor) before the next call, so no
  // method reads another's planned memory. The preprocessor's plan no longer adds to the encoder's (29 MiB at v3's
  // size and the 60 s bound).
  constexpr bool share_memory_arenas = true;
  if (const Error e = share_xnnpack_weights_and_workspace(); e != Error::Ok) {
    throw PteModelError("cannot set the XNNPACK backend's options (" + runtime_detail(e) + ")");
  }
  module_ = data_path ? std::make_unique<Module>(path, *data_path, Module::LoadMode::Mmap, nullptr, nullptr, nullptr,
                                                 share_memory_arenas)
                      : std::make_unique<Module>(path, Module::LoadMode::Mmap, nullptr, nullptr, nullptr,
                                                 share_memory_arenas);
  // InternalConsistency (the Python bindings' choice too): a .pte whose flatbuffer is damaged is refused with
  // InvalidProgram instead of being followed to a crash.
  if (const Error e = module_->load(executorch::runtime::Program::Verification::InternalConsistency); e != Error::Ok) {
    throw PteModelError("cannot load " + path + " as an ExecuTorch program (" + runtime_detail(e) +
                        "); pass a model.pte written by parakeet-export");
  }
  auto names = module_->method_names();
  if (!names.ok())
    throw PteModelError("cannot list the methods of " + path + " (" + runtime_detail(names.error()) + ")");
  std::string missing;
  for (const auto* list : {&required_methods(), &metadata_methods()}) {
    for (const auto& m : *list) {
      if (!names->count(m)) missing += (missing.empty() ? "" : ", ") + m;
    }
  }
  if (!missing.empty()) {
    throw PteModelError(path + " lacks method(s) " + missing + "; re-export it with parakeet-export");
  }

  auto constant = [this](const std::string& name) { return run(name, {}); };
  auto one = [&](const std::string& name) {
    auto out = constant(name);
    if (out.empty()) throw PteModelError("metadata method " + name + " of " + path_ + " returned nothing");
    return out[0];
  };
  ModelMetadata& m = metadata_;
  m.sample_rate = read_int(one("sample_rate"), "sample_rate");
  m.window_stride = read_double(one("window_stride"), "window_stride");
  m.hop_length = read_int(one("hop_length"), "hop_length");
  m.subsampling_factor = read_int(one("subsampling_factor"), "subsampling_factor");
  m.blank_id = read_int(one("blank_id"), "blank_id");
  m.vocab_size = read_int(one("vocab_size"), "vocab_size");
  for (const auto& v : constant("durations")) m.durations.push_back(read_int(v, "durations"));
  m.num_lstm_layers = read_int(one("num_lstm_layers"), "num_lstm_layers");
  m.pred_hidden = read_int(one("pred_hidden"), "pred_hidden");
  m.joint_hidden = read_int(one("joint_hidden"), "joint_hidden");
  m.max_symbols_per_step = read_int(one("max_symbols_per_step"), "max_symbols_per_step");
  m.num_mel_features = read_int(one("num_mel_features"), "num_mel_features");
  m.min_audio_samples = read_int(one("min_audio_samples"), "min_audio_samples");
  m.max_audio_samples = read_int(one("max_audio_samples"), "max_audio_samples");
  if (names->count("tokenizer_sha256")) {  // optional: exports before it have no fingerprint
    const EValue v = one("tokenizer_sha256");
    if (!v.isString()) throw PteModelError("metadata method tokenizer_sha256 of " + path + " is not a string");
    m.tokenizer_sha256 = std::string(v.toString());
  }
  if (m.sample_rate <= 0 || m.hop_length <= 0 || m.durations.empty() || m.num_lstm_layers <= 0 || m.pred_hidden <= 0) {
    throw PteModelError(path +
                        " has inconsistent metadata (sample_rate, hop_length, durations or LSTM shape); "
                        "re-export it with parakeet-export");
  }

  // Loading every method now puts backend initialisation (XNNPACK weight packing) into the load time, not into
  // the first transcription, and reports a missing kernel before any audio is read.
  for (const auto& name : required_methods()) {
    if (const Error e = module_->load_method(name); e != Error::Ok) {
      // A damaged file fails verification as InvalidProgram; anything else is most often a kernel or backend
      // the program names that this runner lacks.
      const char* hint = e == Error::InvalidProgram
                             ? "); the .pte is damaged or truncated: export it again with parakeet-export"
                             : "); the .pte may need a backend or kernel library this runner was not built with";
      throw PteModelError("cannot load method " + name + " of " + path + " (" + runtime_detail(e) + hint);
    }
  }
  state_dtype_ = input_dtype("decoder_step", 1);
}

std::vector<EValue> PteModel::run(const std::string& method, const std::vector<EValue>& inputs) {
  auto result = module_->execute(method, inputs);
  if (!result.ok()) {
    throw PteModelError("method " + method + " of " + path_ + " failed (" + runtime_detail(result.error()) + ")");
  }
  return std::move(*result);
}

ScalarType PteModel::input_dtype(const std::string& method, size_t index) {
  auto meta = module_->method_meta(method);
  if (!meta.ok()) throw PteModelError("cannot read the signature of method " + method);
  auto info = meta->input_tensor_meta(index);
  if (!info.ok()) {
    throw PteModelError("input " + std::to_string(index) + " of method " + method +
                        " is not a tensor; "
                        "re-export the model with parakeet-export");
  }
  return info->scalar_type();
}

std::pair<HostTensor, int64_t> PteModel::preprocessor(const float* audio, int64_t samples, int64_t length) {
  // The method only reads its input: the const_cast fits the tensor API, nothing writes through it.
  auto wave = executorch::extension::make_tensor_ptr({static_cast<SizesType>(samples)}, const_cast<float*>(audio),
                                                     ScalarType::Float);
  auto len = executorch::extension::make_tensor_ptr(std::vector<int64_t>{length});
  auto out = run("preprocessor", {EValue(wave), EValue(len)});
  return {HostTensor::copy_of(tensor_output(out, 0, "preprocessor")), scalar_output(out, 1, "preprocessor")};
}

std::pair<HostTensor, int64_t> PteModel::encoder(const HostTensor& features, int64_t feature_length) {
  auto feats = features.view();
  auto len = executorch::extension::make_tensor_ptr(std::vector<int64_t>{feature_length});
  auto out = run("encoder", {EValue(feats), EValue(len)});
  return {HostTensor::copy_of(tensor_output(out, 0, "encoder")), scalar_output(out, 1, "encoder")};
}

PteModel::DecoderState PteModel::initial_state() const {
  const std::vector<SizesType> shape = {static_cast<SizesType>(metadata_.num_lstm_layers), 1,
                                        static_cast<SizesType>(metadata_.pred_hidden)};
  DecoderState s;
  s.h = HostTensor::zeros(shape, state_dtype_);
  s.c = HostTensor::zeros(shape, state_dtype_);
  return s;
}

void PteModel::decoder_step(int64_t token, DecoderState& state) {
  auto tok = executorch::extension::make_tensor_ptr({1, 1}, std::vector<int64_t>{token});
  auto h = state.h.view();
  auto c = state.c.view();
  auto out = run("decoder_step", {EValue(tok), EValue(h), EValue(c)});
  state.prediction.assign(tensor_output(out, 0, "decoder_step"));
  state.h.assign(tensor_output(out, 1, "decoder_step"));
  state.c.assign(tensor_output(out, 2, "decoder_step"));
}

std::pair<int64_t, int64_t> PteModel::joint(const HostTensor& encoded, int64_t frame, const DecoderState& state) {
  if (encoded.sizes.size() != 3) throw PteModelError("encoder output is not [1, T, J]; re-export the model");
  const SizesType width = encoded.sizes[2];
  auto enc = encoded.view(static_cast<size_t>(frame) * width, {1, 1, width});
  auto pred = state.prediction.view();
  auto out = run("joint", {EValue(enc), EValue(pred)});
  return {scalar_output(out, 0, "joint"), scalar_output(out, 1, "joint")};
}

}  // namespace parakeet
