#include "parakeet_pte_c.h"

#include <executorch/extension/module/module.h>
#include <executorch/extension/tensor/tensor.h>
#include <executorch/runtime/platform/platform.h>

#include <atomic>
#include <exception>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "runner/cpu_threads.h"
#include "runner/et_errors.h"
#include "runner/xnnpack_options.h"

using executorch::aten::ScalarType;
using executorch::aten::SizesType;
using executorch::extension::Module;
using executorch::extension::TensorPtr;
using executorch::runtime::Error;
using executorch::runtime::EValue;

struct pk_model {
  std::unique_ptr<Module> module;
  std::vector<EValue> outputs;
  std::string method_names;
};

namespace {

thread_local std::string t_error;

std::mutex g_log_mutex;
std::string g_log;                 // everything ExecuTorch logged since the last pk_take_log
std::string g_last_runtime_error;  // the last error-level line, folded into the next failure's message
thread_local std::string t_taken;  // what pk_take_log returned (kept alive for the caller)

// ExecuTorch has one log hook per process, and ExecuTorch's Python bindings install their own (into sys.stderr) when
// they are imported. A process may use both runtimes: this library's hook buffers what is logged while one of its
// own calls runs and passes everything else on to the hook it found, and it installs itself again at the next call
// if the bindings replaced it in between.
executorch::runtime::PalImpl g_previous{};
std::atomic<int> g_capturing{0};

void emit_log(et_timestamp_t timestamp, et_pal_log_level_t level, const char* filename, const char* function,
              size_t line, const char* message, size_t length) {
  if (g_capturing.load() == 0) {
    if (g_previous.emit_log_message != nullptr)
      g_previous.emit_log_message(timestamp, level, filename, function, line, message, length);
    return;
  }
  const std::string text = parakeet::printable_log_line(message, length);
  std::string name(filename ? filename : "");
  if (auto slash = name.find_last_of('/'); slash != std::string::npos) name = name.substr(slash + 1);
  std::lock_guard<std::mutex> lock(g_log_mutex);
  // The same "[file:line] message" shape as ExecuTorch's Python bindings write, so one parser reads both.
  g_log += "[" + name + ":" + std::to_string(line) + "] " + text + "\n";
  if (level == kError || level == kFatal) g_last_runtime_error = text;
}

// Buffers the runtime's log for the length of one call into the library.
class CapturedLog {
 public:
  CapturedLog() {
    static std::mutex install;
    {
      std::lock_guard<std::mutex> lock(install);
      const executorch::runtime::PalImpl* current = executorch::runtime::get_pal_impl();
      if (current->emit_log_message != emit_log) {
        g_previous = *current;
        ++g_capturing;  // register_pal's own note that it replaced a hook goes into the buffer, not to stderr
        executorch::runtime::register_pal(executorch::runtime::PalImpl::create(emit_log, __FILE__));
        --g_capturing;
      }
    }
    ++g_capturing;
  }
  ~CapturedLog() { --g_capturing; }
  CapturedLog(const CapturedLog&) = delete;
  CapturedLog& operator=(const CapturedLog&) = delete;
};

int fail(const std::string& message) {
  t_error = message;
  return 1;
}

// "ExecuTorch error 0x.. Name: meaning", and the runtime's own last error line when it logged one.
std::string detail(Error e) {
  std::string out = parakeet::describe_error(e);
  std::lock_guard<std::mutex> lock(g_log_mutex);
  if (!g_last_runtime_error.empty()) out += "; runtime says: " + g_last_runtime_error;
  g_last_runtime_error.clear();
  return out;
}

}  // namespace

