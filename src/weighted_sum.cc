// weighted_sum: argument checks, value packing and the OpenMP driver.
#include <attnpool/error.h>
#include <attnpool/weighted_sum.h>

#include <algorithm>
#include <new>

#include "arch/weighted_sum.h"
#include "src/aligned_buffer.h"
#include "src/dispatch.h"
#include "src/threads.h"
#include "src/kept_outputs.h"
#include "core/validate.h"

namespace attnpool {
namespace {

// Output rows per dispatched call: a multiple of the tile height (6), large
// enough that the slice of values a pass keeps in L2 serves many rows before
// the next slice is fetched.
constexpr size_t kRowBlock = 192;
// Value rows packed per dispatched call.
constexpr size_t kPackRows = 512;
// Multiply-adds below which a call runs on one thread: waking a second one
// costs more (results are the same either way).
constexpr double kMinParallelWork = 1 << 18;

template <typename T>
void WeightedSum(ConstMatrixView<T> weights, ConstMatrixView<T> values,
                 MatrixView<T> out, const Execution& execution) {
  detail::EnsureDispatchReady();
  detail::CheckExecution(execution);
  detail::CheckBinaryRowOp("weights", weights, "values", values, "out", out,
                           detail::Pairing::product);

  const size_t rows = weights.rows, depth = weights.cols;
  const size_t columns = values.cols;
  detail::RecordRunTarget(0);
  if (rows == 0 || columns == 0) return;

  detail::KeptOutputs kept(execution);
  kept.Keep(out);
  detail::Workers threads = detail::WorkersOf(execution);
  if (double(rows) * double(depth) * double(columns) < kMinParallelWork) {
    threads.threads = 1;
  }
  const size_t packed_size =
      depth == 0 ? 0 : detail::WeightedSumPackedSize(values, rows);
  // Allocation failure throws std::bad_alloc here, before any output write.
  hwy::AlignedFreeUniquePtr<T[]> packed;
  if (packed_size != 0) {
    packed = detail::AllocateBuffer<T>(packed_size);
    detail::ForEachRowBlock(depth, kPackRows, threads,
                            [&](size_t begin, size_t end) {
                              return detail::PackWeightedSumValues(
                                  values, begin, end, packed.get());
                            });
  }

  // Work items: row blocks × column ranges. The columns are split only when
  // there are fewer row blocks than threads; either way each output element
  // is computed by one call in the same order, so the split changes nothing.
  const size_t row_calls = (rows + kRowBlock - 1) / kRowBlock;
  const size_t panel_width = detail::WeightedSumPanelWidth(T());
  const size_t panel_count = (columns + panel_width - 1) / panel_width;
  size_t column_calls = 1;
  if (row_calls < static_cast<size_t>(threads.threads)) {
    const size_t per_row_call = (threads.threads + row_calls - 1) / row_calls;
    column_calls = std::min(panel_count, per_row_call);
  }
  const size_t panels_per_call =
      (panel_count + column_calls - 1) / column_calls;
  const size_t columns_per_call = panels_per_call * panel_width;
  column_calls = (panel_count + panels_per_call - 1) / panels_per_call;
  const size_t calls = row_calls * column_calls;
  detail::ForEachRowBlock(calls, 1, threads, [&](size_t call, size_t) {
    const size_t row_begin = call / column_calls * kRowBlock;
    const size_t column_begin = call % column_calls * columns_per_call;
    return detail::WeightedSumRows(
        weights, values, packed.get(), out, row_begin,
        std::min(rows, row_begin + kRowBlock), column_begin,
        std::min(columns, column_begin + columns_per_call));
  });
}

}  // namespace

void weighted_sum(ConstMatrixView<float> weights, ConstMatrixView<float> values,
                  MatrixView<float> out, const Execution& execution) {
  WeightedSum(weights, values, out, execution);
}

void weighted_sum(ConstMatrixView<double> weights,
                  ConstMatrixView<double> values, MatrixView<double> out,
                  const Execution& execution) {
  WeightedSum(weights, values, out, execution);
}

}  // namespace attnpool
