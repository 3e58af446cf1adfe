// NumPy .npy files: read and write the arrays the attnpool tools exchange.
//
// Format (numpy.lib.format): the magic "\x93NUMPY", a version byte pair
// (1.0: 2-byte header length; 2.0 and 3.0: 4-byte), then a Python dict
// literal {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), } padded
// with spaces and ended by '\n', then the raw C-order data. Read: versions
// 1.0, 2.0 and 3.0, little-endian float32/float64/int32/int64/uint32/uint64,
// float16/uint16/int8 (reduced-precision keys and values), bool and uint8, C
// order, any number of dimensions. Everything else (other dtypes, big-endian,
// Fortran order, object arrays, truncated or malformed headers, data shorter or
// longer than the shape says) is rejected with an NpyError whose message says
// what is wrong and how to fix it. Written: version 1.0 (2.0 when the header
// needs it), C order, header padded to a multiple of 64 bytes as numpy does.
#pragma once

#include <cstddef>
#include <cstdio>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "tools/output_files.h"

namespace attnpool_tools {

class NpyError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class NpyType {
  float32,
  float64,
  int32,
  int64,
  uint32,
  uint64,
  bool8,
  uint8,
  float16,  // keys and values stored as binary16
  uint16,   // bfloat16 bit patterns (--keys-dtype bfloat16)
  int8      // int8 keys and values, with their scales
};

// "float32", "int64", ...
const char* NpyTypeName(NpyType type);
// Bytes per element.
size_t NpyTypeSize(NpyType type);
// The numpy descr, e.g. "<f4", "|b1".
const char* NpyDescr(NpyType type);

// "(3, 4)", "(5,)", "()".
std::string ShapeText(const std::vector<size_t>& shape);

struct NpyArray {
  NpyType type = NpyType::float32;
  std::vector<size_t> shape;
  size_t count = 0;  // product of shape
  // count · NpyTypeSize(type) bytes, aligned for any element type.
  std::shared_ptr<unsigned char> storage;

  template <typename T>
  const T* data() const {
    return reinterpret_cast<const T*>(storage.get());
  }
  template <typename T>
  T* mutable_data() {
    return reinterpret_cast<T*>(storage.get());
  }
};

// Parses the header dict (the text between the length field and the data).
// Exposed for tests. Throws NpyError.
void ParseNpyHeader(const std::string& header, NpyType* type,
                    std::vector<size_t>* shape);

// Reads `path`. Throws NpyError with a message naming what is wrong (the
// caller adds which file/option it was).
NpyArray ReadNpy(const std::string& path);

// Which rows of the first axis ReadNpyRows read: [first, first + the
// array's shape[0]) of `total`.
struct NpyRowRange {
  size_t first = 0, total = 0;
};

// Part `part` of `parts` (0 ≤ part < parts) of the array in `path`, split
// along its first axis: rows [⌊R·part/parts⌋, ⌊R·(part+1)/parts⌋) of its R,
// read into memory. Of the file, only the header and those rows' bytes are
// read, so a process that reads its part reads no other part. (Read, not
// mapped: a mapped file that shrank under a run would end it with SIGBUS.)
// Checks the header and the file's size as ReadNpy does. Throws NpyError.
NpyArray ReadNpyRows(const std::string& path, size_t part, size_t parts,
                     NpyRowRange* range);

// An array of `type` and `shape` with uninitialized contents.
NpyArray MakeNpyArray(NpyType type, const std::vector<size_t>& shape);

// Writes `array` as a .npy file to `stream`; false on failure (errno says
// why). Files are written through output_files.h (NpyOutput).
bool WriteNpyTo(std::FILE* stream, const NpyArray& array);

// `array` as an output file of `label` at `path`, for CommitOutputs; the
// array must outlive the commit.
OutputFile NpyOutput(const std::string& label, const std::string& path,
                     const NpyArray& array);

}  // namespace attnpool_tools
