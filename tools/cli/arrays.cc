#include "tools/cli/arrays.h"

#include <cstdio>
#include <utility>

namespace attnpool_cli {

NpyArray Load(const std::string& option, const std::string& path) {
  try {
    NpyArray array = attnpool_tools::ReadNpy(path);
    attnpool_tools::RememberInput(path, option + " " + path);
    return array;
  } catch (const NpyError& error) {
    throw CliError{option + " " + path + ": " + error.what()};
  }
}

void RequireFloat(const std::string& label, const NpyArray& array) {
  if (array.type != NpyType::float32 && array.type != NpyType::float64) {
    throw CliError{label + ": dtype " + NpyTypeName(array.type) +
                   " is not supported: use float32 or float64 (e.g. "
                   "a.astype(np.float32))"};
  }
}

InputMatrix LoadMatrix(const std::string& option, const std::string& path) {
  InputMatrix matrix = LoadAnyMatrix(option, path);
  RequireFloat(matrix.Label(), matrix.array);
  return matrix;
}

InputMatrix LoadAnyMatrix(const std::string& option, const std::string& path) {
  return MatrixOf(option, path, Load(option, path));
}

InputMatrix LoadMatrixPart(const std::string& option, const std::string& path,
                           size_t part, size_t parts,
                           attnpool_tools::NpyRowRange* range) {
  try {
    NpyArray array = attnpool_tools::MapNpyRows(path, part, parts, range);
    attnpool_tools::RememberInput(path, option + " " + path);
    return MatrixOf(option, path, std::move(array));
  } catch (const NpyError& error) {
    throw CliError{option + " " + path + ": " + error.what()};
  }
}

InputMatrix MatrixOf(const std::string& option, const std::string& path,
                     NpyArray array) {
  InputMatrix matrix{option, path, std::move(array)};
  const auto& shape = matrix.array.shape;
  if (shape.size() == 2) {
    matrix.rows = shape[0];
    matrix.cols = shape[1];
  } else if (shape.size() == 1) {
    matrix.rows = shape[0];
    matrix.cols = 1;
    matrix.one_dimensional = true;
  } else {
    throw CliError{matrix.Describe() + ": expected a 1-D or 2-D array, not " +
                   std::to_string(shape.size()) + "-D"};
  }
  return matrix;
}

InputMatrix LoadMatrix(const Arguments& arguments, const std::string& option) {
  return LoadMatrix(option, arguments.Required(option));
}

void LoadMatrices(const Arguments& arguments,
                  std::initializer_list<MatrixInput> inputs) {
  for (const MatrixInput& input : inputs) {
    *input.matrix = LoadMatrix(arguments, input.option);
  }
  const InputMatrix& first = *inputs.begin()->matrix;
  for (const MatrixInput& input : inputs) RequireSameType(first, *input.matrix);
}

void RequireShape(const InputMatrix& matrix, const std::vector<size_t>& shape,
                  const std::string& why) {
  if (matrix.array.shape != shape) {
    throw CliError{matrix.Describe() + ": expected shape " + ShapeText(shape) +
                   ": " + why};
  }
}

void RequireArrayShape(const std::string& label, const NpyArray& array,
                       const std::vector<size_t>& shape,
                       const std::string& why) {
  if (array.shape != shape) {
    throw CliError{label + ": shape " + ShapeText(array.shape) + ", expected " +
                   ShapeText(shape) + ": " + why};
  }
}

NpyArray LoadVisible(const std::string& path) {
  NpyArray visible = Load("--visible", path);
  if (visible.type != NpyType::bool8 && visible.type != NpyType::uint8) {
    throw CliError{"--visible " + path + ": dtype " +
                   NpyTypeName(visible.type) +
                   " is not supported: use bool or uint8"};
  }
  return visible;
}

namespace {

// Calls `visit(data)` with the elements of `array` if its dtype is `type`,
// that of T; returns whether it is.
template <typename T, class Visit>
bool VisitAs(NpyType type, const NpyArray& array, const Visit& visit) {
  if (array.type != type) return false;
  visit(array.data<T>());
  return true;
}

// Calls `visit(data)` with the elements of `array` if its dtype is an
// integer one; returns whether it is.
template <class Visit>
bool VisitIntegers(const NpyArray& array, const Visit& visit) {
  return VisitAs<int32_t>(NpyType::int32, array, visit) ||
         VisitAs<int64_t>(NpyType::int64, array, visit) ||
         VisitAs<uint32_t>(NpyType::uint32, array, visit) ||
         VisitAs<uint64_t>(NpyType::uint64, array, visit);
}

}  // namespace

std::vector<size_t> LengthEntries(const std::string& label,
                                  const NpyArray& array, size_t key_count,
                                  const std::string& limit) {
  std::vector<size_t> lengths(array.count);
  const bool integers = VisitIntegers(array, [&](const auto* entries) {
    for (size_t i = 0; i < array.count; ++i) {
      const long double value = entries[i];
      if (value < 0 || value > static_cast<long double>(key_count)) {
        throw CliError{label + ": entry " + std::to_string(i) + " is " +
                       std::to_string(entries[i]) + ", outside [0, " +
                       std::to_string(key_count) + "] (" + limit + ")"};
      }
      lengths[i] = static_cast<size_t>(value);
    }
  });
  // An empty array has no entry to reject, whatever its dtype.
  if (!integers && array.count > 0) {
    throw CliError{label + ": dtype " + NpyTypeName(array.type) +
                   " is not supported: use an integer array (int64, int32, "
                   "uint64 or uint32)"};
  }
  return lengths;
}

NpyArray MakeResult(const std::string& option, NpyType type,
                    const std::vector<size_t>& shape) {
  try {
    return attnpool_tools::MakeNpyArray(type, shape);
  } catch (const NpyError& error) {
    throw CliError{option + ": the result: " + error.what()};
  }
}

attnpool::ElementRows ElementRowsOf(const InputMatrix& matrix,
                                    const StoredElements& elements) {
  attnpool::ElementRows rows;
  rows.type = elements.type;
  rows.data = matrix.array.storage.get();
  rows.rows = matrix.rows;
  rows.cols = matrix.cols;
  rows.stride = matrix.cols;
  if (rows.type == attnpool::ElementType::int8) {
    rows.scales = elements.scales.data<float>();
  }
  return rows;
}

attnpool::ElementRows ElementRowsSlice(attnpool::ElementRows rows, size_t begin,
                                       size_t count) {
  const size_t bytes = attnpool::kElementTypes[int(rows.type)].bytes;
  rows.data = static_cast<const char*>(rows.data) + begin * rows.stride * bytes;
  if (rows.scales != nullptr) rows.scales += begin * rows.scale_stride;
  rows.rows = count;
  return rows;
}

bool IsNarrow(const NpyArray& array) {
  return array.type == NpyType::float16 || array.type == NpyType::uint16 ||
         array.type == NpyType::int8;
}

StoredElements ReadStoredElements(
    const Arguments& arguments, const std::string& label,
    const std::string& option, const NpyArray& array,
    const std::vector<size_t>& rows_shape, const std::string& dtype_option,
    const std::string& scales_option, size_t part, size_t parts) {
  StoredElements stored;
  const auto dtype = arguments.Get(dtype_option);
  switch (array.type) {
    case NpyType::float32:
      break;
    case NpyType::float16:
      stored.type = attnpool::ElementType::float16;
      break;
    case NpyType::int8:
      stored.type = attnpool::ElementType::int8;
      break;
    case NpyType::uint16:
      if (!dtype || *dtype != "bfloat16") {
        throw CliError{label + " is uint16: give " + dtype_option +
                       " bfloat16 if it holds bfloat16 bit patterns"};
      }
      stored.type = attnpool::ElementType::bfloat16;
      break;
    default:
      throw CliError{label + " is " + NpyTypeName(array.type) +
                     ": beside reduced-precision inputs, use float32 "
                     "('<f4'), float16 ('<f2'), bfloat16 bits ('<u2') or int8 "
                     "('|i1')"};
  }
  if (dtype && ParseName(dtype_option, *dtype,
                         &attnpool::element_type_from_name) != stored.type) {
    throw CliError{dtype_option + " " + *dtype + " but " + label + " is " +
                   NpyTypeName(array.type)};
  }
  const auto scales_path = arguments.Get(scales_option);
  if (stored.type == attnpool::ElementType::int8) {
    if (!scales_path) {
      throw CliError{label + " is int8: give its row scales with " +
                     scales_option + " S.npy (float32, one per row)"};
    }
    if (parts > 1) {
      attnpool_tools::NpyRowRange range;
      stored.scales =
          LoadMatrixPart(scales_option, *scales_path, part, parts, &range)
              .array;
    } else {
      stored.scales = Load(scales_option, *scales_path);
    }
    if (stored.scales.type != NpyType::float32) {
      throw CliError{scales_option + " " + *scales_path + " is " +
                     NpyTypeName(stored.scales.type) + ", not float32"};
    }
    RequireArrayShape(scales_option + " " + *scales_path, stored.scales,
                      rows_shape, "one scale per row of " + label);
  } else if (scales_path) {
    throw CliError{scales_option + " applies to int8 " + option + " only"};
  }
  return stored;
}

}  // namespace attnpool_cli
