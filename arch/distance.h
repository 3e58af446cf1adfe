// The distance stage's interface between target-independent src/ and the
// per-ISA arch/ code.
// Each function dispatches (HWY_DYNAMIC_DISPATCH) to the active target and
// returns the Highway target bit it ran on. No OpenMP here: src/ splits the
// work into blocks and calls these once per block.
#pragma once

#include <cstddef>
#include <cstdint>

#include <attnpool/distance.h>
#include <attnpool/matrix.h>

#include "arch/row_list.h"

namespace attnpool {
namespace detail {

// Keys packed for the distance tile kernel: panels of panel_width keys, each
// stored depth-major (element [p][c] = key c of the panel, coordinate p), so
// one vector load fetches coordinate p of panel_width/2 keys.
// Keys past the end are zero. `key_factor` holds one value per padded key:
// ‖k‖² for sqeuclidean/euclidean, 1/‖k‖ (0 for ‖k‖ = 0) for cosine, unused
// otherwise.
template <typename T>
struct PackedKeys {
  const T* panels = nullptr;
  const T* key_factor = nullptr;
  size_t count = 0;        // m: real keys
  size_t depth = 0;        // d
  size_t panel_width = 0;  // keys per panel (2 vectors)
};

// Keys per panel on the active target (a multiple of the vector length).
size_t DistancePanelWidth(float);
size_t DistancePanelWidth(double);
// Queries per register tile of the score kernel on the active target.
size_t DistanceTileRows(float);
size_t DistanceTileRows(double);

// Packs keys [panel_begin * panel_width, panel_end * panel_width) into
// `panels` (sized for all panels: padded_count × d) and their key_factor.
int64_t PackDistanceKeys(Distance distance, const RowList<float>& keys,
                         size_t panel_begin, size_t panel_end, float* panels,
                         float* key_factor);
int64_t PackDistanceKeys(Distance distance, const RowList<double>& keys,
                         size_t panel_begin, size_t panel_end, double* panels,
                         double* key_factor);

// out rows [row_begin, row_end) of the all-pairs distance matrix.
// `keys` are the original rows (for exact recomputation of cancelling
// pairs).
int64_t DistanceRows(Distance distance, ConstMatrixView<float> queries,
                     const RowList<float>& keys,
                     const PackedKeys<float>& packed, MatrixView<float> out,
                     size_t row_begin, size_t row_end);
int64_t DistanceRows(Distance distance, ConstMatrixView<double> queries,
                     const RowList<double>& keys,
                     const PackedKeys<double>& packed, MatrixView<double> out,
                     size_t row_begin, size_t row_end);

}  // namespace detail
}  // namespace attnpool
