// NumPy arrays (any object exporting DLPack or the buffer protocol) as the
// library's views. Inputs are read in place when their rows are contiguous
// (unit stride along the last axis, non-negative strides elsewhere) and
// copied once otherwise; outputs must be writable with contiguous rows.
// Wrong dtypes raise TypeError, wrong shapes ValueError, both naming the
// argument.
#pragma once

#include <attnpool/attention.h>
#include <attnpool/matrix.h>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace attnpool_python {

namespace nb = nanobind;

// Inputs may be read-only; outputs are writable (nanobind refuses a
// read-only array for them).
using InArray = nb::ndarray<nb::ro, nb::device::cpu>;
using OutArray = nb::ndarray<nb::device::cpu>;

// Inputs copied because their rows were not contiguous, since the module
// was loaded: the tests check that contiguous inputs are never copied.
inline std::atomic<size_t> g_input_copies{0};

[[noreturn]] inline void ThrowType(const std::string& name,
                                   const std::string& message) {
  throw nb::type_error((name + ": " + message).c_str());
}
[[noreturn]] inline void ThrowValue(const std::string& name,
                                    const std::string& message) {
  throw nb::value_error((name + ": " + message).c_str());
}

// The library's element types.
enum class Dtype { float32, float64 };

// NumPy's name of `dtype` for the common codes (DLPack's list is open-ended:
// no switch over it).
inline std::string DtypeName(const nb::dlpack::dtype& dtype) {
  using Code = nb::dlpack::dtype_code;
  const std::string bits = std::to_string(dtype.bits);
  const auto code = static_cast<Code>(dtype.code);
  if (code == Code::Int) return "int" + bits;
  if (code == Code::UInt) return "uint" + bits;
  if (code == Code::Float) return "float" + bits;
  if (code == Code::Bool) return "bool";
  if (code == Code::Complex) return "complex" + bits;
  return "code " + std::to_string(dtype.code) + " of " + bits + " bits";
}

template <class Array>
Dtype FloatDtypeOf(const std::string& name, const Array& array) {
  if (array.dtype() == nb::dtype<float>()) return Dtype::float32;
  if (array.dtype() == nb::dtype<double>()) return Dtype::float64;
  ThrowType(name, "dtype " + DtypeName(array.dtype()) +
                      " is not supported (float32 or float64)");
}

template <typename T>
const char* DtypeName() {
  return sizeof(T) == 4 ? "float32" : "float64";
}

// `array` has element type T: the type of the call, set by its first array.
template <typename T, class Array>
void RequireDtype(const std::string& name, const Array& array,
                  const char* first_name) {
  if (array.dtype() != nb::dtype<T>()) {
    ThrowType(name, "dtype " + DtypeName(array.dtype()) + ", but " +
                        first_name + " is " + DtypeName<T>() +
                        " (every array of a call has one dtype)");
  }
}

template <class Array>
void RequireDimensions(const std::string& name, const Array& array,
                       size_t ndim) {
  if (array.ndim() != ndim) {
    ThrowValue(name, "has " + std::to_string(array.ndim()) +
                         " dimensions, expected " + std::to_string(ndim));
  }
}

// The element strides of the first `ndim` − 1 axes when the array can be read
// in place: last axis unit-strided (or of at most one element), the others
// non-negative, and rows that do not overlap (a row stride of at least the
// row's length: a broadcast input, stride 0, is copied). An array with no
// element gets dense strides (NumPy 2 reports 0 for them). None otherwise
// (a 1-D array, with no strides to return, is in place only when
// contiguous).
template <class Array>
std::optional<std::vector<size_t>> InPlaceStrides(const Array& array) {
  const size_t ndim = array.ndim();
  if (ndim == 0) return std::nullopt;
  std::vector<size_t> strides(ndim - 1);
  bool empty = false;
  for (size_t k = 0; k < ndim; ++k) empty |= array.shape(k) == 0;
  if (empty) {
    size_t stride = 1;
    for (size_t k = ndim - 1; k-- > 0;) {
      stride *= std::max<size_t>(array.shape(k + 1), 1);
      strides[k] = stride;
    }
    return strides;
  }
  if (array.shape(ndim - 1) > 1 && array.stride(ndim - 1) != 1) {
    return std::nullopt;
  }
  for (size_t k = 0; k + 1 < ndim; ++k) {
    if (array.stride(k) < 0) return std::nullopt;
    strides[k] = static_cast<size_t>(array.stride(k));
  }
  if (ndim >= 2 && array.shape(ndim - 2) > 1 &&
      strides[ndim - 2] < array.shape(ndim - 1)) {
    return std::nullopt;
  }
  return strides;
}

