// Vectorized exp and tanh for float and double lanes (per-ISA, header-only).
//
// Meant to be called inside other kernels: everything is HWY_INLINE, uses no
// memory and no static vector data (constants are Set() from scalars, which
// compilers hoist out of the callers' loops), and compiles for every target,
// SCALAR and the sizeless SVE vectors included. Call them qualified,
// `HWY_NAMESPACE::Exp(d, x)`, so that argument-dependent lookup cannot pick
// hwy::HWY_NAMESPACE::Exp where hwy/contrib/math is also included.
//
// ---------------------------------------------------------------- contract
// Errors are relative to the exact value. "Measured" is the largest error
// tests/test_math.cc finds (every 997th float, whole binades and the
// thresholds exhaustively; 1.2M random doubles) against std::exp / std::tanh
// in double (float lanes) and long double (double lanes), on x86 targets with
// FMA (AVX3, AVX2) / without (SSE4, SCALAR); the test prints it per target.
//
// Exp(d, x):
//   float : relative error ≤ 2e-7 (measured 7.4e-8 / 9.0e-8) for
//           −87.336540 ≤ x ≤ 88.722832, i.e. wherever exp(x) is a normal
//           float; about 1.5 ulp at worst, 0.5 of it the final rounding.
//   double: relative error ≤ 4e-16 (measured 1.6e-16 / 1.9e-16) for
//           −708.39642 ≤ x ≤ 709.78271, wherever exp(x) is a normal double.
//   exp(±0) = 1 exactly. Where exp(x) is below the smallest normal number
//   (and for −inf) the result is exactly +0, never a denormal, so nothing
//   downstream takes slow denormal paths. Where it would round to infinity
//   (and for +inf) the result is +inf. NaN gives NaN.
// Tanh(d, x):
//   float : relative error ≤ 2e-7 (measured 8.0e-8 / 9.1e-8) for every x,
//           denormals included (tanh(x) = x there); tanh(±0) = ±0.
//   double: relative error ≤ 5e-16 (measured 2.7e-16) for every x.
//   tanh(±inf) = ±1, and ±1 wherever the rounded result is ±1. NaN gives NaN.
//
// ------------------------------------------------------------------ method
// exp: x = n·ln2 + r with n = round(x·log2(e)) and |r| ≤ ln2/2 (Cody–Waite:
// ln2 split into a short high part, so that n·ln2_high is exact, and a low
// part). e^r is a polynomial p(r) = 1 + r + c2·r² + … of degree 6 (float) or
// 11 (double), minimax for relative error with coefficients rounded to the
// lane type (approximation error 3.3e-9 resp. 2.3e-17), by Horner with FMAs.
// n comes out of the rounding itself: x·log2(e) + 1.5·2^23 (1.5·2^52) holds
// n in its low mantissa bits, so one add gives n both as a float and as
// integer bits. Scaling by 2^n adds n to the exponent field of p(r) as an
// integer. In range that never wraps: n = 128 (1024) only with p(r) < 1
// (exponent field ≤ 126 + 128) and n = −126 (−1022) only with p(r) ≥ 1; at
// the ends of the range p(r) is 7.4e-6 below resp. 4.5e-6 above 1 (double:
// 2.4e-14, 2.7e-14), hundreds of times the polynomial's error.
// Out-of-range lanes compute garbage that the final selects replace by 0,
// +inf or NaN, so x needs no clamping. When every lane has |x| ≤ 87.3365
// (708.396), inside the range, one compare and a well-predicted branch skip
// those selects: the arguments of softmax and Gaussian kernels always do.
//
// tanh: for |x| < 1 (double: 0.625) an odd polynomial |x| + |x|³·P(x²),
// minimax for relative error, degree 6 (10) in x², exact for tiny x. Beyond,
// 1 − 2/(e^{2|x|} + 1): there tanh ≥ 0.76 (0.55), so the error of 2/(e + 1)
// reaches the result damped by (2/(e + 1))/tanh ≤ 0.31 (0.8). |x| is clamped
// at 10 (20) first, where tanh already rounds to 1, so the exp cannot
// overflow. The sign of x is copied onto the result.
#if defined(ATTNPOOL_ARCH_MATH_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ATTNPOOL_ARCH_MATH_INL_H_
#undef ATTNPOOL_ARCH_MATH_INL_H_
#else
#define ATTNPOOL_ARCH_MATH_INL_H_
#endif

#include <limits>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace attnpool {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

