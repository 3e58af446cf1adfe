// The C API's conversions and guards (internal to src/c_api*.cc): the
// plain structs of include/attnpool/attnpool_c.h to the C++ views and specs,
// every exception to a status code with a thread-local message.
#pragma once

// The library's headers, not attnpool.h: its version.h lies in the build
// tree, which only src/version.cc sees.
#include <attnpool/attention.h>
#include <attnpool/distance.h>
#include <attnpool/element.h>
#include <attnpool/error.h>
#include <attnpool/execution.h>
#include <attnpool/kernel.h>
#include <attnpool/matrix.h>
#include <attnpool/normalize.h>
#include <attnpool/pool.h>
#include <attnpool/regression.h>
#include <attnpool/targets.h>
#include <attnpool/weighted_sum.h>
#include <attnpool/attnpool_c.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <new>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace attnpool_c_api {

inline thread_local std::string last_error;
inline thread_local std::string last_error_argument;

inline attnpool_status Fail(attnpool_status status, const std::string& argument,
                            const std::string& message) {
  last_error_argument = argument;
  last_error = message;
  return status;
}

// Runs `body`, turning what it throws into a status and the last error.
template <class Body>
attnpool_status Guard(const Body& body) {
  try {
    body();
    return ATTNPOOL_OK;
  } catch (const attnpool::Error& error) {
    const bool target = error.argument() == "target" ||
                        error.argument() == "ATTNPOOL_ISA" ||
                        error.argument() == "instruction";
    return Fail(
        target ? ATTNPOOL_UNSUPPORTED_TARGET : ATTNPOOL_INVALID_ARGUMENT,
        error.argument(), error.what());
  } catch (const attnpool::Cancelled& cancelled) {
    return Fail(ATTNPOOL_CANCELLED, "execution.progress", cancelled.what());
  } catch (const std::bad_alloc&) {
    return Fail(ATTNPOOL_OUT_OF_MEMORY, "", "attnpool: out of memory");
  } catch (const std::exception& error) {
    return Fail(ATTNPOOL_INTERNAL_ERROR, "",
                std::string("attnpool: internal error: ") + error.what());
  } catch (...) {
    return Fail(ATTNPOOL_INTERNAL_ERROR, "", "attnpool: internal error");
  }
}

// Arguments the C++ API cannot see: null struct pointers, invalid dtypes.
template <typename P>
P& Required(P* pointer, const char* argument) {
  if (pointer == nullptr) throw attnpool::Error(argument, "is a null pointer");
  return *pointer;
}

inline void CheckDtype(attnpool_dtype dtype) {
  if (dtype != ATTNPOOL_FLOAT32 && dtype != ATTNPOOL_FLOAT64) {
    throw attnpool::Error(
        "dtype", "invalid value " + std::to_string(static_cast<int>(dtype)) +
                     " (ATTNPOOL_FLOAT32 or ATTNPOOL_FLOAT64)");
  }
}

template <typename T>
attnpool::ConstMatrixView<T> View(const attnpool_const_matrix& m) {
  return {static_cast<const T*>(m.data), m.rows, m.cols,
          m.stride == 0 ? m.cols : m.stride};
}
template <typename T>
attnpool::MatrixView<T> View(const attnpool_matrix& m) {
  return {static_cast<T*>(m.data), m.rows, m.cols,
          m.stride == 0 ? m.cols : m.stride};
}

// The view of a required matrix argument, named `argument` when null.
template <typename T, typename CMatrix>
auto ViewOf(const CMatrix* matrix, const char* argument) {
  return View<T>(Required(matrix, argument));
}

