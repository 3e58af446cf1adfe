// The plain path of the package's hottest calls: arguments that need no
// conversion — NumPy float32 or float64 arrays read in place, Python
// numbers, strings, True, False and None — read straight from the
// interpreter's objects, so that a small call costs what the library does.
// Anything else (another array type, a copy or conversion the package would
// make, a value outside its range, an unknown keyword) makes the binding
// return NotImplemented, and the package takes its converting path, which
// ends in the same library call: both paths give the same results, and
// every error is worded by one of them.
#pragma once

#include <Python.h>
#include <attnpool/attnpool.h>
#include <nanobind/nanobind.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string_view>
#include <type_traits>
#include <vector>

#include "python/src/arguments.h"

namespace attnpool_python {

// numpy.ndarray, numpy.empty and the dtypes float32 and float64, held for
// the interpreter's life from the first plain call (not at import: the
// type stubs are generated where NumPy is not installed).
struct NumPyObjects {
  PyTypeObject* ndarray = nullptr;
  PyTypeObject* float64_scalar = nullptr;  // numpy.float64
  PyObject* empty = nullptr;
  PyObject* float32 = nullptr;
  PyObject* float64 = nullptr;
};
inline NumPyObjects g_numpy;

// Whether g_numpy is set (with the GIL held).
inline bool NumPyReady() {
  if (g_numpy.ndarray != nullptr) return true;
  try {
    const nb::module_ numpy = nb::module_::import_("numpy");
    nb::object ndarray = numpy.attr("ndarray"), scalar = numpy.attr("float64"),
               empty = numpy.attr("empty"),
               float32 = numpy.attr("dtype")("float32"),
               float64 = numpy.attr("dtype")("float64");
    // (Set once, all or none: another thread may have set them meanwhile,
    // the import having let go of the GIL.)
    if (g_numpy.ndarray != nullptr) return true;
    g_numpy.float64_scalar =
        reinterpret_cast<PyTypeObject*>(scalar.release().ptr());
    g_numpy.empty = empty.release().ptr();
    g_numpy.float32 = float32.release().ptr();
    g_numpy.float64 = float64.release().ptr();
    g_numpy.ndarray = reinterpret_cast<PyTypeObject*>(ndarray.release().ptr());
  } catch (const nb::python_error&) {
    return false;  // (the package's path then says why)
  }
  return true;
}

// Calls the plain path ran, since the module was loaded: the tests check
// which path a call took.
inline std::atomic<size_t> g_plain_calls{0};

// A NumPy array's buffer, held (and released with the GIL held: the
// destructor) while the library reads or writes it.
class HeldArray {
 public:
  HeldArray() = default;
  HeldArray(const HeldArray&) = delete;
  HeldArray& operator=(const HeldArray&) = delete;
  ~HeldArray() {
    if (view_.obj != nullptr) PyBuffer_Release(&view_);
  }

  // Takes `object` if it is a numpy.ndarray (not a subclass: those may
  // give their buffers other meanings) of Rank dimensions, none empty,
  // native float32 or float64 elements at aligned addresses, rows
  // contiguous and not overlapping; writable where asked.
  template <size_t Rank>
  bool Take(PyObject* object, bool writable) {
    if (!NumPyReady() || Py_TYPE(object) != g_numpy.ndarray) return false;
    if (PyObject_GetBuffer(object, &view_,
                           writable ? PyBUF_RECORDS : PyBUF_RECORDS_RO) != 0) {
      PyErr_Clear();
      return false;
    }
    std::string_view format = view_.format ? view_.format : "B";
    if (!format.empty() && (format[0] == '@' || format[0] == '=' ||
                            (format[0] == '<' && PY_LITTLE_ENDIAN))) {
      format.remove_prefix(1);
    }
    const Py_ssize_t size = view_.itemsize;
    if (!((format == "f" && size == 4) || (format == "d" && size == 8)) ||
        view_.ndim != Py_ssize_t(Rank) ||
        reinterpret_cast<uintptr_t>(view_.buf) % size != 0) {
      return false;
    }
    for (size_t k = 0; k < Rank; ++k) {
      if (view_.shape[k] == 0 || view_.strides[k] < 0 ||
          view_.strides[k] % size != 0) {
        return false;
      }
    }
    // As arrays.h's InPlaceStrides: rows contiguous, and not overlapping
    // (the package copies a broadcast row axis).
    const Py_ssize_t last = view_.shape[Rank - 1];
    if (last > 1 && view_.strides[Rank - 1] != size) return false;
    return Rank < 2 || view_.shape[Rank - 2] <= 1 ||
           view_.strides[Rank - 2] >= last * size;
  }

