#include "src/math.h"

#include "arch/math.h"
#include "src/dispatch.h"

namespace attnpool {
namespace detail {

int64_t ExpArray(const float* in, float* out, size_t count) {
  EnsureDispatchReady();
  return DispatchExpArray(in, out, count);
}
int64_t ExpArray(const double* in, double* out, size_t count) {
  EnsureDispatchReady();
  return DispatchExpArray(in, out, count);
}
int64_t TanhArray(const float* in, float* out, size_t count) {
  EnsureDispatchReady();
  return DispatchTanhArray(in, out, count);
}
int64_t TanhArray(const double* in, double* out, size_t count) {
  EnsureDispatchReady();
  return DispatchTanhArray(in, out, count);
}

}  // namespace detail
}  // namespace attnpool