// The C enums hold the C++ ones' values (the tables of distance.h,
// kernel.h and normalize.h).
#define ATTNPOOL_C_DISTANCE_MATCHES(name, c_name, ...)                 \
  static_assert(                                                       \
      static_cast<int>(attnpool::Distance::name) == ATTNPOOL_##c_name, \
      "attnpool_distance: ATTNPOOL_" #c_name " differs");
ATTNPOOL_DISTANCE_TABLE(ATTNPOOL_C_DISTANCE_MATCHES)
#undef ATTNPOOL_C_DISTANCE_MATCHES
#define ATTNPOOL_C_NORMALIZATION_MATCHES(name, c_name, ...)                 \
  static_assert(                                                            \
      static_cast<int>(attnpool::Normalization::name) == ATTNPOOL_##c_name, \
      "attnpool_normalization: ATTNPOOL_" #c_name " differs");
ATTNPOOL_NORMALIZATION_TABLE(ATTNPOOL_C_NORMALIZATION_MATCHES)
#undef ATTNPOOL_C_NORMALIZATION_MATCHES
#define ATTNPOOL_C_KERNEL_MATCHES(name, c_name, ...)                        \
  static_assert(                                                            \
      static_cast<int>(attnpool::Kernel::name) == ATTNPOOL_KERNEL_##c_name, \
      "attnpool_kernel: ATTNPOOL_KERNEL_" #c_name " differs");
ATTNPOOL_KERNEL_TABLE(ATTNPOOL_C_KERNEL_MATCHES)
#undef ATTNPOOL_C_KERNEL_MATCHES

inline attnpool::KernelSpec KernelSpecOf(const attnpool_kernel_spec& spec) {
  attnpool::KernelSpec result;
  result.kernel = static_cast<attnpool::Kernel>(spec.kernel);
  result.bandwidth = spec.bandwidth;
  if (spec.has_scale) result.scale = spec.scale;
  return result;
}

inline attnpool::PoolSpec PoolSpecOf(const attnpool_pool_spec& spec) {
  attnpool::PoolSpec result;
  result.distance = static_cast<attnpool::Distance>(spec.distance);
  result.kernel = KernelSpecOf(spec.kernel);
  result.normalization =
      static_cast<attnpool::Normalization>(spec.normalization);
  result.empty_rows = static_cast<attnpool::EmptyRows>(spec.empty_rows);
  return result;
}

// A scale argument: none when null.
inline std::optional<double> ScaleOf(const double* scale) {
  return scale != nullptr ? std::optional<double>(*scale) : std::nullopt;
}

// A tensor stride: `given`, or the dense value count · inner when 0.
inline size_t StrideOf(const std::string& name, size_t given, size_t count,
                       size_t inner) {
  if (given != 0) return given;
  size_t stride = 0;
  if (__builtin_mul_overflow(count, inner, &stride)) {
    throw attnpool::Error(name, "the dense stride overflows");
  }
  return stride;
}

// The C++ view of a C tensor, its zero strides made dense.
template <typename U, typename CTensor>
attnpool::TensorView<U> TensorOf(const std::string& name,
                                 const CTensor& tensor) {
  const size_t row_stride =
      tensor.row_stride != 0 ? tensor.row_stride : tensor.cols;
  const size_t head_stride = StrideOf(name + ".head_stride", tensor.head_stride,
                                      tensor.rows, row_stride);
  const size_t batch_stride = StrideOf(
      name + ".batch_stride", tensor.batch_stride, tensor.heads, head_stride);
  return {static_cast<U*>(tensor.data),
          tensor.batch,
          tensor.heads,
          tensor.rows,
          tensor.cols,
          batch_stride,
          head_stride,
          row_stride};
}

// The view of a required tensor argument, its errors named `argument`.
template <typename T>
attnpool::TensorView<const T> Tensor(const attnpool_const_tensor* tensor,
                                     const char* argument) {
  return TensorOf<const T>(argument, Required(tensor, argument));
}
template <typename T>
attnpool::TensorView<T> Tensor(const attnpool_tensor* tensor,
                               const char* argument) {
  return TensorOf<T>(argument, Required(tensor, argument));
}

// The tensors every attention layer takes, converted in argument order (the
// first null or overflowing one is the error).
template <typename T>
struct LayerTensors {
  attnpool::TensorView<const T> queries, keys, values;
  attnpool::TensorView<T> out;
};

template <typename T>
LayerTensors<T> LayerTensorsOf(const attnpool_const_tensor* queries,
                               const attnpool_const_tensor* keys,
                               const attnpool_const_tensor* values,
                               const attnpool_tensor* out) {
  return {Tensor<T>(queries, "queries"), Tensor<T>(keys, "keys"),
          Tensor<T>(values, "values"), Tensor<T>(out, "out")};
}

// A C mask struct as the library may read it: `struct_size` bytes of it
// (which must hold the size field and end on an 8-byte member: the structs
// have no padding), the fields past them absent, and no field set past
// those this library knows. A size past kMaxStructSize is no struct's (an
// uninitialized one, or a caller of ABI 1, whose masks had no size).
constexpr size_t kMaxStructSize = 4096;

// The bytes of the C masks' members, by kind: their sum is the struct's
// size, or a member was padded and a field added in the padding would not
// grow struct_size (attnpool_c.h).
#define ATTNPOOL_C_BYTES_lengths(s, name) sizeof(s::name)
#define ATTNPOOL_C_BYTES_flag(s, name) sizeof(s::name)
#define ATTNPOOL_C_BYTES_position(s, name) sizeof(s::name)
#define ATTNPOOL_C_BYTES_count(s, name) sizeof(s::has_##name) + sizeof(s::name)
#define ATTNPOOL_C_BYTES_matrix(s, name) sizeof(s::name)
#define ATTNPOOL_C_BYTES_booleans(s, name) sizeof(s::name)
#define ATTNPOOL_C_BYTES_number(s, name) ATTNPOOL_C_BYTES_count(s, name)
#define ATTNPOOL_C_BYTES_head_number(s, name) ATTNPOOL_C_BYTES_count(s, name)
#define ATTNPOOL_C_MASK_BYTES(name, heads_name, kind, needs, check, help) \
  +ATTNPOOL_C_BYTES_##kind(attnpool_mask, name)
#define ATTNPOOL_C_HEADS_BYTES_head_number(s, name) sizeof(s::name)
#define ATTNPOOL_C_HEADS_BYTES(name, heads_name, kind, needs, check, help) \
  +ATTNPOOL_C_HEADS_BYTES_PICK_##kind(attnpool_attention_mask, heads_name)
#define ATTNPOOL_C_HEADS_BYTES_PICK_lengths ATTNPOOL_C_BYTES_lengths
#define ATTNPOOL_C_HEADS_BYTES_PICK_flag ATTNPOOL_C_BYTES_flag
#define ATTNPOOL_C_HEADS_BYTES_PICK_position ATTNPOOL_C_BYTES_position
#define ATTNPOOL_C_HEADS_BYTES_PICK_count ATTNPOOL_C_BYTES_count
#define ATTNPOOL_C_HEADS_BYTES_PICK_matrix ATTNPOOL_C_BYTES_matrix
#define ATTNPOOL_C_HEADS_BYTES_PICK_booleans ATTNPOOL_C_BYTES_booleans
#define ATTNPOOL_C_HEADS_BYTES_PICK_number ATTNPOOL_C_BYTES_number
#define ATTNPOOL_C_HEADS_BYTES_PICK_head_number \
  ATTNPOOL_C_HEADS_BYTES_head_number
static_assert(sizeof(attnpool_mask) ==
                  sizeof(size_t) ATTNPOOL_MASK_FIELDS(ATTNPOOL_C_MASK_BYTES),
              "attnpool_mask has padding");
static_assert(sizeof(attnpool_attention_mask) ==
                  sizeof(size_t) +
                      sizeof(int64_t)
                          ATTNPOOL_MASK_FIELDS(ATTNPOOL_C_HEADS_BYTES),
              "attnpool_attention_mask has padding");
template <class CStruct>
CStruct SizedStruct(const CStruct* given, const char* name) {
  CStruct copy{};
  const size_t size = given->struct_size;
  const std::string argument = std::string(name) + ".struct_size";
  if (size < sizeof(size_t) || size > kMaxStructSize || size % 8 != 0) {
    throw attnpool::Error(argument, "is " + std::to_string(size) +
                                        ": initialize the struct with its "
                                        "_init function");
  }
  const auto* bytes = reinterpret_cast<const unsigned char*>(given);
  for (size_t k = sizeof(CStruct); k < size; ++k) {
    if (bytes[k] != 0) {
      throw attnpool::Error(argument, "is " + std::to_string(size) +
                                          ", and fields past "
                                          "the " +
                                          std::to_string(sizeof(CStruct)) +
                                          " bytes this library knows are set");
    }
  }
  std::memcpy(&copy, given, std::min(size, sizeof(CStruct)));
  copy.struct_size = sizeof(CStruct);
  return copy;
}

// An attnpool_execution (NULL: the defaults) as the C++ one (the callback
// types are one).
static_assert(
    std::is_same<attnpool_progress_callback, attnpool::ProgressCallback>::value,
    "attnpool_progress_callback differs");
static_assert(sizeof(attnpool_execution) ==
                  sizeof(size_t) + sizeof(int64_t) +
                      sizeof(attnpool_progress_callback) + sizeof(void*),
              "attnpool_execution has padding");
inline attnpool::Execution ExecutionOf(const attnpool_execution* execution) {
  attnpool::Execution result;
  if (execution == nullptr) return result;
  const auto given = SizedStruct(execution, "execution");
  if (given.threads < INT32_MIN || given.threads > INT32_MAX) {
    throw attnpool::Error(
        "execution.threads",
        "is " + std::to_string(given.threads) + ", past an int's range");
  }
  result.threads = static_cast<int>(given.threads);
  result.progress = given.progress;
  result.progress_context = given.progress_context;
  return result;
}

// A C count or number: its has_ flag and value.
template <typename U>
struct COptional {
  int64_t given;
  U value;
};

// The member of a C mask of each kind (attnpool_c.h), as its value.
#define ATTNPOOL_C_VALUE_lengths(c, name) c.name
#define ATTNPOOL_C_VALUE_flag(c, name) c.name
#define ATTNPOOL_C_VALUE_position(c, name) c.name
#define ATTNPOOL_C_VALUE_count(c, name) \
  COptional<size_t> { c.has_##name, c.name }
#define ATTNPOOL_C_VALUE_matrix(c, name) c.name
#define ATTNPOOL_C_VALUE_booleans(c, name) c.name
#define ATTNPOOL_C_VALUE_number(c, name) \
  COptional<double> { c.has_##name, c.name }
#define ATTNPOOL_C_VALUE_head_number(c, name) ATTNPOOL_C_VALUE_number(c, name)
#define ATTNPOOL_C_HEADS_VALUE_head_number(c, name) c.name

// A C value into the member of a Mask or AttentionMask, by its type.
inline void FromC(const char*, const size_t* value, const size_t*& member) {
  member = value;
}
inline void FromC(const char*, int64_t value, bool& member) {
  member = value != 0;
}
inline void FromC(const char*, ptrdiff_t value, std::ptrdiff_t& member) {
  member = value;
}
template <typename U, typename V>
void FromC(const char*, const COptional<U>& value, std::optional<V>& member) {
  if (value.given != 0) member = static_cast<V>(value.value);
}
template <typename U>
void FromC(const char*, const attnpool_const_matrix& value,
           attnpool::MatrixView<const U>& member) {
  if (value.data != nullptr || value.rows != 0) member = View<U>(value);
}
// A mask tensor: none when its data is null and its shape empty; null data
// with a shape is an error here (the C++ API reads null data as none).
template <typename U>
void FromC(const char* name, const attnpool_const_tensor& value,
           attnpool::TensorView<const U>& member) {
  if (value.data == nullptr) {
    if (value.batch != 0 && value.heads != 0 && value.rows != 0 &&
        value.cols != 0) {
      throw attnpool::Error(std::string(name) + ".data",
                            "is null but the tensor is not empty");
    }
    return;
  }
  member = TensorOf<const U>(name, value);
}
template <typename T>
void FromC(const char*, const void* value, const T*& member) {
  member = static_cast<const T*>(value);
}

// The Mask of a C mask (none: every key visible).
template <typename T>
attnpool::Mask<T> MaskOf(const attnpool_mask* mask) {
  attnpool::Mask<T> result;
  if (mask == nullptr) return result;
  const attnpool_mask c = SizedStruct(mask, "mask");
#define ATTNPOOL_FROM_C(name, heads_name, kind, needs, check, help) \
  FromC("mask." #name, ATTNPOOL_C_VALUE_##kind(c, name), result.name);
  ATTNPOOL_MASK_FIELDS(ATTNPOOL_FROM_C)
#undef ATTNPOOL_FROM_C
  return result;
}

// The per-kind values of the layers' mask: a value per head is a pointer.
#define ATTNPOOL_C_HEADS_VALUE_lengths ATTNPOOL_C_VALUE_lengths
#define ATTNPOOL_C_HEADS_VALUE_flag ATTNPOOL_C_VALUE_flag
#define ATTNPOOL_C_HEADS_VALUE_position ATTNPOOL_C_VALUE_position
#define ATTNPOOL_C_HEADS_VALUE_count ATTNPOOL_C_VALUE_count
#define ATTNPOOL_C_HEADS_VALUE_matrix ATTNPOOL_C_VALUE_matrix
#define ATTNPOOL_C_HEADS_VALUE_booleans ATTNPOOL_C_VALUE_booleans
#define ATTNPOOL_C_HEADS_VALUE_number ATTNPOOL_C_VALUE_number

template <typename T>
attnpool::AttentionMask<T> AttentionMaskOf(
    const attnpool_attention_mask* mask) {
  attnpool::AttentionMask<T> result;
  if (mask == nullptr) return result;
  const attnpool_attention_mask c = SizedStruct(mask, "mask");
  result.lengths_per_query = c.lengths_per_query != 0;
#define ATTNPOOL_FROM_C(name, heads_name, kind, needs, check, help)        \
  FromC("mask." #heads_name, ATTNPOOL_C_HEADS_VALUE_##kind(c, heads_name), \
        result.heads_name);
  ATTNPOOL_MASK_FIELDS(ATTNPOOL_FROM_C)
#undef ATTNPOOL_FROM_C
  return result;
}

template <typename T>
attnpool::PoolPartial<T> PartialOf(const attnpool_partial_state& partial) {
  attnpool::PoolPartial<T> result;
  result.accumulator = View<T>(partial.accumulator);
  result.max = static_cast<T*>(partial.max);
  result.sum = static_cast<T*>(partial.sum);
  result.best = partial.best;
  return result;
}

// The C++ weights of a layer (pointers of the call's dtype).
template <typename T>
attnpool::AdditiveWeights<T> WeightsOf(const attnpool_additive_weights& w) {
  attnpool::AdditiveWeights<T> result;
  result.w_q = View<T>(w.w_q);
  result.w_k = View<T>(w.w_k);
  result.w_v = static_cast<const T*>(w.w_v);
  return result;
}

template <typename T>
attnpool::MultiHeadWeights<T> WeightsOf(const attnpool_multi_head_weights& w) {
  attnpool::MultiHeadWeights<T> result;
  result.heads = w.heads;
  result.w_q = View<T>(w.w_q);
  result.w_k = View<T>(w.w_k);
  result.w_v = View<T>(w.w_v);
  result.w_o = View<T>(w.w_o);
  result.b_q = static_cast<const T*>(w.b_q);
  result.b_k = static_cast<const T*>(w.b_k);
  result.b_v = static_cast<const T*>(w.b_v);
  result.b_o = static_cast<const T*>(w.b_o);
  return result;
}

// The spec, queries, keys and values every pooling call takes, converted in
// argument order (the first null one is the error).
template <typename T>
struct PoolInputs {
  attnpool::PoolSpec spec;
  attnpool::ConstMatrixView<T> queries, keys, values;
};

template <typename T>
PoolInputs<T> PoolInputsOf(const attnpool_pool_spec* spec,
                           const attnpool_const_matrix* queries,
                           const attnpool_const_matrix* keys,
                           const attnpool_const_matrix* values) {
  return {PoolSpecOf(Required(spec, "spec")), ViewOf<T>(queries, "queries"),
          ViewOf<T>(keys, "keys"), ViewOf<T>(values, "values")};
}

// The spec of a call whose C++ API does not check its enums (merge, finish).
inline attnpool::PoolSpec CheckedPoolSpecOf(const attnpool_pool_spec* spec) {
  const auto& c_spec = Required(spec, "spec");
  const auto check = [](const char* name, int value, int count) {
    if (value < 0 || value >= count) {
      throw attnpool::Error(name, "invalid value " + std::to_string(value));
    }
  };
  check("spec.kernel.kernel", static_cast<int>(c_spec.kernel.kernel),
        attnpool::kKernelCount);
  check("spec.normalization", static_cast<int>(c_spec.normalization),
        attnpool::kNormalizationCount);
  return PoolSpecOf(c_spec);
}

// The empty-row policy of a call whose C++ API takes it unchecked.
inline void CheckEmptyRows(attnpool_empty_rows empty_rows) {
  if (empty_rows != ATTNPOOL_EMPTY_ROWS_NAN &&
      empty_rows != ATTNPOOL_EMPTY_ROWS_ZERO) {
    throw attnpool::Error(
        "empty_rows",
        "invalid value " + std::to_string(static_cast<int>(empty_rows)) +
            " (ATTNPOOL_EMPTY_ROWS_NAN or ATTNPOOL_EMPTY_ROWS_ZERO)");
  }
}

// `count` doubles at `data` (NULL only when count is 0), named `argument`.
inline std::vector<double> Doubles(const double* data, size_t count,
                                   const char* argument) {
  if (data == nullptr && count != 0) {
    throw attnpool::Error(argument, "is a null pointer");
  }
  return std::vector<double>(data, data + count);
}

// `error` with the C++ argument `from` at the start of its argument renamed
// to the C call's `to` ("in.scales" → "scales"), its message kept; any
// other error as it is.
inline attnpool::Error Renamed(const attnpool::Error& error,
                               const std::string& from, const std::string& to) {
  const std::string& argument = error.argument();
  if (argument.compare(0, from.size(), from) != 0) return error;
  const std::string what = error.what();
  const std::string prefix = "attnpool: " + argument + ": ";
  return attnpool::Error(
      to + argument.substr(from.size()),
      what.rfind(prefix, 0) == 0 ? what.substr(prefix.size()) : what);
}

// A Nadaraya-Watson regressor of the C call: one bandwidth or one per
// column of x; the C++ errors on "bandwidth" renamed to the C argument.
template <typename T>
attnpool::NadarayaWatson<T> FitNadarayaWatson(attnpool_kernel kernel,
                                              const double* bandwidths,
                                              size_t bandwidth_count,
                                              const attnpool_const_matrix& x,
                                              const attnpool_const_matrix& y) {
  const auto h = Doubles(bandwidths, bandwidth_count, "bandwidths");
  if (bandwidth_count != 1 && bandwidth_count != x.cols) {
    throw attnpool::Error("bandwidth_count",
                          "is " + std::to_string(bandwidth_count) +
                              " but must be 1 (one bandwidth) or x.cols (" +
                              std::to_string(x.cols) + ", one per dimension)");
  }
  const auto cpp_kernel = static_cast<attnpool::Kernel>(kernel);
  try {
    return bandwidth_count == 1 ? attnpool::NadarayaWatson<T>(
                                      cpp_kernel, h[0], View<T>(x), View<T>(y))
                                : attnpool::NadarayaWatson<T>(
                                      cpp_kernel, h, View<T>(x), View<T>(y));
  } catch (const attnpool::Error& error) {
    if (error.argument() != "bandwidth") throw;
    throw Renamed(error, "bandwidth", "bandwidths");
  }
}

// Calls body.template operator()<T>() with T = float or double.
template <class Body>
attnpool_status Typed(attnpool_dtype dtype, const Body& body) {
  return Guard([&] {
    CheckDtype(dtype);
    if (dtype == ATTNPOOL_FLOAT32) {
      body(float{});
    } else {
      body(double{});
    }
  });
}

// An attention layer with weights: the weights, then the tensors (in
// argument order), then layer(weights, queries, keys, values, out, mask,
// empty_rows, execution) with the C++ types.
template <class CWeights, class Layer>
attnpool_status WeightedLayer(
    attnpool_dtype dtype, const CWeights* weights,
    const attnpool_const_tensor* queries, const attnpool_const_tensor* keys,
    const attnpool_const_tensor* values, const attnpool_tensor* out,
    const attnpool_attention_mask* mask, attnpool_empty_rows empty_rows,
    const attnpool_execution* execution, const Layer& layer) {
  return Typed(dtype, [&](auto zero) {
    using T = decltype(zero);
    const auto cpp_weights = WeightsOf<T>(Required(weights, "weights"));
    const auto t = LayerTensorsOf<T>(queries, keys, values, out);
    layer(cpp_weights, t.queries, t.keys, t.values, t.out,
          AttentionMaskOf<T>(mask),
          static_cast<attnpool::EmptyRows>(empty_rows), ExecutionOf(execution));
  });
}

// The name of a C enum value by its C++ name function; NULL when invalid.
template <typename CppEnum, typename CEnum>
const char* NameOrNull(const char* (*name)(CppEnum), CEnum value) {
  try {
    return name(static_cast<CppEnum>(value));
  } catch (const attnpool::Error&) {
    return nullptr;
  }
}

// Stores the value of `name` by its C++ function at the C enum argument
// `result`, named `argument`.
template <typename CEnum, typename CppEnum>
attnpool_status FromName(CppEnum (*from_name)(const char*), const char* name,
                         CEnum* result, const char* argument) {
  return Guard([&] {
    auto& value = Required(result, argument);
    value = static_cast<CEnum>(from_name(name));
  });
}

inline std::string Join(const std::vector<std::string>& names) {
  std::string text;
  for (const auto& name : names) text += (text.empty() ? "" : " ") + name;
  return text;
}

// What `text` returns; "" when it throws, its error then the thread's last
// error (as Guard records it).
template <class Text>
std::string TextOrEmpty(const Text& text) {
  std::string result;
  Guard([&] { result = text(); });
  return result;
}

// A list of target names, space-separated; "" on error.
inline std::string JoinedOrEmpty(std::vector<std::string> (*targets)()) {
  return TextOrEmpty([&] { return Join(targets()); });
}

// The string of a name function, kept in thread-local storage; "" on error.
template <class Text>
const char* ThreadLocalText(std::string& storage, const Text& text) {
  storage = TextOrEmpty(text);
  return storage.c_str();
}

// Forces what `name` names through `force` (force_target and its kin):
// a null name is refused by name.
inline attnpool_status ForceNamed(const char* name,
                                  void (*force)(const std::string&)) {
  return Guard([&] {
    if (name == nullptr) throw attnpool::Error("name", "is a null pointer");
    force(name);
  });
}

}  // namespace attnpool_c_api