namespace math_impl {

template <typename T>
struct ExpConstants;

template <>
struct ExpConstants<float> {
  static constexpr float kLog2e = 0x1.715476p+0f;
  // Adding it rounds x·log2(e) to an integer in the low mantissa bits.
  static constexpr float kRoundingShift = 0x1.8p23f;
  // ln2 = kLn2High + kLn2Low; kLn2High has 15 significant bits, so n·kLn2High
  // is exact for |n| < 2^9.
  static constexpr float kLn2High = 0x1.62e4p-1f;
  static constexpr float kLn2Low = 0x1.7f7d1cp-20f;
  static constexpr int kMantissaBits = 23;
  // The largest x whose exp(x) rounds to a finite float (exp(x) < FLT_MAX
  // + ulp/2), and the smallest x with exp(x) ≥ FLT_MIN.
  static constexpr float kHighest = 0x1.62e42ep+6f;  // 88.7228317
  static constexpr float kLowest = -0x1.5d589ep+6f;  // −87.3365402
};

template <>
struct ExpConstants<double> {
  static constexpr double kLog2e = 0x1.71547652b82fep+0;
  static constexpr double kRoundingShift = 0x1.8p52;
  // kLn2High has 32 significant bits: n·kLn2High is exact for |n| < 2^21.
  static constexpr double kLn2High = 0x1.62e42feep-1;
  static constexpr double kLn2Low = 0x1.a39ef35793c76p-33;
  static constexpr int kMantissaBits = 52;
  // As for float, with DBL_MAX and DBL_MIN.
  static constexpr double kHighest = 0x1.62e42fefa39efp+9;  // 709.782712893
  static constexpr double kLowest = -0x1.6232bdd7abcd2p+9;  // −708.396418532
};

// e^r ≈ 1 + r + c2·r² + … + c6·r⁶ on |r| ≤ ln2/2 (relative error 3.3e-9).
template <class D, class V>
HWY_INLINE V ExpPolynomial(D d, V r, float) {
  V p = hn::Set(d, 0x1.6ad158p-10f);
  p = hn::MulAdd(p, r, hn::Set(d, 0x1.123f30p-7f));
  p = hn::MulAdd(p, r, hn::Set(d, 0x1.55584ep-5f));
  p = hn::MulAdd(p, r, hn::Set(d, 0x1.55548ap-3f));
  p = hn::MulAdd(p, r, hn::Set(d, 0x1.fffffcp-2f));
  const V one = hn::Set(d, 1.0f);
  p = hn::MulAdd(p, r, one);
  return hn::MulAdd(p, r, one);
}

// e^r ≈ 1 + r + c2·r² + … + c11·r¹¹ on |r| ≤ ln2/2 (relative error 2.3e-17).
template <class D, class V>
HWY_INLINE V ExpPolynomial(D d, V r, double) {
  V p = hn::Set(d, 0x1.ad661b4351b0bp-26);
  p = hn::MulAdd(p, r, hn::Set(d, 0x1.28b312d521fdfp-22));
  p = hn::MulAdd(p, r, hn::Set(d, 0x1.71df452365741p-19));
  p = hn::MulAdd(p, r, hn::Set(d, 0x1.a01992cfdd38dp-16));
  p = hn::MulAdd(p, r, hn::Set(d, 0x1.a01a011054f6bp-13));
  p = hn::MulAdd(p, r, hn::Set(d, 0x1.6c16c187817d0p-10));
  p = hn::MulAdd(p, r, hn::Set(d, 0x1.1111111130de1p-7));
  p = hn::MulAdd(p, r, hn::Set(d, 0x1.555555554f36ep-5));
  p = hn::MulAdd(p, r, hn::Set(d, 0x1.55555555554a2p-3));
  p = hn::MulAdd(p, r, hn::Set(d, 0x1.0000000000010p-1));
  const V one = hn::Set(d, 1.0);
  p = hn::MulAdd(p, r, one);
  return hn::MulAdd(p, r, one);
}

// exp(x) for kLowest ≤ x ≤ kHighest (see the contract); garbage elsewhere.
template <class D, class V>
HWY_INLINE V ExpInRange(D d, V x) {
  using T = hn::TFromD<D>;
  using K = ExpConstants<T>;
  const hn::RebindToSigned<D> di;
  const V shift = hn::Set(d, K::kRoundingShift);
  // |x·log2(e)| < 2^22 (2^51) in range: the sum's low bits hold n exactly.
  const V shifted = hn::MulAdd(x, hn::Set(d, K::kLog2e), shift);
  const V n = hn::Sub(shifted, shift);
  V r = hn::NegMulAdd(n, hn::Set(d, K::kLn2High), x);  // exact
  r = hn::NegMulAdd(n, hn::Set(d, K::kLn2Low), r);
  const V p = ExpPolynomial(d, r, T());
  // n·2^mantissa_bits, from the low bits of `shifted` (the high bits of the
  // shift constant are shifted out).
  const auto exponent =
      hn::ShiftLeft<K::kMantissaBits>(hn::BitCast(di, shifted));
  return hn::BitCast(d, hn::Add(hn::BitCast(di, p), exponent));
}

// tanh(x)/x − 1 ≈ x²·P(x²), |x| < 1, for float (relative error 4.7e-9).
template <class D, class V>
HWY_INLINE V TanhPolynomial(D d, V s, float) {
  V p = hn::Set(d, -0x1.77d56ap-12f);
  p = hn::MulAdd(p, s, hn::Set(d, 0x1.2da290p-9f));
  p = hn::MulAdd(p, s, hn::Set(d, -0x1.046070p-7f));
  p = hn::MulAdd(p, s, hn::Set(d, 0x1.6009b6p-6f));
  p = hn::MulAdd(p, s, hn::Set(d, -0x1.b9623ap-5f));
  p = hn::MulAdd(p, s, hn::Set(d, 0x1.110be4p-3f));
  return hn::MulAdd(p, s, hn::Set(d, -0x1.55553cp-2f));
}

// The same for double, |x| < 0.625 (relative error 1.1e-17).
template <class D, class V>
HWY_INLINE V TanhPolynomial(D d, V s, double) {
  V p = hn::Set(d, -0x1.0d98ca11f7cf5p-16);
  p = hn::MulAdd(p, s, hn::Set(d, 0x1.4389c9b4daaf6p-14));
  p = hn::MulAdd(p, s, hn::Set(d, -0x1.df523f1685483p-13));
  p = hn::MulAdd(p, s, hn::Set(d, 0x1.3365ac9ec8ef5p-11));
  p = hn::MulAdd(p, s, hn::Set(d, -0x1.7d68938d556ebp-10));
  p = hn::MulAdd(p, s, hn::Set(d, 0x1.d6cf26882fef5p-9));
  p = hn::MulAdd(p, s, hn::Set(d, -0x1.226e161fd4018p-7));
  p = hn::MulAdd(p, s, hn::Set(d, 0x1.664f477a63d0dp-6));
  p = hn::MulAdd(p, s, hn::Set(d, -0x1.ba1ba1b503b07p-5));
  p = hn::MulAdd(p, s, hn::Set(d, 0x1.111111110ac94p-3));
  return hn::MulAdd(p, s, hn::Set(d, -0x1.55555555554ffp-2));
}

template <typename T>
struct TanhConstants;
template <>
struct TanhConstants<float> {
  static constexpr float kPolynomialLimit = 1.0f;
  // tanh(x) rounds to 1 from 9.01 on; e^20 is far from overflow.
  static constexpr float kSaturation = 10.0f;
};
template <>
struct TanhConstants<double> {
  static constexpr double kPolynomialLimit = 0.625;
  static constexpr double kSaturation = 20.0;  // rounds to 1 from 19.06 on
};

}  // namespace math_impl

