// The command line's input and output arrays: .npy files read for an
// option, checked (dtype, shape, agreement with the other inputs), seen as
// the library's views, and written.
#pragma once

#include <attnpool/attnpool.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "tools/cli/options.h"
#include "tools/npy.h"

namespace attnpool_cli {

using attnpool_tools::NpyArray;
using attnpool_tools::NpyError;
using attnpool_tools::NpyType;
using attnpool_tools::NpyTypeName;
using attnpool_tools::ShapeText;

// A 1-D or 2-D float array from a file, seen as a matrix.
struct InputMatrix {
  std::string option, path;
  NpyArray array;
  size_t rows = 0, cols = 0;
  bool one_dimensional = false;

  std::string Label() const { return option + " " + path; }
  std::string Describe() const {
    return Label() + " (shape " + ShapeText(array.shape) + ")";
  }
};

NpyArray Load(const std::string& option, const std::string& path);

void RequireFloat(const std::string& label, const NpyArray& array);

InputMatrix LoadMatrix(const std::string& option, const std::string& path);
// The same for an array of any dtype (keys and values may be narrow).
InputMatrix LoadAnyMatrix(const std::string& option, const std::string& path);
// Part `part` of `parts` of the rows of the array in `path`, read alone
// (npy.h, ReadNpyRows; `range` says which rows of how many), any dtype.
InputMatrix LoadMatrixPart(const std::string& option, const std::string& path,
                           size_t part, size_t parts,
                           attnpool_tools::NpyRowRange* range);
// `array` (1-D or 2-D) seen as a matrix.
InputMatrix MatrixOf(const std::string& option, const std::string& path,
                     NpyArray array);

// The matrix of the required option `option` (RequireOptions has checked it
// is given).
InputMatrix LoadMatrix(const Arguments& arguments, const std::string& option);

// The array of `label`, of dtype `type`, has the dtype of `reference` (an
// InputMatrix or InputTensor, as are the inputs below).
template <class Reference>
void RequireTypeOf(const Reference& reference, const std::string& label,
                   NpyType type) {
  if (type != reference.array.type) {
    throw CliError{label + " is " + NpyTypeName(type) + " but " +
                   reference.Label() + " is " +
                   NpyTypeName(reference.array.type) +
                   ": all arrays of a call must have one dtype (convert with "
                   "a.astype(...))"};
  }
}

template <class Reference, class Other>
void RequireSameType(const Reference& reference, const Other& other) {
  RequireTypeOf(reference, other.Label(), other.array.type);
}

// A command's input matrix: the required option that names its file, and
// where it goes.
struct MatrixInput {
  const char* option;
  InputMatrix* matrix;
};

// Reads the matrices of `inputs` in order, then checks that each has the
// dtype of the first.
void LoadMatrices(const Arguments& arguments,
                  std::initializer_list<MatrixInput> inputs);

template <class Input>
void RequireExtent(const Input& matrix, const char* what, size_t actual,
                   size_t expected, const std::string& because) {
  if (actual != expected) {
    throw CliError{matrix.Describe() + " has " + std::to_string(actual) + " " +
                   what + ", expected " + std::to_string(expected) + " " +
                   because};
  }
}

// `input` has as many `what` (`count` of them) as `reference` has columns.
template <class Reference, class Input>
void RequireColumnsOf(const Reference& reference, const Input& input,
                      const char* what, size_t count) {
  RequireExtent(input, what, count, reference.cols,
                "(the columns of " + reference.Describe() + ")");
}

template <class Reference, class Input>
void RequireSameColumns(const Reference& reference, const Input& input) {
  RequireColumnsOf(reference, input, "columns", input.cols);
}

// `values` has a row per key.
template <class Input>
void RequireRowPerKey(const Input& keys, const Input& values) {
  RequireExtent(values, "rows", values.rows, keys.rows,
                "(one per key: the rows of " + keys.Describe() + ")");
}

// `matrix` has the shape `shape`, as `why` says.
void RequireShape(const InputMatrix& matrix, const std::vector<size_t>& shape,
                  const std::string& why);

// `array`, read for `label`, has the shape `shape`, as `why` says.
void RequireArrayShape(const std::string& label, const NpyArray& array,
                       const std::vector<size_t>& shape,
                       const std::string& why);

// Keys or values in a reduced-precision element type (element.h), the
// file's dtype saying which: '<f2' float16, '|i1' int8 (with a float32
// scales file, one per row), '<u2' bfloat16 bit patterns (said with the
// dtype option, e.g. --keys-dtype bfloat16); '<f4' float32 beside a narrow
// other.
struct StoredElements {
  attnpool::ElementType type = attnpool::ElementType::float32;
  NpyArray scales;  // int8: the row scales
};

// Whether `array` holds keys or values stored narrow.
bool IsNarrow(const NpyArray& array);

// The element type of `array` (read for `label`, the input of `option`),
// checked against `dtype_option`, and int8's scales from `scales_option`,
// of shape `rows_shape` (the array's shape without its last axis). With
// parts > 1, `array` is part `part` of its file's rows (LoadMatrixPart),
// and the scales are read likewise.
StoredElements ReadStoredElements(
    const Arguments& arguments, const std::string& label,
    const std::string& option, const NpyArray& array,
    const std::vector<size_t>& rows_shape, const std::string& dtype_option,
    const std::string& scales_option, size_t part = 0, size_t parts = 1);

// Queries, keys or values stored in a reduced-precision element type (a
// StoredElements), as the library's rows.
attnpool::ElementRows ElementRowsOf(const InputMatrix& matrix,
                                    const StoredElements& elements);

// Rows [begin, begin + count) of `rows` (with their scales).
attnpool::ElementRows ElementRowsSlice(attnpool::ElementRows rows, size_t begin,
                                       size_t count);

// --visible: a bool or uint8 array.
NpyArray LoadVisible(const std::string& path);

// The entries of an integer array of valid lengths (or offsets), each in
// [0, key_count]; `limit` names that bound in errors.
std::vector<size_t> LengthEntries(
    const std::string& label, const NpyArray& array, size_t key_count,
    const std::string& limit = "the number of keys");

// A result array for the output option `option` (e.g. "-o"): a shape past
// what memory holds is that option's error.
NpyArray MakeResult(const std::string& option, NpyType type,
                    const std::vector<size_t>& shape);

// ---------------------------------------------------------------- views

template <typename T>
attnpool::ConstMatrixView<T> View(const InputMatrix& matrix) {
  return {matrix.array.data<T>(), matrix.rows, matrix.cols};
}

template <typename T>
attnpool::ConstMatrixView<T> Rows(attnpool::ConstMatrixView<T> view,
                                  size_t begin, size_t count) {
  return {view.row(begin), count, view.cols, view.stride};
}
template <typename T>
attnpool::MatrixView<T> Rows(attnpool::MatrixView<T> view, size_t begin,
                             size_t count) {
  return {view.row(begin), count, view.cols, view.stride};
}

// Rows [begin, begin + count) of a 1-D or 2-D array, as a matrix.
template <typename T>
attnpool::MatrixView<T> MatrixRows(NpyArray& array, size_t begin,
                                   size_t count) {
  const size_t cols = array.shape.size() == 2 ? array.shape[1] : 1;
  return {array.mutable_data<T>() + begin * cols, count, cols};
}

}  // namespace attnpool_cli
