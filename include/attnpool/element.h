// Reduced-precision element types for keys and values (the KV-cache
// formats of inference engines) and their conversions to and from float.
//
// Keys and values may be stored as float, bfloat16, IEEE binary16, or with
// one float scale per row as int8 or OCP float8 (E4M3FN, E5M2); every
// computation on them is in float (the narrow elements are widened exactly
// as they are read: bfloat16, binary16 and float8 values are all floats,
// and an element q of a scaled row with scale s is the float s·q, one
// rounding). So a result on narrow inputs meets the float bounds against
// the double reference computed on the values the narrow elements hold:
// bitwise the float call on them, but where a decode (few queries, dot)
// reads int8 rows. There a row's scale is applied once, to the dot of its
// integers with the query and to its softmax weight, not to each element
// (the decode's multiplies halved): each dot within distance.h's bound on
// the held values plus 2·u·Σ|q·k| (the scale's product, the held elements'
// rounding it skips), each term of the weighted sum within one rounding
// more; NaN and ±inf where the held values give them (a scale outside
// [2^-50, 2^50], zero or not finite, a query with an element outside it
// other than 0, or weights that are not a softmax's: the scale applies per
// element, as held; docs/design.md §1, "Element types").
#pragma once

#include <attnpool/matrix.h>
#include <attnpool/table.h>

#include <cstddef>
#include <cstdint>

