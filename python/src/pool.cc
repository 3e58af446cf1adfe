// Attention pooling: the fused kernel (or, returning the weights, the staged
// pipeline), and the shard API (partial, merge, finish) over the arrays of a
// Python PoolState.
#include <attnpool/attnpool.h>
#include <nanobind/stl/string.h>

#include "python/src/arguments.h"
#include "python/src/element_arrays.h"
#include "python/src/plain.h"

namespace attnpool_python {
namespace {

// The queries, keys and values of a pooling call and its masks.
template <typename T>
struct PoolInputs {
  PoolInputs(const InArray& queries, const InArray& keys, const InArray& values,
             const MaskKeywords& mask_arguments)
      : q("queries", queries, "queries"),
        k("keys", keys, "queries"),
        v("values", values, "queries"),
        masks(mask_arguments, "queries") {}

  Input<T, 2> q, k, v;
  MaskArguments<T, 2> masks;
};

void AttentionPool(const SpecArguments& spec, const InArray& queries,
                   const InArray& keys, const InArray& values,
                   const OutArray& out, const std::optional<OutArray>& weights,
                   const MaskKeywords& masks, int threads) {
  WithDtype("queries", queries, [&](auto zero) {
    using T = decltype(zero);
    const PoolInputs<T> in(queries, keys, values, masks);
    const Output<T, 2> o("out", out, {in.q.shape(0), in.v.shape(1)}, "queries");
    std::optional<Output<T, 2>> w;
    if (weights) {
      w.emplace("weights", *weights,
                std::array<size_t, 2>{in.q.shape(0), in.k.shape(0)}, "queries");
    }
    const auto pool_spec = PoolSpecOf(spec);
    const auto execution = ExecutionOf(threads);
    nb::gil_scoped_release release;
    if (w) {
      attnpool::attention_pool_staged(pool_spec, in.q.matrix(), in.k.matrix(),
                                      in.v.matrix(), o.matrix(), w->matrix(),
                                      in.masks.mask(), execution);
    } else {
      attnpool::attention_pool(pool_spec, in.q.matrix(), in.k.matrix(),
                               in.v.matrix(), o.matrix(), in.masks.mask(),
                               execution);
    }
  });
}

// attention_pool's plain path (plain.h): the result (with its weights
// where asked), or NotImplemented where the package must convert.
nb::object AttentionPoolPlain(nb::handle queries, nb::handle keys,
                              nb::handle values, nb::handle distance,
                              nb::handle kernel, nb::handle bandwidth,
                              nb::handle scale, nb::handle normalize,
                              nb::handle empty_rows, nb::handle out,
                              nb::handle threads, nb::handle return_weights,
                              nb::handle mask) {
  const nb::object converting = nb::borrow(Py_NotImplemented);
  HeldArray q, k, v, o, w;
  if (!q.Take<2>(queries.ptr(), false) || !k.Take<2>(keys.ptr(), false) ||
      !v.Take<2>(values.ptr(), false) || k.is_double() != q.is_double() ||
      v.is_double() != q.is_double() ||
      (return_weights.ptr() != Py_True && return_weights.ptr() != Py_False)) {
    return converting;
  }
  const auto spec =
      PlainPoolSpec(distance.ptr(), kernel.ptr(), bandwidth.ptr(), scale.ptr(),
                    normalize.ptr(), empty_rows.ptr());
  const auto thread_count = PlainThreads(threads.ptr());
  if (!spec || !thread_count) return converting;
  const bool is_double = q.is_double();
  const auto run = [&](auto zero) -> nb::object {
    using T = decltype(zero);
    attnpool::Mask<T> plain_mask;
    if (!PlainMask(mask.ptr(), plain_mask)) return converting;
    const size_t n = q.shape(0);
    const nb::object result = PlainOut<2>(out, {n, v.shape(1)}, is_double, o);
    if (!result.is_valid()) return converting;
    nb::object weights;
    if (return_weights.ptr() == Py_True) {
      weights = NewArray<2>({n, k.shape(0)}, is_double, w);
    }
    const auto execution = ExecutionOf(*thread_count);
    {
      nb::gil_scoped_release release;
      if (weights.is_valid()) {
        attnpool::attention_pool_staged(*spec, q.matrix<const T>(),
                                        k.matrix<const T>(),
                                        v.matrix<const T>(), o.matrix<T>(),
                                        w.matrix<T>(), plain_mask, execution);
      } else {
        attnpool::attention_pool(*spec, q.matrix<const T>(),
                                 k.matrix<const T>(), v.matrix<const T>(),
                                 o.matrix<T>(), plain_mask, execution);
      }
    }
    ++g_plain_calls;
    return weights.is_valid() ? nb::make_tuple(result, weights) : result;
  };
  return is_double ? run(double()) : run(float());
}

// A PoolState's arrays: accumulator (n, dv), max, sum and best (n each,
// uintp). A state written (made, merged into) is written in place, never
// converted: a converted copy would take the writes. A state only read
// (merged in, finished) may be read-only, and is copied where its rows are
// not contiguous.
using StateArrays = std::tuple<OutArray, OutArray, OutArray, OutArray>;
using ReadStateArrays = std::tuple<InArray, InArray, InArray, InArray>;

// The library's view of `state` (named `name` in errors), element type T;
// Array: OutArray (written) or InArray (read).
template <typename T, class Array = OutArray>
class Partial {
  static constexpr bool kRead = std::is_same<Array, InArray>::value;
  template <typename E, size_t Rank>
  using View = std::conditional_t<kRead, Input<E, Rank>, Output<E, Rank>>;