// A strided array of `Rank` dimensions (2: a matrix; 4: a (batch, heads,
// rows, cols) tensor; 1: a vector) whose last axis is contiguous, as the
// library's views. E: T or const T.
template <typename E, size_t Rank>
class StridedView {
 public:
  size_t shape(size_t k) const { return shape_[k]; }
  // Elements between entries of axis k < Rank − 1 (the last axis: 1).
  size_t stride(size_t k) const { return strides_[k]; }
  E* data() const { return data_; }

  attnpool::MatrixView<E> matrix() const {
    static_assert(Rank == 2);
    return {data_, shape_[0], shape_[1], strides_[0]};
  }
  attnpool::TensorView<E> tensor() const {
    static_assert(Rank == 4);
    return {data_,     shape_[0],   shape_[1],   shape_[2],
            shape_[3], strides_[0], strides_[1], strides_[2]};
  }
  // The matrix (Rank 2) or tensor (Rank 4) view.
  auto view() const {
    if constexpr (Rank == 2) {
      return matrix();
    } else {
      return tensor();
    }
  }

 protected:
  E* data_ = nullptr;
  size_t shape_[Rank] = {};
  size_t strides_[Rank > 1 ? Rank - 1 : 1] = {};  // elements; last axis: 1
};

// A read-only input, in place when its rows are contiguous, else copied
// once to a dense array.
template <typename T, size_t Rank>
class Input : public StridedView<const T, Rank> {
 public:
  // Also checks that the dtype is T, that of the call's `first_name`.
  Input(const std::string& name, const InArray& array, const char* first_name)
      : Input(name, (RequireDtype<T>(name, array, first_name), array)) {}

  Input(const std::string& name, const InArray& array) {
    RequireDimensions(name, array, Rank);
    for (size_t k = 0; k < Rank; ++k) this->shape_[k] = array.shape(k);
    const T* data = static_cast<const T*>(array.data());
    if (const auto strides = InPlaceStrides(array)) {
      this->data_ = data;
      for (size_t k = 0; k + 1 < Rank; ++k) this->strides_[k] = (*strides)[k];
      return;
    }
    ++g_input_copies;
    size_t count = 1;
    for (size_t k = 0; k < Rank; ++k) count *= this->shape_[k];
    copy_.resize(count);
    size_t index[Rank] = {};
    for (size_t i = 0; i < count; ++i) {
      int64_t offset = 0;
      for (size_t k = 0; k < Rank; ++k) {
        offset += int64_t(index[k]) * array.stride(k);
      }
      copy_[i] = data[offset];
      for (size_t k = Rank; k-- > 0;) {
        if (++index[k] < this->shape_[k]) break;
        index[k] = 0;
      }
    }
    this->data_ = copy_.data();
    size_t stride = 1;
    for (size_t k = Rank - 1; k-- > 0;) {
      stride *= this->shape_[k + 1];
      this->strides_[k] = stride;
    }
  }

  Input(const Input&) = delete;  // data_ may point into copy_
  Input& operator=(const Input&) = delete;

 private:
  std::vector<T> copy_;
};

// A writable output of the expected `shape` and element type T, rows
// contiguous (written in place: never copied).
template <typename T, size_t Rank>
class Output : public StridedView<T, Rank> {
 public:
  Output(const std::string& name, const OutArray& array,
         const std::array<size_t, Rank>& shape, const char* first_name) {
    RequireDtype<T>(name, array, first_name);
    RequireDimensions(name, array, Rank);
    for (size_t k = 0; k < Rank; ++k) {
      if (array.shape(k) != shape[k]) {
        std::string want = "(";
        for (size_t j = 0; j < Rank; ++j) {
          want += (j ? ", " : "") + std::to_string(shape[j]);
        }
        ThrowValue(name, "axis " + std::to_string(k) + " has " +
                             std::to_string(array.shape(k)) +
                             " entries; the result's shape is " + want + ")");
      }
    }
    const auto strides = InPlaceStrides(array);
    if (!strides) {
      ThrowValue(name,
                 "its rows must be contiguous (unit stride along the "
                 "last axis, non-negative strides)");
    }
    this->data_ = static_cast<T*>(array.data());
    for (size_t k = 0; k < Rank; ++k) this->shape_[k] = shape[k];
    for (size_t k = 0; k + 1 < Rank; ++k) this->strides_[k] = (*strides)[k];
  }
};

}  // namespace attnpool_python
