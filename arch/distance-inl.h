// Per-ISA kernels of the distance stage (docs/design.md §1, stage 1).
//
// Every metric runs through one register-blocked tile kernel: kTileRows
// queries × one panel of 2 vectors of keys per step, the keys packed
// depth-major (arch/distance.h, PackedKeys) so that one coordinate of 2·N keys
// is two aligned loads and one coordinate of a query is a broadcast. What a
// step accumulates (q·k, (q−k)², |q−k|) and how the sums become distances
// (norms, square roots, cancellation repair) are the Step and Finisher
// parameters below.
//
// Blocking: a pass covers kDepthBlockBytes of coordinates, so the tile's query
// rows stay in L1 while it sweeps a key block of about kKeyBlockBytes of
// packed keys, which stays in L2 across all tiles of the query block. Partial
// sums of a pass are kept in `out` and added in order by the next pass.
//
// Every output element is one lane of one accumulator, so its value depends
// only on (query, key, depth) and the target: never on blocking, tile
// position or thread count.

#if defined(ATTNPOOL_ARCH_DISTANCE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ATTNPOOL_ARCH_DISTANCE_INL_H_
#undef ATTNPOOL_ARCH_DISTANCE_INL_H_
#else
#define ATTNPOOL_ARCH_DISTANCE_INL_H_
#endif

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "arch/convert-inl.h"
#include "arch/cosine_scale.h"
#include "arch/distance.h"
#include "arch/prefetch_lines-inl.h"
#include "arch/prefix_io-inl.h"
#include "arch/tile_rows.h"
#include "arch/transpose-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace attnpool {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Queries per tile. A tile holds kTileRows × 2 vector accumulators: 16 on
// ISAs with 32 vector registers; 12 on x86 below AVX-512, whose 16 registers
// must also hold the 2 key vectors and a broadcast.
#if HWY_ARCH_X86 && (HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_SSE4 || \
                     HWY_TARGET == HWY_SSSE3)
constexpr size_t kTileRows = 6;
#else
constexpr size_t kTileRows = 8;
#endif

// Coordinates per pass, in bytes of one query row (256 floats).
constexpr size_t kDepthBlockBytes = 1024;
// Packed keys per key block (one pass), sized to stay in a 1 MiB L2.
constexpr size_t kKeyBlockBytes = 256 * 1024;
// Queries whose per-row factors a DistanceRows call computes at a time.
constexpr size_t kRowChunk = 96;
// Gram-form squared distances below this fraction of ‖q‖² + ‖k‖² are
// recomputed directly. The Gram form's error is ≤ (2d+8)·u·(‖q‖²+‖k‖²), so
// what it keeps has relative error ≤ (2d+8)·u / kCancellationFraction.
constexpr double kCancellationFraction = 1.0 / 32;

// One step of a tile: acc += f(q, k) lane-wise.
struct DotStep {
  template <class V>
  static HWY_INLINE V Apply(V q, V k, V acc) {
    return hn::MulAdd(q, k, acc);
  }
};
struct SquaredDifferenceStep {
  template <class V>
  static HWY_INLINE V Apply(V q, V k, V acc) {
    const V diff = hn::Sub(q, k);
    return hn::MulAdd(diff, diff, acc);
  }
};
struct AbsoluteDifferenceStep {
  template <class V>
  static HWY_INLINE V Apply(V q, V k, V acc) {
    return hn::Add(acc, hn::Abs(hn::Sub(q, k)));
  }
};

#define ATTNPOOL_FOR_TILE_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
static_assert(kTileRows <= 8, "ATTNPOOL_FOR_TILE_ROWS covers 8 rows");