// e^x, float or double lanes. Contract at the top of this file.
template <class D, class V>
HWY_INLINE V Exp(D d, V x) {
  using T = hn::TFromD<D>;
  using K = math_impl::ExpConstants<T>;
  const V value = math_impl::ExpInRange(d, x);
  // |x| ≤ −kLowest (< kHighest) lies inside the range: no lane needs fixing.
  // One compare and a well-predicted branch instead of the two compares and
  // selects below: faster on AVX-512 (docs/benchmarks.md, "Design
  // evidence": Exp).
  if (HWY_LIKELY(hn::AllTrue(d, hn::Le(hn::Abs(x), hn::Set(d, -K::kLowest))))) {
    return value;
  }
  // exp(x) < smallest normal (and x = −inf): +0.
  const V result = hn::IfThenZeroElse(hn::Lt(x, hn::Set(d, K::kLowest)), value);
  // Above the range (and +inf): +inf; NaN: x + inf = NaN.
  const V infinity = hn::Set(d, std::numeric_limits<T>::infinity());
  return hn::IfThenElse(hn::Le(x, hn::Set(d, K::kHighest)), result,
                        hn::Add(x, infinity));
}

// e^x for lanes x ≤ kHighest that are not NaN (the caller rules NaN out
// or tracks it: a NaN lane gives garbage here), branch-free: lanes below the
// range give +0 by one compare and select. For loops whose arguments often
// cross kLowest in unpredictable lanes (Gaussian weights of far keys), where
// Exp's range branch would mispredict. Accuracy as Exp.
template <class D, class V>
HWY_INLINE V ExpOfFinite(D d, V x) {
  using K = math_impl::ExpConstants<hn::TFromD<D>>;
  return hn::IfThenZeroElse(hn::Lt(x, hn::Set(d, K::kLowest)),
                            math_impl::ExpInRange(d, x));
}