namespace attnpool {

// bfloat16: the upper half of a float's bits (8 exponent bits, 7 mantissa
// bits). Layout-compatible with uint16_t (and PyTorch's, NumPy ml_dtypes').
struct bf16 {
  uint16_t bits;
};

// IEEE 754 binary16 (5 exponent bits, 10 mantissa bits): C's _Float16,
// NumPy's float16.
struct f16 {
  uint16_t bits;
};

// OCP 8-bit floats (OFP8, as PyTorch's and ml_dtypes' float8 types and
// vLLM's fp8 KV caches): E4M3FN (4 exponent bits, bias 7, 3 mantissa bits;
// no infinities, S.1111.111 NaN, largest ±448) and E5M2 (binary16's upper
// byte: bias 15, infinities and NaNs as IEEE).
struct fp8_e4m3fn {
  uint8_t bits;
};
struct fp8_e5m2 {
  uint8_t bits;
};

// The element types, one line each; the enum, names, kElementTypes, the
// views' constructors below and every front end's list are generated from
// it (a type's arithmetic lives in its own files, core/elements/ and
// arch/elements/). Columns: name, C enum suffix, storage type, the .npy type
// string the CLI reads it from, and whether it is scaled: each row carries
// a float scale s and element c is the float s·stored(c), rounded once
// (ScaledRows).
#define ATTNPOOL_ELEMENT_TABLE(X)                          \
  X(float32, FLOAT32, float, "<f4", false)                 \
  X(bfloat16, BFLOAT16, bf16, "<u2", false)                \
  X(float16, FLOAT16, f16, "<f2", false)                   \
  X(int8, INT8, int8_t, "|i1", true)                       \
  X(float8_e4m3fn, FLOAT8_E4M3FN, fp8_e4m3fn, "|u1", true) \
  X(float8_e5m2, FLOAT8_E5M2, fp8_e5m2, "|u1", true)

enum class ElementType : int {
  ATTNPOOL_ELEMENT_TABLE(ATTNPOOL_TABLE_ENUMERATOR)
};

struct ElementProperties {
  ElementType type;
  const char* name;
  size_t bytes;
  const char* npy_descr;
  bool scaled;
};

// kElementTypes[k] describes ElementType(k).
inline constexpr ElementProperties kElementTypes[] = {
#define ATTNPOOL_ELEMENT_PROPERTIES(name, c_name, storage, npy, scaled) \
  {ElementType::name, #name, sizeof(storage), npy, scaled},
    ATTNPOOL_ELEMENT_TABLE(ATTNPOOL_ELEMENT_PROPERTIES)
#undef ATTNPOOL_ELEMENT_PROPERTIES
};
constexpr int kElementTypeCount = table_size(kElementTypes);

constexpr const ElementProperties& element_properties(ElementType type) {
  return kElementTypes[static_cast<int>(type)];
}

// ElementTypeOf<S>::value: the element type stored as S.
template <typename S>
struct ElementTypeOf;
#define ATTNPOOL_ELEMENT_TYPE_OF(name, c_name, storage, ...) \
  template <>                                                \
  struct ElementTypeOf<storage> {                            \
    static constexpr ElementType value = ElementType::name;  \
  };
ATTNPOOL_ELEMENT_TABLE(ATTNPOOL_ELEMENT_TYPE_OF)
#undef ATTNPOOL_ELEMENT_TYPE_OF

// Calls visit(S()) with S the storage type of `type` (one of the table's).
template <class Visit>
decltype(auto) visit_element_storage(ElementType type, Visit&& visit) {
  switch (type) {
#define ATTNPOOL_ELEMENT_VISIT(name, c_name, storage, ...) \
  case ElementType::name:                                  \
    return visit(storage());
    ATTNPOOL_ELEMENT_TABLE(ATTNPOOL_ELEMENT_VISIT)
#undef ATTNPOOL_ELEMENT_VISIT
  }
  return visit(float());
}

const char* element_type_name(ElementType type);
ElementType element_type_from_name(const char* name);

// Rows of a scaled element type with one scale each: element (r, c) is the
// float scales[r · scale_stride] · data(r, c), rounded once (per-row
// quantization, as KV caches quantize each token; a scale_stride of 0 is
// one scale for every row, a per-tensor scale).
template <typename S>
struct ScaledRows {
  ConstMatrixView<S> data;
  const float* scales = nullptr;
  size_t scale_stride = 1;
};
using Int8Rows = ScaledRows<int8_t>;

// The view of an element type's rows that the functions taking reduced-
// precision inputs read: a ConstMatrixView of its storage, or ScaledRows
// where it is scaled.
#define ATTNPOOL_ELEMENT_ROWS_VIEW_false(storage) ConstMatrixView<storage>
#define ATTNPOOL_ELEMENT_ROWS_VIEW_true(storage) const ScaledRows<storage>&

// A read-only matrix of keys or values stored in any ElementType: what the
// functions taking reduced-precision inputs read. Converts implicitly from
// each type's view (above). `stride` counts elements; `scales` (row r's at
// scales[r · scale_stride]) is set for scaled types only.
struct ElementRows {
  ElementType type = ElementType::float32;
  const void* data = nullptr;
  size_t rows = 0, cols = 0, stride = 0;
  const float* scales = nullptr;
  size_t scale_stride = 1;

  ElementRows() = default;
  // NOLINTBEGIN(google-explicit-constructor)
#define ATTNPOOL_ELEMENT_ROWS_FROM(name, c_name, storage, npy, scaled) \
  ElementRows(ATTNPOOL_ELEMENT_ROWS_VIEW_##scaled(storage) view)       \
      : ElementRows(ElementType::name, view) {}
  ATTNPOOL_ELEMENT_TABLE(ATTNPOOL_ELEMENT_ROWS_FROM)
#undef ATTNPOOL_ELEMENT_ROWS_FROM
  // NOLINTEND(google-explicit-constructor)

 private:
  template <typename U>
  ElementRows(ElementType type_, ConstMatrixView<U> view)
      : type(type_),
        data(view.data),
        rows(view.rows),
        cols(view.cols),
        stride(view.stride) {}
  template <typename U>
  ElementRows(ElementType type_, const ScaledRows<U>& view)
      : ElementRows(type_, view.data) {
    scales = view.scales;
    scale_stride = view.scale_stride;
  }
};

// Conversions, vectorized on the active target, `count` elements each
// (in and out may not overlap). Float to bfloat16 and binary16 rounds to
// nearest, ties to even; a value beyond the largest finite one (after
// rounding) becomes ±inf, NaN stays NaN (quiet, its sign kept), and
// binary16 keeps subnormals. The widenings are exact.
void to_bfloat16(const float* in, size_t count, bf16* out);
void to_float16(const float* in, size_t count, f16* out);
void to_float(const bf16* in, size_t count, float* out);
void to_float(const f16* in, size_t count, float* out);

// Quantizes each row of `in` to int8: scales[r] = max_c |in(r, c)| / 127
// (0 for a row of zeros) and out(r, c) = in(r, c) · (127 / max_c |in(r, c)|)
// rounded to nearest, ties to even, the factor a float: |in − scale·out| ≤
// scale/2 plus a rounding. A row whose scale would be subnormal (max below
// 127·FLT_MIN) takes that scale rounded up (the least subnormal for one that
// rounds to 0) and out = in / scale rounded to nearest, even, in double:
// |in − scale·out| ≤ scale/2, with scale·out exact. in and
// out have the same shape; scales has in.rows entries. Throws Error("in") for a
// non-finite element (int8 holds none), before writing anything.
void quantize_rows(ConstMatrixView<float> in, MatrixView<int8_t> out,
                   float* scales);

// out(r, c) = scales[r · in.scale_stride] · in(r, c), rounded once.
void dequantize_rows(const Int8Rows& in, MatrixView<float> out);

// Rows of any element type back in float: out(r, c) = the float element
// (r, c) of `in` holds, as every computation reads it (exact, but a scaled
// type's scale · stored value, rounded once). out has in's shape and may
// not overlap it or its scales.
void widen_rows(const ElementRows& in, MatrixView<float> out);

}  // namespace attnpool
