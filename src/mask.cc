// The public cuts of a mask (mask.h) over core/mask.h.
#include <attnpool/mask.h>

#include "core/mask.h"

namespace attnpool {

template <typename T>
Mask<T> mask_rows(const Mask<T>& mask, size_t first, size_t count) {
  return detail::MaskRows(mask, first, count);
}

template Mask<float> mask_rows(const Mask<float>&, size_t, size_t);
template Mask<double> mask_rows(const Mask<double>&, size_t, size_t);

}  // namespace attnpool