 public:
  Partial(const std::string& name,
          const std::tuple<Array, Array, Array, Array>& state)
      : accumulator_(
            Make<T, 2>(name + ".accumulator", std::get<0>(state),
                       Shape2(name + ".accumulator", std::get<0>(state)))),
        max_(Make<T, 1>(name + ".max", std::get<1>(state), {rows()})),
        sum_(Make<T, 1>(name + ".sum", std::get<2>(state), {rows()})),
        best_(Make<size_t, 1>(name + ".best", std::get<3>(state), {rows()})) {}

  // (A read state's arrays are only read by the library: merge's `later`,
  // finish's state.)
  attnpool::PoolPartial<T> view() const {
    return {{const_cast<T*>(accumulator_.matrix().data), rows(),
             accumulator_.matrix().cols, accumulator_.matrix().stride},
            const_cast<T*>(max_.data()),
            const_cast<T*>(sum_.data()),
            const_cast<size_t*>(best_.data())};
  }
  size_t rows() const { return accumulator_.matrix().rows; }

 private:
  static std::array<size_t, 2> Shape2(const std::string& name,
                                      const Array& array) {
    RequireDimensions(name, array, 2);
    return {array.shape(0), array.shape(1)};
  }
  // `array` of element type E (the state's T, or uintp for best) and
  // `shape`.
  template <typename E, size_t Rank>
  static View<E, Rank> Make(const std::string& name, const Array& array,
                            const std::array<size_t, Rank>& shape) {
    if (array.dtype() != nb::dtype<E>()) {
      ThrowType(name, "dtype " + DtypeName(array.dtype()) + " is not " +
                          (std::is_same<E, size_t>::value ? "uintp"
                                                          : DtypeName<E>()) +
                          ", the state's");
    }
    if constexpr (kRead) {
      RequireDimensions(name, array, Rank);
      for (size_t k = 0; k < Rank; ++k) {
        if (array.shape(k) != shape[k]) {
          ThrowValue(name, "axis " + std::to_string(k) + " has " +
                               std::to_string(array.shape(k)) +
                               " entries, expected " +
                               std::to_string(shape[k]));
        }
      }
      return View<E, Rank>(name, array);
    } else {
      return View<E, Rank>(name, array, shape, "the state");
    }
  }
  View<T, 2> accumulator_;
  View<T, 1> max_, sum_;
  View<size_t, 1> best_;
};

void PoolPartial(const SpecArguments& spec, const InArray& queries,
                 const InArray& keys, const InArray& values, size_t key_offset,
                 const StateArrays& state, const MaskKeywords& masks,
                 int threads) {
  WithDtype("queries", queries, [&](auto zero) {
    using T = decltype(zero);
    const PoolInputs<T> in(queries, keys, values, masks);
    const Partial<T> partial("state", state);
    const auto pool_spec = PoolSpecOf(spec);
    const auto execution = ExecutionOf(threads);
    nb::gil_scoped_release release;
    attnpool::attention_pool_partial(pool_spec, in.q.matrix(), in.k.matrix(),
                                     in.v.matrix(), key_offset, partial.view(),
                                     in.masks.mask(), execution);
  });
}

// A shard of keys and values in reduced precision (element_arrays.h);
// float32 queries and state.
void PoolPartialElements(const SpecArguments& spec, const InArray& queries,
                         const InArray& keys, const std::string& key_type,
                         const std::optional<InArray>& key_scales,
                         const InArray& values, const std::string& value_type,
                         const std::optional<InArray>& value_scales,
                         size_t key_offset, const StateArrays& state,
                         const MaskKeywords& mask_arguments, int threads) {
  RequireFloat32("queries", queries);
  const Input<float, 2> q("queries", queries);
  const ElementArray<2> k("keys", keys, key_type, key_scales);
  const ElementArray<2> v("values", values, value_type, value_scales);
  const Partial<float> partial("state", state);
  const MaskArguments<float, 2> masks(mask_arguments, "queries");
  const auto pool_spec = PoolSpecOf(spec);
  const auto execution = ExecutionOf(threads);
  nb::gil_scoped_release release;
  attnpool::attention_pool_partial(pool_spec, q.matrix(), k.rows(), v.rows(),
                                   key_offset, partial.view(), masks.mask(),
                                   execution);
}

void PoolMerge(const SpecArguments& spec, const StateArrays& into,
               const ReadStateArrays& later) {
  WithDtype("into", std::get<0>(into), [&](auto zero) {
    using T = decltype(zero);
    const Partial<T> a("into", into);
    const Partial<T, InArray> b("later", later);
    const auto pool_spec = PoolSpecOf(spec);
    nb::gil_scoped_release release;
    attnpool::attention_pool_merge(pool_spec, a.view(), b.view());
  });
}

void PoolFinish(const SpecArguments& spec, const ReadStateArrays& state,
                const OutArray& out) {
  WithDtype("state", std::get<0>(state), [&](auto zero) {
    using T = decltype(zero);
    const Partial<T, InArray> partial("state", state);
    const auto columns = partial.view().accumulator.cols;
    const Output<T, 2> o("out", out, {partial.rows(), columns}, "the state");
    const auto pool_spec = PoolSpecOf(spec);
    nb::gil_scoped_release release;
    attnpool::attention_pool_finish(pool_spec, partial.view(), o.matrix());
  });
}

}  // namespace

void DefinePool(nb::module_& m) {
  m.def("attention_pool", &AttentionPool);
  // (Every argument may be None: the function says what it takes.)
  m.def("attention_pool_plain", &AttentionPoolPlain, nb::arg().none(),
        nb::arg().none(), nb::arg().none(), nb::arg().none(), nb::arg().none(),
        nb::arg().none(), nb::arg().none(), nb::arg().none(), nb::arg().none(),
        nb::arg().none(), nb::arg().none(), nb::arg().none(), nb::arg().none());
  m.def("pool_partial_elements", &PoolPartialElements);
  m.def("pool_partial", &PoolPartial);
  m.def("pool_merge", &PoolMerge);
  m.def("pool_finish", &PoolFinish);
}

}  // namespace attnpool_python
