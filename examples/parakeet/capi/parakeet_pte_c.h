// A C interface to an ExecuTorch program for the Python runner's native runtime
// (src/parakeet_executorch/runtime/native_pte_model.py loads it with ctypes).
//
// Why it exists: ExecuTorch's own Python bindings link libtorch, so importing them costs a process ~370 MiB before
// any model is loaded (about the size of a 4-bit full-size .pte). This library links only the executorch wheel's
// runtime libraries (libexecutorch, its XNNPACK delegate and CPU kernels) plus the fpa4w kernels, as the C++ runner
// does, and loads the program the way the C++ runner's PteModel does: memory-mapped, one set of planned buffers for
// all methods, one packed copy of each XNNPACK weight.
//
// Conventions: every call that can fail returns 0 on success and non-zero on failure, after which
// pk_last_error() holds one line that says why (ExecuTorch's error code in words, plus the runtime's last logged
// error). Outputs of pk_execute live until the next pk_execute on the same model; the methods share their planned
// memory, so callers copy what they keep before calling any method again. Not thread-safe: one caller at a time.
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PK_API __attribute__((visibility("default")))

typedef struct pk_model pk_model;

// An input tensor: ExecuTorch ScalarType code (6 float32, 4 int64, 3 int32, 5 float16, 15 bfloat16), dimension
// sizes and a contiguous buffer the caller owns for the duration of the call.
typedef struct {
  int32_t dtype;
  int32_t ndim;
  const int64_t* sizes;
  void* data;
} pk_tensor;

// What pk_output describes.
enum { PK_NONE = 0, PK_TENSOR = 1, PK_INT = 2, PK_DOUBLE = 3, PK_BOOL = 4, PK_STRING = 5 };
#define PK_MAX_DIMS 16

// The last failure's message in this thread ("" when none): valid until the next call into the library.
PK_API const char* pk_last_error(void);
// Text ExecuTorch logged since the last call to this function ("[file:line] message" lines), then cleared. The
// Python runner replays it where its other library output goes.
PK_API const char* pk_take_log(void);

// Loads the program at `path` (memory-mapped) with an optional .ptd `data_path` (NULL for none). NULL on failure.
PK_API pk_model* pk_open(const char* path, const char* data_path);
PK_API void pk_close(pk_model* model);
// The program's method names, one per line.
PK_API const char* pk_method_names(pk_model* model);
// Loads a method (XNNPACK packs its weights here); executing a method loads it if this was not called.
PK_API int pk_load_method(pk_model* model, const char* method);
// Runs `method` on `num_inputs` tensors; pk_num_outputs / pk_output then describe what it returned.
PK_API int pk_execute(pk_model* model, const char* method, const pk_tensor* inputs, int32_t num_inputs);
PK_API int32_t pk_num_outputs(pk_model* model);
// Output `index` of the last execute: *kind is one of PK_*; a tensor fills dtype, ndim, sizes[PK_MAX_DIMS] and
// *data (its bytes, nbytes long); an int or bool fills *int_value, a double *double_value, a string *data and
// *nbytes. Unused fields are left alone.
PK_API int pk_output(pk_model* model, int32_t index, int32_t* kind, int32_t* dtype, int32_t* ndim, int64_t* sizes,
                     const void** data, size_t* nbytes, int64_t* int_value, double* double_value);

// ExecuTorch's CPU thread pool: its size (0 when this runtime has none) and a resize (before or between runs).
PK_API int32_t pk_cpu_threads(void);
PK_API int pk_set_cpu_threads(int32_t threads);

#ifdef __cplusplus
}
#endif