namespace math_impl {

// 2^f ≈ 1 + c1·f + … + c6·f⁶ on |f| ≤ 1/2 (relative error 2.0e-9; 1.0e-7
// with float rounding).
template <class D, class V>
HWY_INLINE V Exp2Polynomial(D d, V f) {
  V p = hn::Set(d, 0x1.41fbbcp-13f);
  p = hn::MulAdd(p, f, hn::Set(d, 0x1.5f3e52p-10f));
  p = hn::MulAdd(p, f, hn::Set(d, 0x1.3b2d4cp-7f));
  p = hn::MulAdd(p, f, hn::Set(d, 0x1.c6aee8p-5f));
  p = hn::MulAdd(p, f, hn::Set(d, 0x1.ebfbdcp-3f));
  p = hn::MulAdd(p, f, hn::Set(d, 0x1.62e430p-1f));
  return hn::MulAdd(p, f, hn::Set(d, 1.0f));
}

}  // namespace math_impl

// 2^t for lanes −inf ≤ t ≤ 127 that are not NaN (garbage for NaN, as
// ExpOfFinite), branch-free; +0 below −126. For float: t = n + f with n the
// nearest integer (one add of the rounding shift; f = t − n is exact), a
// polynomial for 2^f, n added to the exponent field: no Cody–Waite
// reduction, three fewer multiply-adds than e^x. Relative error ≤ 1.2e-7
// beyond t's own rounding. Double: e^(t·ln2).
template <class D, class V>
HWY_INLINE V Exp2OfFinite(D d, V t) {
  using T = hn::TFromD<D>;
  if constexpr (sizeof(T) == 8) {
    return ExpOfFinite(d, hn::Mul(t, hn::Set(d, T(0x1.62e42fefa39efp-1))));
  } else {
    const hn::RebindToSigned<D> di;
    const V shift = hn::Set(d, 0x1.8p23f);
    const V shifted = hn::Add(t, shift);
    const V f = hn::Sub(t, hn::Sub(shifted, shift));
    const V p = math_impl::Exp2Polynomial(d, f);
    const auto exponent = hn::ShiftLeft<23>(hn::BitCast(di, shifted));
    const V value = hn::BitCast(d, hn::Add(hn::BitCast(di, p), exponent));
    return hn::IfThenZeroElse(hn::Lt(t, hn::Set(d, -126.0f)), value);
  }
}

// Whether every lane of x lies where TanhOfSmall holds (|x| below the
// polynomial's limit: 1 for float, 0.625 for double).
template <class D, class V>
HWY_INLINE bool AllTanhSmall(D d, V x) {
  using T = hn::TFromD<D>;
  return hn::AllTrue(
      d, hn::Lt(hn::Abs(x),
                hn::Set(d, math_impl::TanhConstants<T>::kPolynomialLimit)));
}

// tanh(x) for |x| below the polynomial's limit (AllTanhSmall): x + x³·P(x²),
// the bits Tanh gives there.
template <class D, class V>
HWY_INLINE V TanhOfSmall(D d, V x) {
  using T = hn::TFromD<D>;
  const V magnitude = hn::Abs(x);
  const V square = hn::Mul(magnitude, magnitude);
  return hn::CopySignToAbs(
      hn::MulAdd(hn::Mul(magnitude, square),
                 math_impl::TanhPolynomial(d, square, T()), magnitude),
      x);
}

// tanh(x), float or double lanes. Contract at the top of this file.
template <class D, class V>
HWY_INLINE V Tanh(D d, V x) {
  using T = hn::TFromD<D>;
  using K = math_impl::TanhConstants<T>;
  const V magnitude = hn::Abs(x);
  // Small |x|: |x| + |x|³·P(x²), exact for tiny |x|; NaN propagates.
  const V square = hn::Mul(magnitude, magnitude);
  const V small_value =
      hn::MulAdd(hn::Mul(magnitude, square),
                 math_impl::TanhPolynomial(d, square, T()), magnitude);
  // Large |x|: 1 − 2/(e^{2|x|} + 1).
  const V one = hn::Set(d, T(1));
  const V clamped = hn::Min(magnitude, hn::Set(d, K::kSaturation));
  const V exp_twice =
      math_impl::ExpInRange(d, hn::Add(clamped, clamped));  // ≤ e^40
  const V large_value =
      hn::Sub(one, hn::Div(hn::Set(d, T(2)), hn::Add(exp_twice, one)));
  // NaN compares false and keeps small_value.
  const auto large = hn::Ge(magnitude, hn::Set(d, K::kPolynomialLimit));
  // Odd function: the sign of x (−0 for −0).
  return hn::CopySignToAbs(hn::IfThenElse(large, large_value, small_value), x);
}

}  // namespace HWY_NAMESPACE
}  // namespace attnpool
HWY_AFTER_NAMESPACE();

#endif  // ATTNPOOL_ARCH_MATH_INL_H_
