#include "tools/cli/arrays.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

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
    NpyArray array = attnpool_tools::ReadNpyRows(path, part, parts, range);
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
  if (attnpool::element_properties(rows.type).scaled) {
    rows.scales = elements.scales.data<float>();
  }
  return rows;
}

attnpool::ElementRows ElementRowsSlice(attnpool::ElementRows rows, size_t begin,
                                       size_t count) {
  const size_t bytes = attnpool::element_properties(rows.type).bytes;
  rows.data = static_cast<const char*>(rows.data) + begin * rows.stride * bytes;
  if (rows.scales != nullptr) rows.scales += begin * rows.scale_stride;
  rows.rows = count;
  return rows;
}

namespace {

// The element types stored as `array`'s .npy type (element.h's table).
std::vector<attnpool::ElementType> StoredAs(const NpyArray& array) {
  std::vector<attnpool::ElementType> types;
  for (const auto& entry : attnpool::kElementTypes) {
    if (std::string(entry.npy_descr) == NpyDescr(array.type)) {
      types.push_back(entry.type);
    }
  }
  return types;
}

}  // namespace

bool IsNarrow(const NpyArray& array) {
  return array.type != NpyType::float32 && !StoredAs(array).empty();
}

StoredElements ReadStoredElements(
    const Arguments& arguments, const std::string& label,
    const std::string& option, const NpyArray& array,
    const std::vector<size_t>& rows_shape, const std::string& dtype_option,
    const std::string& scales_option, size_t part, size_t parts) {
  StoredElements stored;
  const auto dtype = arguments.Get(dtype_option);
  const auto types = StoredAs(array);
  std::string names;  // of `types`, for messages
  for (const auto type : types) {
    names += std::string(names.empty() ? "" : " or ") +
             attnpool::element_type_name(type);
  }
  if (types.empty()) {
    std::string kinds;
    for (const auto& entry : attnpool::kElementTypes) {
      kinds += std::string(kinds.empty() ? "" : ", ") + entry.name + " ('" +
               entry.npy_descr + "')";
    }
    throw CliError{label + " is " + NpyTypeName(array.type) +
                   ": beside reduced-precision inputs, use " + kinds};
  }
  if (dtype) {
    stored.type =
        ParseName(dtype_option, *dtype, &attnpool::element_type_from_name);
    if (std::find(types.begin(), types.end(), stored.type) == types.end()) {
      throw CliError{dtype_option + " " + *dtype + " but " + label + " is " +
                     NpyTypeName(array.type)};
    }
  } else if (HoldsBitPatterns(NpyDescr(array.type))) {
    throw CliError{label + " is " + NpyTypeName(array.type) + ": give " +
                   dtype_option + " " + names +
                   " if it holds bit patterns of that type"};
  } else {
    stored.type = types.front();
  }
  const auto scales_path = arguments.Get(scales_option);
  const char* const type_name = attnpool::element_type_name(stored.type);
  if (attnpool::element_properties(stored.type).scaled) {
    if (!scales_path) {
      throw CliError{label + " is " + type_name +
                     ": give its row scales with " + scales_option +
                     " S.npy (float32, one per row)"};
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
    throw CliError{scales_option + " applies to scaled " + option + " only (" +
                   option + " is " + type_name + ")"};
  }
  return stored;
}

}  // namespace attnpool_cli