extern "C" {

const char* pk_last_error(void) { return t_error.c_str(); }

const char* pk_take_log(void) {
  std::lock_guard<std::mutex> lock(g_log_mutex);
  t_taken.swap(g_log);
  g_log.clear();
  return t_taken.c_str();
}

pk_model* pk_open(const char* path, const char* data_path) {
  t_error.clear();
  CapturedLog capture;
  try {
    if (const Error e = parakeet::share_xnnpack_weights_and_workspace(); e != Error::Ok) {
      fail("cannot set the XNNPACK backend's options (" + detail(e) + ")");
      return nullptr;
    }
    // share_memory_arenas: one set of planned buffers for all methods, sized by the largest; the methods run one
    // at a time and the caller copies every output before the next call (see the header).
    auto model = std::make_unique<pk_model>();
    model->module = data_path ? std::make_unique<Module>(path, data_path, Module::LoadMode::Mmap, nullptr, nullptr,
                                                         nullptr, /*share_memory_arenas=*/true)
                              : std::make_unique<Module>(path, Module::LoadMode::Mmap, nullptr, nullptr, nullptr,
                                                         /*share_memory_arenas=*/true);
    // InternalConsistency, as ExecuTorch's Python bindings load: a damaged flatbuffer is refused here instead of
    // being followed to a crash.
    if (const Error e = model->module->load(executorch::runtime::Program::Verification::InternalConsistency);
        e != Error::Ok) {
      fail(detail(e));
      return nullptr;
    }
    return model.release();
  } catch (const std::exception& e) {
    fail(e.what());
    return nullptr;
  }
}

void pk_close(pk_model* model) { delete model; }

const char* pk_method_names(pk_model* model) {
  CapturedLog capture;
  auto names = model->module->method_names();
  model->method_names.clear();
  if (!names.ok()) {
    fail(detail(names.error()));
    return model->method_names.c_str();
  }
  const std::set<std::string> sorted(names->begin(), names->end());
  for (const auto& n : sorted) model->method_names += n + "\n";
  return model->method_names.c_str();
}

int pk_load_method(pk_model* model, const char* method) {
  t_error.clear();
  CapturedLog capture;
  if (const Error e = model->module->load_method(method); e != Error::Ok) return fail(detail(e));
  return 0;
}

int pk_execute(pk_model* model, const char* method, const pk_tensor* inputs, int32_t num_inputs) {
  t_error.clear();
  model->outputs.clear();
  CapturedLog capture;
  try {
    std::vector<TensorPtr> tensors;
    std::vector<EValue> values;
    tensors.reserve(num_inputs);
    values.reserve(num_inputs);
    for (int32_t i = 0; i < num_inputs; ++i) {
      const pk_tensor& in = inputs[i];
      if (in.ndim < 0 || in.ndim > PK_MAX_DIMS) return fail("input " + std::to_string(i) + " has a bad rank");
      std::vector<SizesType> sizes(in.sizes, in.sizes + in.ndim);
      tensors.push_back(executorch::extension::from_blob(in.data, std::move(sizes), static_cast<ScalarType>(in.dtype)));
      values.emplace_back(tensors.back());
    }
    auto result = model->module->execute(method, values);
    if (!result.ok()) return fail(detail(result.error()));
    model->outputs = std::move(*result);
    return 0;
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}

int32_t pk_num_outputs(pk_model* model) { return static_cast<int32_t>(model->outputs.size()); }

int pk_output(pk_model* model, int32_t index, int32_t* kind, int32_t* dtype, int32_t* ndim, int64_t* sizes,
              const void** data, size_t* nbytes, int64_t* int_value, double* double_value) {
  if (index < 0 || static_cast<size_t>(index) >= model->outputs.size()) {
    return fail("output " + std::to_string(index) + " does not exist (the method returned " +
                std::to_string(model->outputs.size()) + ")");
  }
  const EValue& v = model->outputs[index];
  if (v.isTensor()) {
    const auto& t = v.toTensor();
    if (t.dim() > PK_MAX_DIMS) return fail("output " + std::to_string(index) + " has more dimensions than allowed");
    *kind = PK_TENSOR;
    *dtype = static_cast<int32_t>(t.scalar_type());
    *ndim = static_cast<int32_t>(t.dim());
    for (ssize_t d = 0; d < t.dim(); ++d) sizes[d] = t.size(d);
    *data = t.const_data_ptr();
    *nbytes = t.nbytes();
  } else if (v.isInt()) {
    *kind = PK_INT;
    *int_value = v.toInt();
  } else if (v.isBool()) {
    *kind = PK_BOOL;
    *int_value = v.toBool();
  } else if (v.isDouble()) {
    *kind = PK_DOUBLE;
    *double_value = v.toDouble();
  } else if (v.isString()) {
    const auto s = v.toString();
    *kind = PK_STRING;
    *data = s.data();
    *nbytes = s.size();
  } else if (v.isNone()) {
    *kind = PK_NONE;
  } else {
    return fail("output " + std::to_string(index) + " is of a kind this interface does not read");
  }
  return 0;
}

int32_t pk_cpu_threads(void) {
  CapturedLog capture;
  return parakeet::cpu_threads();
}

int pk_set_cpu_threads(int32_t threads) {
  t_error.clear();
  CapturedLog capture;
  try {
    parakeet::set_cpu_threads(threads);
    return 0;
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}

}  // extern "C"