  bool is_double() const { return view_.itemsize == 8; }
  size_t shape(size_t k) const { return size_t(view_.shape[k]); }
  // Elements between entries of axis k.
  size_t stride(size_t k) const {
    return size_t(view_.strides[k] / view_.itemsize);
  }

  template <typename T>
  attnpool::MatrixView<T> matrix() const {
    return {static_cast<T*>(view_.buf), shape(0), shape(1), stride(0)};
  }
  template <typename T>
  attnpool::TensorView<T> tensor() const {
    return {static_cast<T*>(view_.buf),
            shape(0),
            shape(1),
            shape(2),
            shape(3),
            stride(0),
            stride(1),
            stride(2)};
  }

 private:
  Py_buffer view_{};
};

// Python numbers as the package converts them (float(x)), where no
// conversion is needed: exact ints, floats and NumPy's float64 (not other
// float subclasses, whose __float__ may say otherwise).
inline std::optional<double> PlainDouble(PyObject* object) {
  if (PyFloat_CheckExact(object) ||
      (NumPyReady() && Py_TYPE(object) == g_numpy.float64_scalar)) {
    return PyFloat_AS_DOUBLE(object);
  }
  if (PyLong_CheckExact(object)) {
    const double value = PyLong_AsDouble(object);
    if (value == -1.0 && PyErr_Occurred()) {
      PyErr_Clear();
      return std::nullopt;
    }
    return value;
  }
  return std::nullopt;
}
inline std::optional<int64_t> PlainInteger(PyObject* object, int64_t low,
                                           int64_t high) {
  if (!PyLong_CheckExact(object)) return std::nullopt;
  int overflow = 0;
  const long long value = PyLong_AsLongLongAndOverflow(object, &overflow);
  if (overflow != 0 || (value == -1 && PyErr_Occurred())) {
    PyErr_Clear();
    return std::nullopt;
  }
  if (value < low || value > high) return std::nullopt;
  return value;
}
inline std::optional<std::string_view> PlainString(PyObject* object) {
  if (!PyUnicode_CheckExact(object)) return std::nullopt;
  Py_ssize_t size = 0;
  const char* text = PyUnicode_AsUTF8AndSize(object, &size);
  if (text == nullptr) {
    PyErr_Clear();
    return std::nullopt;
  }
  return std::string_view(text, size_t(size));
}
// `threads` (None: 0, the OpenMP default).
inline std::optional<int> PlainThreads(PyObject* object) {
  if (object == Py_None) return 0;
  const auto threads = PlainInteger(object, 0, std::numeric_limits<int>::max());
  if (!threads) return std::nullopt;
  return int(*threads);
}

// A mask given as keywords (a Mask's by the fields' `name`s, an
// AttentionMask's by their `heads_name`s) whose fields are all flags (True
// or False), positions, counts and numbers (Python numbers; on matrices, a
// head_number field's one number too): the fields that hold no array. None
// values are absent fields.
template <class MaskT>
bool PlainMask(PyObject* keywords, MaskT& mask) {
  constexpr bool kHeads = attnpool::IsAttentionMask<MaskT>::value;
  if (!PyDict_CheckExact(keywords)) return false;
  const Py_ssize_t given = PyDict_GET_SIZE(keywords);
  if (given == 0) return true;
  // The keywords' names, interned once (their hashes kept).
  static const std::vector<PyObject*> names = [] {
    std::vector<PyObject*> interned;
    attnpool::VisitMaskFields([&](auto field) {
      interned.push_back(
          PyUnicode_InternFromString(kHeads ? field.heads_name : field.name));
    });
    return interned;
  }();
  Py_ssize_t matched = 0;
  size_t index = 0;
  bool plain = true;
  attnpool::VisitMask(mask, [&](auto field, auto& member) {
    using Kind = typename decltype(field)::Kind;
    namespace kind = attnpool::mask_kind;
    PyObject* const name = names[index++];
    PyObject* item = name != nullptr ? PyDict_GetItem(keywords, name) : nullptr;
    if (item == nullptr || !plain) return;
    ++matched;
    if (item == Py_None) return;
    if constexpr (std::is_same_v<Kind, kind::flag>) {
      plain = item == Py_True || item == Py_False;
      member = item == Py_True;
    } else if constexpr (std::is_same_v<Kind, kind::position>) {
      const auto number = PlainInteger(item, INT64_MIN, INT64_MAX);
      plain = number.has_value();
      if (plain) member = std::ptrdiff_t(*number);
    } else if constexpr (std::is_same_v<Kind, kind::count>) {
      const auto number = PlainInteger(item, 0, INT64_MAX);
      plain = number.has_value();
      if (plain) member = size_t(*number);
    } else if constexpr (std::is_same_v<Kind, kind::number> ||
                         (std::is_same_v<Kind, kind::head_number> && !kHeads)) {
      using Value = typename std::decay_t<decltype(member)>::value_type;
      const auto number = PlainDouble(item);
      plain = number.has_value();
      if (plain) member = Value(*number);
    } else {
      plain = false;
    }
  });
  // (A keyword no field has, even None: the package's TypeError.)
  return plain && matched == given;
}

// The library's spec of the pooling functions from their plain options.
inline std::optional<attnpool::PoolSpec> PlainPoolSpec(
    PyObject* distance, PyObject* kernel, PyObject* bandwidth, PyObject* scale,
    PyObject* normalize, PyObject* empty_rows) {
  const auto distance_name = PlainString(distance);
  const auto kernel_name = PlainString(kernel);
  const auto normalize_name = PlainString(normalize);
  const auto empty_name = PlainString(empty_rows);
  const auto width = PlainDouble(bandwidth);
  std::optional<double> exp_scale;
  if (scale != Py_None) {
    exp_scale = PlainDouble(scale);
    if (!exp_scale) return std::nullopt;
  }
  if (!distance_name || !kernel_name || !normalize_name || !empty_name ||
      !width) {
    return std::nullopt;
  }
  try {
    return PoolSpecOf({std::string(*distance_name), std::string(*kernel_name),
                       *width, exp_scale, std::string(*normalize_name),
                       std::string(*empty_name)});
  } catch (const std::exception&) {
    return std::nullopt;  // (an unknown name: the package's path words it)
  }
}

// A new NumPy array of `shape` (no axis empty) and float32 or float64
// elements, taken into `held` for writing.
template <size_t Rank>
nb::object NewArray(const std::array<size_t, Rank>& shape, bool is_double,
                    HeldArray& held) {
  PyObject* dimensions = PyTuple_New(Rank);
  if (dimensions == nullptr) throw nb::python_error();
  for (size_t k = 0; k < Rank; ++k) {
    PyObject* size = PyLong_FromSize_t(shape[k]);
    if (size == nullptr) {
      Py_DECREF(dimensions);
      throw nb::python_error();
    }
    PyTuple_SET_ITEM(dimensions, k, size);
  }
  PyObject* arguments[] = {dimensions,
                           is_double ? g_numpy.float64 : g_numpy.float32};
  nb::object array =
      nb::steal(PyObject_Vectorcall(g_numpy.empty, arguments, 2, nullptr));
  Py_DECREF(dimensions);
  if (!array.is_valid()) throw nb::python_error();
  if (!held.Take<Rank>(array.ptr(), true)) {
    throw nb::type_error("numpy.empty gave no writable float array");
  }
  return array;
}

// `out` (None: a new array) as the result of `shape`, taken into `held`
// for writing; an invalid object where it is not plain (the package's
// path then refuses it or writes it).
template <size_t Rank>
nb::object PlainOut(nb::handle out, const std::array<size_t, Rank>& shape,
                    bool is_double, HeldArray& held) {
  if (out.is_none()) return NewArray<Rank>(shape, is_double, held);
  if (!held.Take<Rank>(out.ptr(), true) || held.is_double() != is_double) {
    return {};
  }
  for (size_t k = 0; k < Rank; ++k) {
    if (held.shape(k) != shape[k]) return {};
  }
  return nb::borrow(out);
}

}  // namespace attnpool_python