// Accumulates Step over `depth` coordinates for kTileRows query rows (each
// pointer at the first coordinate of the pass) against one packed panel and
// stores the sums of row R's keys [0, 2N) at outputs[R] (a tile on the
// stack, or the scores themselves). Storing (rather than handing live
// accumulators to an epilogue) keeps the epilogue from forcing spills into
// the hot loop.
// Accumulators are named variables, not an array: SVE vectors are sizeless.
template <class Step, class D, typename T = hn::TFromD<D>>
HWY_INLINE void ComputeTile(D d, const T* const* rows,
                            const T* HWY_RESTRICT panel, size_t depth,
                            T* const* outputs) {
  using V = hn::Vec<D>;
  const size_t N = hn::Lanes(d);
#define ATTNPOOL_TILE_DECLARE(R) \
  V acc##R##_low = hn::Zero(d);  \
  V acc##R##_high = hn::Zero(d); \
  const T* HWY_RESTRICT row##R = rows[R < kTileRows ? R : 0];
  ATTNPOOL_FOR_TILE_ROWS(ATTNPOOL_TILE_DECLARE)
#undef ATTNPOOL_TILE_DECLARE
  for (size_t p = 0; p < depth; ++p) {
    const V key_low = hn::Load(d, panel + 2 * N * p);
    const V key_high = hn::Load(d, panel + 2 * N * p + N);
#define ATTNPOOL_TILE_STEP(R)                                    \
  if constexpr (R < kTileRows) {                                 \
    const V query = hn::Set(d, row##R[p]);                       \
    acc##R##_low = Step::Apply(query, key_low, acc##R##_low);    \
    acc##R##_high = Step::Apply(query, key_high, acc##R##_high); \
  }
    ATTNPOOL_FOR_TILE_ROWS(ATTNPOOL_TILE_STEP)
#undef ATTNPOOL_TILE_STEP
  }
#define ATTNPOOL_TILE_STORE(R)                    \
  if constexpr (R < kTileRows) {                  \
    hn::StoreU(acc##R##_low, d, outputs[R]);      \
    hn::StoreU(acc##R##_high, d, outputs[R] + N); \
  } else {                                        \
    (void)acc##R##_low;                           \
    (void)acc##R##_high;                          \
    (void)row##R;                                 \
  }
  ATTNPOOL_FOR_TILE_ROWS(ATTNPOOL_TILE_STORE)
#undef ATTNPOOL_TILE_STORE
}

// Σ term(qᵢ, kᵢ) over `depth` coordinates, read in place: two vector chains
// of accumulate(sum, q, k) (lanes past `depth` are zero in both q and k),
// then the lanes summed — a fixed order for given data and target.
template <class D, class Accumulate, typename T = hn::TFromD<D>>
HWY_INLINE T DirectSum(D d, const T* HWY_RESTRICT query,
                       const T* HWY_RESTRICT key, size_t depth,
                       const Accumulate& accumulate) {
  const size_t N = hn::Lanes(d);
  auto sum0 = hn::Zero(d), sum1 = hn::Zero(d);
  size_t p = 0;
  for (; p + 2 * N <= depth; p += 2 * N) {
    sum0 = accumulate(sum0, hn::LoadU(d, query + p), hn::LoadU(d, key + p));
    sum1 = accumulate(sum1, hn::LoadU(d, query + p + N),
                      hn::LoadU(d, key + p + N));
  }
  for (; p < depth; p += N) {
    const size_t count = std::min(N, depth - p);
    sum0 = accumulate(sum0, LoadPrefix(d, query + p, count),
                      LoadPrefix(d, key + p, count));
  }
  return hn::GetLane(hn::SumOfLanes(d, hn::Add(sum0, sum1)));
}

// Σ (qᵢ − kᵢ)² over `depth` coordinates, vectorized along the coordinates.
// A sum of non-negative terms: relative error ≤ (depth+1)·u; exactly 0 for
// q = k. Used to repair pairs whose Gram form cancelled.
template <class D, typename T = hn::TFromD<D>>
HWY_NOINLINE T DirectSquaredDistance(D d, const T* HWY_RESTRICT query,
                                     const T* HWY_RESTRICT key, size_t depth) {
  return DirectSum(d, query, key, depth, [](auto sum, auto q, auto k) {
    const auto diff = hn::Sub(q, k);
    return hn::MulAdd(diff, diff, sum);
  });
}

// ---------------------------------------------------------------- finishers
// Turn a full-depth accumulator (keys [key, key+N) of query `query_row`) into
// distances. `row_factor` is indexed by query_row − first_row.

struct KeepSums {
  template <class D>
  HWY_INLINE hn::Vec<D> operator()(D, size_t, size_t, hn::Vec<D> acc) const {
    return acc;
  }
};

struct SquareRootOfSums {
  template <class D>
  HWY_INLINE hn::Vec<D> operator()(D, size_t, size_t, hn::Vec<D> acc) const {
    return hn::Sqrt(acc);
  }
};

template <typename T>
struct CosineFromDots {
  const T* row_factor;  // 1/‖q‖, 0 for q = 0
  const T* key_factor;  // 1/‖k‖, 0 for k = 0
  size_t first_row;
  template <class D>
  HWY_INLINE hn::Vec<D> operator()(D d, size_t query_row, size_t key,
                                   hn::Vec<D> dots) const {
    const auto scaled =
        hn::Mul(dots, hn::Set(d, row_factor[query_row - first_row]));
    return hn::Mul(scaled, hn::Load(d, key_factor + key));
  }
};

// ‖q‖² + ‖k‖² − 2q·k, clamped at 0, with cancelling pairs recomputed.
template <typename T>
struct SquaredDistanceFromDots {
  const T* row_factor;  // ‖q‖²
  const T* key_factor;  // ‖k‖² (0 for padding keys)
  size_t first_row;
  ConstMatrixView<T> queries;
  detail::RowList<T> keys;
  bool take_root;

  template <class D>
  HWY_INLINE hn::Vec<D> operator()(D d, size_t query_row, size_t key,
                                   hn::Vec<D> dots) const {
    const auto norms = hn::Add(hn::Set(d, row_factor[query_row - first_row]),
                               hn::Load(d, key_factor + key));
    auto distance =
        hn::Max(hn::NegMulAdd(hn::Set(d, T(2)), dots, norms), hn::Zero(d));
    const auto threshold = hn::Mul(norms, hn::Set(d, T(kCancellationFraction)));
    // "Not ≥" rather than "<": a NaN or infinite coordinate makes the Gram
    // form NaN (which Max may have turned into 0) or the threshold NaN or
    // inf; such pairs are recomputed too, so they follow IEEE like the
    // direct form.
    if (HWY_UNLIKELY(!hn::AllTrue(d, hn::Ge(distance, threshold)))) {
      distance = Repair(d, query_row, key, distance, threshold);
    }
    return take_root ? hn::Sqrt(distance) : distance;
  }

  // Recomputes the lanes not above `threshold` as Σ (qᵢ − kᵢ)².
  template <class D>
  HWY_NOINLINE hn::Vec<D> Repair(D d, size_t query_row, size_t key,
                                 hn::Vec<D> distance,
                                 hn::Vec<D> threshold) const {
    const size_t N = hn::Lanes(d);
    HWY_ALIGN T values[kMaxLanesBytes / sizeof(T)];
    HWY_ALIGN T thresholds[kMaxLanesBytes / sizeof(T)];
    hn::Store(distance, d, values);
    hn::Store(threshold, d, thresholds);
    const size_t valid = std::min(N, keys.rows - std::min(keys.rows, key));
    std::vector<T> widened(keys.is_narrow() ? keys.cols : 0);
    for (size_t lane = 0; lane < valid; ++lane) {
      if (!(values[lane] >= thresholds[lane])) {
        values[lane] = DirectSquaredDistance(
            d, queries.row(query_row), RowOf(keys, key + lane, widened.data()),
            queries.cols);
      }
    }
    return hn::Load(d, values);
  }
};

// q·k over `depth` coordinates (DirectSum's order). The decode path's
// score: each key row is read once, no packing.
template <class D, typename T = hn::TFromD<D>>
HWY_INLINE T DirectDot(D d, const T* HWY_RESTRICT query,
                       const T* HWY_RESTRICT key, size_t depth) {
  return DirectSum(d, query, key, depth, [](auto sum, auto q, auto k) {
    return hn::MulAdd(q, k, sum);
  });
}

// DirectDot's bits, its loads at most `max_load_bytes` wide (0: no limit).
// AVX-512 under 32: each of DirectSum's 512-bit sums kept as two
// 256-bit halves, added as the 512-bit SumOfLanes adds them (upper half +
// lower half, then the 256-bit SumOfLanes's pairs: the tree of the
// compilers' _mm512_reduce_add_ps, which attention.tuning_bits checks); no
// other target reads vectors wider than it asks. For CPUs whose 512-bit
// loads are two 256-bit ones, where strided decode ran faster so (the
// tuning's decode_load_bytes; docs/benchmarks.md, "Design evidence":
// DirectDotLoads).
template <class D, typename T = hn::TFromD<D>>
HWY_INLINE T DirectDotLoads(D d, size_t max_load_bytes,
                            const T* HWY_RESTRICT query,
                            const T* HWY_RESTRICT key, size_t depth) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  if (max_load_bytes == 32) {
    const hn::Full256<T> h;
    const size_t H = hn::Lanes(h);  // half of d's lanes
    auto lower0 = hn::Zero(h), upper0 = lower0, lower1 = lower0,
         upper1 = lower0;
    size_t p = 0;
    for (; p + 4 * H <= depth; p += 4 * H) {
      const auto term = [&](size_t at, decltype(lower0) sum) {
        return hn::MulAdd(hn::LoadU(h, query + at), hn::LoadU(h, key + at),
                          sum);
      };
      lower0 = term(p, lower0);
      upper0 = term(p + H, upper0);
      lower1 = term(p + 2 * H, lower1);
      upper1 = term(p + 3 * H, upper1);
    }
    for (; p < depth; p += 2 * H) {  // DirectSum's tail, into its sum0
      const size_t count = std::min(2 * H, depth - p),
                   lower = std::min(H, count);
      lower0 = hn::MulAdd(LoadPrefix(h, query + p, lower),
                          LoadPrefix(h, key + p, lower), lower0);
      if (count > H) {
        upper0 = hn::MulAdd(LoadPrefix(h, query + p + H, count - H),
                            LoadPrefix(h, key + p + H, count - H), upper0);
      }
    }
    const auto sum = hn::Add(hn::Add(upper0, upper1), hn::Add(lower0, lower1));
    return hn::GetLane(hn::SumOfLanes(h, sum));
  }
#else
  (void)max_load_bytes;
#endif
  return DirectDot(d, query, key, depth);
}

// ------------------------------------------------------------------ drivers

template <typename T>
size_t PanelWidth() {
  const hn::ScalableTag<T> d;
  return 2 * hn::Lanes(d);
}

// The first `valid` keys of a packed panel (two vectors wide), each
// scaled in place by the power of two cosine needs (arch/cosine_scale.h):
// a vector test, and the keys' own pass only where a key is out of range.
template <class D, typename T = hn::TFromD<D>>
void ScaleCosineKeys(D d, T* HWY_RESTRICT packed, size_t depth, size_t valid) {
  const size_t N = hn::Lanes(d), width = 2 * N;
  auto low = hn::Zero(d), high = hn::Zero(d);
  for (size_t p = 0; p < depth; ++p) {
    low = hn::Max(low, hn::Abs(hn::Load(d, packed + p * width)));
    high = hn::Max(high, hn::Abs(hn::Load(d, packed + p * width + N)));
  }
  // In range: largest |k_p| in [2^−R, 2^(R+1)).
  const auto smallest = hn::Set(d, std::ldexp(T(1), -detail::kCosineRange<T>));
  const auto beyond = hn::Set(d, std::ldexp(T(2), detail::kCosineRange<T>));
  const auto out_of_range = [&](hn::Vec<D> largest, size_t keys) {
    return hn::And(hn::FirstN(d, keys),
                   hn::Or(hn::Lt(largest, smallest), hn::Ge(largest, beyond)));
  };
  if (hn::AllFalse(d, out_of_range(low, std::min(valid, N))) &&
      hn::AllFalse(d, out_of_range(high, valid > N ? valid - N : 0))) {
    return;
  }
  for (size_t lane = 0; lane < valid; ++lane) {
    const int exponent = detail::CosineExponent(packed + lane, depth, width);
    if (exponent != 0) {
      detail::ScaleRow(packed + lane, depth, width, exponent, packed + lane,
                       width);
    }
  }
}

template <typename T>
void PackKeys(Distance distance, const detail::RowList<T>& keys,
              size_t panel_begin, size_t panel_end, T* HWY_RESTRICT panels,
              T* HWY_RESTRICT key_factor) {
  const hn::ScalableTag<T> d;
  const size_t N = hn::Lanes(d);
  const size_t width = 2 * N;
  const size_t depth = keys.cols;
  constexpr bool kTranspose = VectorTranspose<decltype(d)>();
  // Narrow keys widened: a half panel's (transposed), or one key's.
  std::vector<T> widened(keys.is_narrow() ? (kTranspose ? N : 1) * depth : 0);
  for (size_t panel = panel_begin; panel < panel_end; ++panel) {
    T* HWY_RESTRICT packed = panels + panel * width * depth;
    const size_t first_key = panel * width;
    const size_t valid =
        first_key < keys.rows ? std::min(width, keys.rows - first_key) : 0;
    if constexpr (kTranspose) {
      // Each half panel's N keys, N coordinates at a time.
      for (size_t half = 0; half < 2; ++half) {
        const size_t count =
            valid > half * N ? std::min(N, valid - half * N) : 0;
        const T* rows[hn::MaxLanes(decltype(d)())];
        for (size_t i = 0; i < count; ++i) {
          // (No buffer for rows read in place: `widened` is empty.)
          rows[i] =
              RowOf(keys, first_key + half * N + i,
                    keys.is_narrow() ? widened.data() + i * depth : nullptr);
        }
        // The next half panel's rows, meanwhile (packing faster so:
        // docs/benchmarks.md, "Design evidence": PackKeys).
        const size_t next = first_key + (half + 1) * N;
        for (size_t i = 0; !keys.is_narrow() && i < N && next + i < keys.rows;
             ++i) {
          PrefetchLines(reinterpret_cast<const char*>(keys.row(next + i)),
                        depth * sizeof(T));
        }
        for (size_t p = 0; p < depth; p += N) {
          TransposeColumns(d, rows, count, p, std::min(N, depth - p),
                           packed + p * width + half * N, width);
        }
      }
    } else {
      for (size_t lane = 0; lane < width; ++lane) {
        if (lane < valid) {
          const T* HWY_RESTRICT key =
              RowOf(keys, first_key + lane, widened.data());
          for (size_t p = 0; p < depth; ++p) packed[p * width + lane] = key[p];
        } else {
          for (size_t p = 0; p < depth; ++p) packed[p * width + lane] = T(0);
        }
      }
    }
    if (distance == Distance::cosine) ScaleCosineKeys(d, packed, depth, valid);
    auto squares_low = hn::Zero(d), squares_high = hn::Zero(d);
    // Only the Gram forms (squared norms) and cosine (inverse norms) read
    // key_factor; dot and manhattan leave it 0.
    const bool norms = distance == Distance::sqeuclidean ||
                       distance == Distance::euclidean ||
                       distance == Distance::cosine;
    for (size_t p = 0; norms && p < depth; ++p) {
      const auto low = hn::Load(d, packed + p * width);
      const auto high = hn::Load(d, packed + p * width + N);
      squares_low = hn::MulAdd(low, low, squares_low);
      squares_high = hn::MulAdd(high, high, squares_high);
    }
    if (distance == Distance::cosine) {
      const auto one = hn::Set(d, T(1));
      const auto zero = hn::Zero(d);
      squares_low = hn::IfThenElseZero(hn::Gt(squares_low, zero),
                                       hn::Div(one, hn::Sqrt(squares_low)));
      squares_high = hn::IfThenElseZero(hn::Gt(squares_high, zero),
                                        hn::Div(one, hn::Sqrt(squares_high)));
    }
    hn::Store(squares_low, d, key_factor + first_key);
    hn::Store(squares_high, d, key_factor + first_key + N);
  }
}

// Where a sweep writes: query rows [row_begin, row_end) × the keys of
// panels [panel_begin, panel_end), result (i, j) at out(i − row_origin,
// j − key_origin).
template <typename T>
struct ScoreWindow {
  MatrixView<T> out;
  size_t row_begin, row_end;
  size_t panel_begin, panel_end;
  size_t row_origin = 0, key_origin = 0;
};

// Runs the tile kernel over a window of queries × keys.
template <class Step, typename T, class Finisher>
void SweepTiles(ConstMatrixView<T> queries, const detail::PackedKeys<T>& keys,
                const ScoreWindow<T>& window, const Finisher& finisher) {
  const hn::ScalableTag<T> d;
  using V = hn::Vec<decltype(d)>;
  const size_t N = hn::Lanes(d);
  const size_t width = 2 * N;
  const size_t depth = queries.cols;
  const size_t row_begin = window.row_begin, row_end = window.row_end;
  const size_t depth_block =
      std::max<size_t>(1, std::min(depth, kDepthBlockBytes / sizeof(T)));
  const size_t panels_per_block =
      std::max<size_t>(1, kKeyBlockBytes / (width * depth_block * sizeof(T)));
  HWY_ALIGN T tile[kTileRows * 2 * kMaxLanesBytes / sizeof(T)];
  T* in_tile[kTileRows];
  for (size_t r = 0; r < kTileRows; ++r) in_tile[r] = tile + 2 * r * N;
  // Sums kept as they are, in one pass: whole tiles are stored into the
  // scores directly (faster than through `tile`: docs/benchmarks.md,
  // "Design evidence": SweepTiles).
  const bool store_direct =
      std::is_same<Finisher, KeepSums>::value && depth <= depth_block;

  for (size_t panel_begin = window.panel_begin; panel_begin < window.panel_end;
       panel_begin += panels_per_block) {
    const size_t panel_end =
        std::min(window.panel_end, panel_begin + panels_per_block);
    // depth = 0 still runs one (empty) pass so that every output is written.
    for (size_t pass_begin = 0; pass_begin == 0 || pass_begin < depth;
         pass_begin += depth_block) {
      const size_t pass_depth = std::min(depth_block, depth - pass_begin);
      const bool first_pass = pass_begin == 0;
      const bool last_pass = pass_begin + pass_depth >= depth;
      for (size_t tile_row = row_begin; tile_row < row_end;
           tile_row += kTileRows) {
        const size_t tile_rows = std::min(kTileRows, row_end - tile_row);
        const T* rows[kTileRows];
        detail::TileRowPointers(queries, tile_row, tile_rows, pass_begin, rows);
        for (size_t panel = panel_begin; panel < panel_end; ++panel) {
          const size_t key = panel * width;
          const size_t key_count = std::min(width, keys.count - key);
          const size_t low_count = std::min(N, key_count);
          const size_t high_count = key_count - low_count;
          const T* panel_data =
              keys.panels + panel * width * depth + pass_begin * width;
          if (store_direct && tile_rows == kTileRows && key_count == width) {
            T* targets[kTileRows];
            for (size_t r = 0; r < kTileRows; ++r) {
              targets[r] = window.out.row(tile_row + r - window.row_origin) +
                           (key - window.key_origin);
            }
            ComputeTile<Step>(d, rows, panel_data, pass_depth, targets);
            continue;
          }
          ComputeTile<Step>(d, rows, panel_data, pass_depth, in_tile);
          for (size_t r = 0; r < tile_rows; ++r) {
            const size_t query_row = tile_row + r;
            T* HWY_RESTRICT target =
                window.out.row(query_row - window.row_origin) +
                (key - window.key_origin);
            V low = hn::Load(d, tile + 2 * r * N);
            V high = hn::Load(d, tile + (2 * r + 1) * N);
            if (!first_pass) {
              low = hn::Add(LoadPrefix(d, target, low_count), low);
              if (high_count != 0) {
                high = hn::Add(LoadPrefix(d, target + N, high_count), high);
              }
            }
            if (last_pass) {
              low = finisher(d, query_row, key, low);
              if (high_count != 0) high = finisher(d, query_row, key + N, high);
            }
            StorePrefix(d, low, target, low_count);
            if (high_count != 0) StorePrefix(d, high, target + N, high_count);
          }
        }
      }
    }
  }
}

// Distances of a window of queries × key panels.
template <typename T>
void DistanceWindow(Distance distance, ConstMatrixView<T> queries,
                    const detail::RowList<T>& keys,
                    const detail::PackedKeys<T>& packed,
                    const ScoreWindow<T>& window) {
  const size_t depth = queries.cols;
  // The Gram form pays from here on; below, (q−k)² is as cheap and exact.
  constexpr size_t kGramMinDepth = 16;
  std::vector<T> copy;  // cosine: a chunk's rows scaled, where one needs it
  for (size_t first = window.row_begin; first < window.row_end;
       first += kRowChunk) {
    const size_t last = std::min(window.row_end, first + kRowChunk);
    ScoreWindow<T> chunk = window;
    chunk.row_begin = first;
    chunk.row_end = last;
    T row_factor[kRowChunk];
    switch (distance) {
      case Distance::dot:
        SweepTiles<DotStep>(queries, packed, chunk, KeepSums());
        break;
      case Distance::manhattan:
        SweepTiles<AbsoluteDifferenceStep>(queries, packed, chunk, KeepSums());
        break;
      case Distance::cosine: {
        // Rows far from 1 scaled by a power of two (arch/cosine_scale.h):
        // where the chunk has one, the sweep reads a scaled copy of it, its
        // rows 0 to last − first (row_origin moved by modular arithmetic).
        ConstMatrixView<T> rows = queries;
        ScoreWindow<T> sweep = chunk;
        size_t factor_first = first;
        int exponents[kRowChunk];
        bool scaled = false;
        for (size_t i = first; i < last; ++i) {
          exponents[i - first] = detail::CosineExponent(queries.row(i), depth);
          scaled |= exponents[i - first] != 0;
        }
        if (scaled) {
          copy.resize((last - first) * depth);
          for (size_t i = first; i < last; ++i) {
            detail::ScaleRow(queries.row(i), depth, 1, exponents[i - first],
                             copy.data() + (i - first) * depth);
          }
          rows = ConstMatrixView<T>(copy.data(), last - first, depth);
          sweep.row_begin = 0;
          sweep.row_end = last - first;
          sweep.row_origin = window.row_origin - first;
          factor_first = 0;
        }
        for (size_t i = 0; i < last - first; ++i) {
          const T* HWY_RESTRICT row = rows.row(factor_first + i);
          T squares = 0;
          for (size_t p = 0; p < depth; ++p) squares += row[p] * row[p];
          row_factor[i] = squares > 0 ? T(1) / std::sqrt(squares) : 0;
        }
        SweepTiles<DotStep>(
            rows, packed, sweep,
            CosineFromDots<T>{row_factor, packed.key_factor, factor_first});
        break;
      }
      case Distance::sqeuclidean:
      case Distance::euclidean: {
        const bool take_root = distance == Distance::euclidean;
        if (depth < kGramMinDepth) {
          if (take_root) {
            SweepTiles<SquaredDifferenceStep>(queries, packed, chunk,
                                              SquareRootOfSums());
          } else {
            SweepTiles<SquaredDifferenceStep>(queries, packed, chunk,
                                              KeepSums());
          }
          break;
        }
        for (size_t i = first; i < last; ++i) {
          T squares = 0;
          for (size_t p = 0; p < depth; ++p) {
            squares += queries(i, p) * queries(i, p);
          }
          row_factor[i - first] = squares;
        }
        SweepTiles<DotStep>(
            queries, packed, chunk,
            SquaredDistanceFromDots<T>{row_factor, packed.key_factor, first,
                                       queries, keys, take_root});
        break;
      }
    }
  }
}

// Rows [row_begin, row_end) of the all-pairs matrix `out`.
template <typename T>
void DistanceRows(Distance distance, ConstMatrixView<T> queries,
                  const detail::RowList<T>& keys,
                  const detail::PackedKeys<T>& packed, MatrixView<T> out,
                  size_t row_begin, size_t row_end) {
  const size_t panel_count =
      (packed.count + packed.panel_width - 1) / packed.panel_width;
  DistanceWindow(distance, queries, keys, packed,
                 ScoreWindow<T>{out, row_begin, row_end, 0, panel_count});
}

}  // namespace HWY_NAMESPACE
}  // namespace attnpool
HWY_AFTER_NAMESPACE();

#endif  // ATTNPOOL_ARCH_DISTANCE_INL_H_
