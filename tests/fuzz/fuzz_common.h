// What the fuzz target's functions share (tests/fuzz/fuzz_api.cc): the
// input's byte reader, the decoding of sizes and values, the failure
// report, narrow storage of keys and values, and the forced tuning.
#pragma once

#include <attnpool/attnpool.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "tests/float8_rows.h"

namespace attnpool_test {

class Bytes {
 public:
  Bytes(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t Next() { return position_ < size_ ? data_[position_++] : 0; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t position_ = 0;
};

inline size_t DecodeSize(uint8_t b) {
  return b < 224 ? b % 25 : 25 + 9 * (b - 224);
}

template <typename T>
T DecodeValue(uint8_t b, double scale, bool specials) {
  if (specials && b >= 250) {
    const T inf = std::numeric_limits<T>::infinity();
    const T table[6] = {
        std::numeric_limits<T>::quiet_NaN(), inf, -inf, T(0), -T(0), T(1)};
    return table[b - 250];
  }
  return static_cast<T>((static_cast<int>(b) - 125) / 16.0 * scale);
}

// The values' pseudo-random stream (SplitMix64), seeded by input bytes.
inline uint64_t SplitMix(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Input `index` of `seed` for runs without libFuzzer (--random): 2-4095
// random bytes, or one time in eight up to 2¹⁷ (enough for the values of
// the large shapes, 2¹⁶ elements).
inline std::vector<uint8_t> RandomInput(uint64_t seed, uint64_t index) {
  uint64_t state = seed * 0x2545f4914f6cdd1dull + index;
  const uint64_t draw = SplitMix(state);
  const size_t size =
      2 + (draw % 8 == 0 ? draw / 8 % (size_t{1} << 17) : draw / 8 % 4094);
  std::vector<uint8_t> bytes(size);
  for (size_t k = 0; k < size; k += 8) {
    const uint64_t word = SplitMix(state);
    std::memcpy(bytes.data() + k, &word, std::min<size_t>(8, size - k));
  }
  return bytes;
}

template <typename T>
bool SameBits(const T* a, const T* b, size_t count) {
  return count == 0 || std::memcmp(a, b, count * sizeof(T)) == 0;
}

template <typename T>
bool SameBits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && SameBits(a.data(), b.data(), a.size());
}

[[noreturn]] inline void Fail(const std::string& what,
                              const std::string& call) {
  std::fprintf(stderr, "attnpool fuzz failure: %s\n  call: %s\n", what.c_str(),
               call.c_str());
  std::fflush(stderr);
  std::abort();
}

// Keys or values stored as `type`, dense: Store rounds the float view in
// place to the values they hold (the scaled types keep float for non-finite
// views; `bytes` holds int8 or float8 patterns).
struct NarrowRows {
  attnpool::ElementType type = attnpool::ElementType::float32;
  std::vector<uint16_t> half;
  std::vector<int8_t> bytes;
  std::vector<float> floats, scales;
  size_t rows = 0, cols = 0;

  void Store(attnpool::ElementType requested, attnpool::MatrixView<float> v) {
    type = requested;
    rows = v.rows;
    cols = v.cols;
    floats.assign(rows * cols + 1, 0.0f);
    for (size_t r = 0; r < rows; ++r) {
      std::copy(v.row(r), v.row(r) + cols, floats.data() + r * cols);
    }
    const size_t count = rows * cols;
    switch (type) {
      case attnpool::ElementType::float32:
        break;
      case attnpool::ElementType::bfloat16:
      case attnpool::ElementType::float16:
        half.resize(count + 1);
        if (type == attnpool::ElementType::bfloat16) {
          attnpool::to_bfloat16(floats.data(), count,
                                reinterpret_cast<attnpool::bf16*>(half.data()));
          attnpool::to_float(reinterpret_cast<attnpool::bf16*>(half.data()),
                             count, floats.data());
        } else {
          attnpool::to_float16(floats.data(), count,
                               reinterpret_cast<attnpool::f16*>(half.data()));
          attnpool::to_float(reinterpret_cast<attnpool::f16*>(half.data()),
                             count, floats.data());
        }
        break;
      case attnpool::ElementType::float8_e4m3fn:
      case attnpool::ElementType::float8_e5m2:
        for (size_t k = 0; k < count; ++k) {
          if (!std::isfinite(floats[k])) type = attnpool::ElementType::float32;
        }
        if (type == attnpool::ElementType::float32) break;
        bytes.resize(count + 1);
        scales.resize(rows + 1);
        for (size_t r = 0; r < rows; ++r) {
          uint8_t* row = reinterpret_cast<uint8_t*>(bytes.data()) + r * cols;
          scales[r] = StoreFloat8Row(type, floats.data() + r * cols, cols, row);
          for (size_t c = 0; c < cols; ++c) {
            floats[r * cols + c] = HeldFloat8(type, row[c], scales[r]);
          }
        }
        break;
      case attnpool::ElementType::int8:
        for (size_t k = 0; k < count; ++k) {
          if (!std::isfinite(floats[k])) type = attnpool::ElementType::float32;
        }
        if (type != attnpool::ElementType::int8) break;
        bytes.resize(count + 1);
        scales.resize(rows + 1);
        attnpool::quantize_rows({floats.data(), rows, cols},
                                {bytes.data(), rows, cols}, scales.data());
        attnpool::dequantize_rows({{bytes.data(), rows, cols}, scales.data()},
                                  {floats.data(), rows, cols});
        break;
    }
    for (size_t r = 0; r < rows; ++r) {
      std::copy(floats.data() + r * cols, floats.data() + (r + 1) * cols,
                v.row(r));
    }
  }

  attnpool::ElementRows Rows() const { return Rows(0, rows); }

  template <typename S>
  attnpool::ScaledRows<S> Float8Rows(size_t at, size_t count,
                                     size_t begin) const {
    return {{reinterpret_cast<const S*>(bytes.data()) + at, count, cols},
            scales.data() + begin};
  }

  // Rows [begin, end).
  attnpool::ElementRows Rows(size_t begin, size_t end) const {
    const size_t count = end - begin, at = begin * cols;
    switch (type) {
      case attnpool::ElementType::bfloat16:
        return attnpool::ConstMatrixView<attnpool::bf16>(
            reinterpret_cast<const attnpool::bf16*>(half.data() + at), count,
            cols);
      case attnpool::ElementType::float16:
        return attnpool::ConstMatrixView<attnpool::f16>(
            reinterpret_cast<const attnpool::f16*>(half.data() + at), count,
            cols);
      case attnpool::ElementType::int8:
        return attnpool::Int8Rows{{bytes.data() + at, count, cols},
                                  scales.data() + begin};
      case attnpool::ElementType::float8_e4m3fn:
        return Float8Rows<attnpool::fp8_e4m3fn>(at, count, begin);
      case attnpool::ElementType::float8_e5m2:
        return Float8Rows<attnpool::fp8_e5m2>(at, count, begin);
      case attnpool::ElementType::float32:
        break;
    }
    return attnpool::ConstMatrixView<float>(floats.data() + at, count, cols);
  }
};

// The tuning profile of bits b / 4 % 32 of byte [7]: "" (this CPU's
// choice) below 16, else this CPU's choice with parameters of its own
// (targets.h force_tuning): blocks of 24 or 48 query rows and of one or a
// few key panels (4 or 128 bytes of scores a row), so that even small
// inputs span several, and each decode parameter at one of two values.
inline std::string Tuning(uint8_t threads_byte) {
  const unsigned v = threads_byte / 4 % 32;
  if (v < 16) return std::string();
  return attnpool::tunings().front() +
         (v & 1 ? " query_rows=48" : " query_rows=24") +
         (v & 2 ? " key_block_bytes=128" : " key_block_bytes=4") +
         (v & 4 ? " decode_stretch=3" : " decode_stretch=1") +
         (v & 8 ? " decode_interleave=1 decode_load_bytes=32 "
                  "decode_key_prefetch_rows=0"
                : " decode_interleave=0 decode_load_bytes=0 "
                  "decode_key_prefetch_rows=7");
}

}  // namespace attnpool_test
