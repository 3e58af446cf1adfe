// Per-ISA kernel stage (docs/design.md §1, stage 2): element-wise, in place.

#if defined(ATTNPOOL_ARCH_KERNEL_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ATTNPOOL_ARCH_KERNEL_INL_H_
#undef ATTNPOOL_ARCH_KERNEL_INL_H_
#else
#define ATTNPOOL_ARCH_KERNEL_INL_H_
#endif

#include <algorithm>

#include "arch/math-inl.h"
#include "arch/prefix_io-inl.h"
#include "arch/stages.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace attnpool {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// u² from the stage-1 value: (s/h)/h for squared distances (two products, so
// that 1/h² never over- or underflows on its own), (r/h)² for distances.
template <class D, class V = hn::Vec<D>, typename T = hn::TFromD<D>>
HWY_INLINE V ScaledSquare(D d, const detail::KernelPlan<T>& plan, V value) {
  const V inverse = hn::Set(d, plan.inverse_bandwidth);
  if (plan.input == DistanceOutput::squared_distance) {
    return hn::Mul(hn::Mul(value, inverse), inverse);
  }
  const V u = hn::Mul(value, inverse);
  return hn::Mul(u, u);
}

// u = r/h (a square root of a squared distance).
template <class D, class V = hn::Vec<D>, typename T = hn::TFromD<D>>
HWY_INLINE V Scaled(D d, const detail::KernelPlan<T>& plan, V value) {
  const V r =
      plan.input == DistanceOutput::squared_distance ? hn::Sqrt(value) : value;
  return hn::Mul(r, hn::Set(d, plan.inverse_bandwidth));
}

// cos(π·x/2) for x = u² in [0, 1]: the Taylor series of cos(π·u/2) in u²
// through (π·u/2)¹⁴ for float, ²² for double (truncation below 7e-11
// resp. 8e-20 at u = 1), coefficients rounded to T, by Horner.
template <typename T>
struct CosHalfPiSeries {
  static constexpr int kTerms = sizeof(T) == 4 ? 8 : 12;
  double coefficients[kTerms] = {1};
  constexpr CosHalfPiSeries() {
    constexpr double kQuarterPiSquared = 2.4674011002723395;  // (π/2)²
    for (int k = 1; k < kTerms; ++k) {
      coefficients[k] = -coefficients[k - 1] * kQuarterPiSquared /
                        double((2 * k - 1) * (2 * k));
    }
  }
};

template <class D, class V = hn::Vec<D>, typename T = hn::TFromD<D>>
HWY_INLINE V CosHalfPiOfSquare(D d, V x) {
  constexpr CosHalfPiSeries<T> series;
  constexpr int kTerms = CosHalfPiSeries<T>::kTerms;
  V p = hn::Set(d, static_cast<T>(series.coefficients[kTerms - 1]));
  for (int k = kTerms - 2; k >= 0; --k) {
    p = hn::MulAdd(p, x, hn::Set(d, static_cast<T>(series.coefficients[k])));
  }
  return p;
}

// The vector formula of each kernel (its line in kernel.h's table): from
// the argument x the table names (u or u² ≥ 0 or +inf for the distance
// kernels, scale·s for exp), the weight, or for the exponential kernels the
// logit whose exp is the weight. NaN is the caller's (KernelWeights).
template <class D, class V = hn::Vec<D>, typename T = hn::TFromD<D>>
HWY_INLINE V KernelFormula(D d, Kernel kernel, V x) {
  const V one = hn::Set(d, T(1));
  const V zero = hn::Zero(d);
  switch (kernel) {
    case Kernel::gaussian:
      return hn::Mul(hn::Set(d, T(-0.5)), x);
    case Kernel::exp:
      return x;
    case Kernel::constant:
      return one;
    case Kernel::boxcar:
      return hn::IfThenElseZero(hn::Lt(x, one), one);
    case Kernel::triangular:
    case Kernel::epanechnikov:
      return hn::Max(hn::Sub(one, x), zero);
    case Kernel::biweight: {
      const V t = hn::Max(hn::Sub(one, x), zero);
      return hn::Mul(t, t);
    }
    case Kernel::triweight: {
      const V t = hn::Max(hn::Sub(one, x), zero);
      return hn::Mul(hn::Mul(t, t), t);
    }
    case Kernel::tricube: {
      const V t = hn::Max(hn::NegMulAdd(hn::Mul(x, x), x, one), zero);
      return hn::Mul(hn::Mul(t, t), t);
    }
    case Kernel::cosine:
      return hn::IfThenElseZero(hn::Lt(x, one), CosHalfPiOfSquare(d, x));
  }
  return zero;  // (not reached: the kernel was validated)
}

// The argument of the plan's kernel formula from a stage-1 value.
template <class D, class V = hn::Vec<D>, typename T = hn::TFromD<D>>
HWY_INLINE V KernelArgumentOf(D d, const detail::KernelPlan<T>& plan, V value) {
  switch (plan.argument) {
    case KernelArgument::u_squared:
      return ScaledSquare(d, plan, value);
    case KernelArgument::u:
      return Scaled(d, plan, value);
    case KernelArgument::score:
      return hn::Mul(hn::Set(d, plan.scale), value);
    case KernelArgument::none:
      break;
  }
  return value;
}

// One vector of weights (or logits, for exponential kernels when the plan
// asks). NaN inputs stay NaN except for kernels of no argument (constant),
// whose weight is 1.
template <class D, class V = hn::Vec<D>, typename T = hn::TFromD<D>>
HWY_INLINE V KernelWeights(D d, const detail::KernelPlan<T>& plan, V value) {
  const V formula =
      KernelFormula(d, plan.kernel, KernelArgumentOf(d, plan, value));
  if (plan.exponential) {
    return plan.write_logits ? formula
                             : attnpool::HWY_NAMESPACE::Exp(d, formula);
  }
  if (plan.argument == KernelArgument::none) return formula;
  // Comparisons and Max drop NaN: put it back.
  return hn::IfThenElse(hn::Eq(value, value), formula, value);
}

template <typename T>
void ApplyKernelRows(const detail::KernelPlan<T>& plan, MatrixView<T> values,
                     size_t row_begin, size_t row_end) {
  const hn::ScalableTag<T> d;
  const size_t N = hn::Lanes(d);
  for (size_t i = row_begin; i < row_end; ++i) {
    T* HWY_RESTRICT row = values.row(i);
    size_t j = 0;
    for (; j + N <= values.cols; j += N) {
      hn::StoreU(KernelWeights(d, plan, hn::LoadU(d, row + j)), d, row + j);
    }
    if (j < values.cols) {
      const size_t count = values.cols - j;
      StorePrefix(d, KernelWeights(d, plan, LoadPrefix(d, row + j, count)),
                  row + j, count);
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace attnpool
HWY_AFTER_NAMESPACE();

#endif  // ATTNPOOL_ARCH_KERNEL_INL_H_
