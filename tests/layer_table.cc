#include "tests/layer_table.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>

namespace attnpool_test {

using attnpool::TensorView;

const std::vector<Layer>& Layers() {
  static const std::vector<Layer> layers = {
      {"scaled_dot_product_attention", LayerKind::dense, true},
      {"scaled_dot_product_attention_varlen", LayerKind::varlen, false},
      {"scaled_dot_product_attention_paged", LayerKind::paged, false},
  };
  return layers;
}

namespace {

// Keys of the long sequences some calls draw: past two of the fused
// kernel's key chunks (src/fused.cc), for a few queries.
constexpr size_t kLongKeys = 9000;

// (rows, heads, cols) storage as a (1 or batch, heads, rows, cols) view:
// the packed layout of varlen calls, whose heads interleave along a row.
template <typename T>
TensorView<T> Interleaved(T* data, size_t batch, size_t heads, size_t rows,
                          size_t cols, size_t row_pad = 0) {
  const size_t row = heads * (cols + row_pad);
  return {data, batch, heads, rows, cols, rows * row, cols + row_pad, row};
}

}  // namespace

template <typename T>
void LayerCall<T>::Run(std::vector<T>& into,
                       const attnpool::Execution& how) const {
  TensorView<T> target = out_view;
  target.data = into.data() + (out_view.data - out.data());
  const auto empty = attnpool::EmptyRows::zero;
  switch (kind) {
    case LayerKind::dense:
      attnpool::scaled_dot_product_attention(queries, keys, values, target,
                                             mask, scale, empty, how);
      return;
    case LayerKind::varlen:
      attnpool::scaled_dot_product_attention_varlen(
          queries, keys, values, target,
          {query_offsets.size() - 1,
           static_cast<const size_t*>(index_arrays[0].at),
           static_cast<const size_t*>(index_arrays[1].at)},
          mask, scale, empty, how);
      return;
    case LayerKind::paged: {
      attnpool::PagedKVCache<T> cache;
      cache.keys = keys;
      cache.values = values;
      cache.block_table = static_cast<const int32_t*>(index_arrays[1].at);
      cache.block_table_stride = block_table_stride;
      cache.lengths = static_cast<const size_t*>(index_arrays[2].at);
      attnpool::scaled_dot_product_attention_paged(
          queries, cache, target, query_offsets.size() - 1,
          static_cast<const size_t*>(index_arrays[0].at), mask, scale, empty,
          how);
      return;
    }
  }
}

template <typename T>
std::vector<unsigned char> LayerCall<T>::Fresh(int threads) const {
  std::vector<T> into(out.size(), std::numeric_limits<T>::quiet_NaN());
  attnpool::Execution how = execution;
  how.threads = threads;
  Run(into, how);
  return Bytes(into);
}

template <typename T>
std::vector<unsigned char> LayerCall<T>::OutBytes() const {
  return Bytes(out);
}

template <typename T>
bool LayerCall<T>::OutputFinite() const {
  for (size_t b = 0; b < out_view.batch; ++b)
    for (size_t h = 0; h < out_view.heads; ++h)
      for (size_t r = 0; r < out_view.rows; ++r)
        for (size_t c = 0; c < out_view.cols; ++c)
          if (!std::isfinite(out_view.matrix(b, h)(r, c))) return false;
  return true;
}

template <typename T>
void LayerCall<T>::FillHidden(T value) {
  for (size_t e : hidden_keys) key_data[e] = value;
  for (size_t e : hidden_values) value_data[e] = value;
}

template <typename T>
std::vector<std::pair<std::string, TensorView<const T>*>>
LayerCall<T>::Inputs() {
  const std::string cache = kind == LayerKind::paged ? "cache." : "";
  return {{"queries", &queries},
          {cache + "keys", &keys},
          {cache + "values", &values}};
}

template <typename T>
std::unique_ptr<LayerCall<T>> MakeLayerCall(const Layer& layer, uint64_t seed,
                                            const LayerOptions& options) {
  std::mt19937_64 rng(seed);
  const auto pick = [&](std::initializer_list<size_t> from) {
    return from.begin()[rng() % from.size()];
  };
  const auto chance = [&](int in) {
    return options.every_field || rng() % in == 0;
  };
  auto call = std::make_unique<LayerCall<T>>();
  LayerCall<T>& c = *call;
  c.kind = layer.kind;
  c.query_heads = 4;
  c.key_heads = pick({1, 2, 4});
  c.depth = pick({3, 16, 33});
  c.value_depth = pick({1, 7, 16});
  const size_t hq = c.query_heads, hkv = c.key_heads, dk = c.depth,
               dv = c.value_depth;
  std::normal_distribution<double> normal(0, 1);
  const auto fill = [&](std::vector<T>& data) {
    for (T& x : data) x = T(normal(rng));
  };

  // Sequences: a dense batch of equal ones, or packed ones of their own
  // lengths. With hidden keys, each sequence has keys no query sees.
  std::vector<size_t> n_of, m_of;
  if (layer.kind == LayerKind::dense) {
    c.batch = 2;
    // One in four a decode past two key chunks of the fused kernel.
    const size_t n = pick({1, 5, 37});
    const size_t m = n == 1 && rng() % 4 == 0 ? kLongKeys : 2 + rng() % 70;
    n_of.assign(c.batch, n);
    m_of.assign(c.batch, m);
  } else {
    c.batch = 1 + rng() % 3;
    for (size_t s = 0; s < c.batch; ++s) {
      n_of.push_back(pick({0, 1, 3, 5}));
      m_of.push_back(rng() % 16 == 0 ? kLongKeys : 1 + rng() % 40);
    }
    n_of[rng() % c.batch] = pick({1, 4});  // some query
  }
  const size_t total_n = std::accumulate(n_of.begin(), n_of.end(), size_t{0});
  const size_t total_m = std::accumulate(m_of.begin(), m_of.end(), size_t{0});
  c.query_offsets.assign(1, 0);
  c.key_offsets.assign(1, 0);
  for (size_t s = 0; s < c.batch; ++s) {
    c.query_offsets.push_back(c.query_offsets.back() + n_of[s]);
    c.key_offsets.push_back(c.key_offsets.back() + m_of[s]);
  }

  // Queries and the output's layout (its rows padded by 2: canaries
  // between them; the buffer comes last).
  const size_t out_pad = 2;
  size_t out_elements = 0;
  if (layer.kind == LayerKind::dense) {
    const size_t n = n_of[0];
    c.query_data.resize(c.batch * hq * n * dk);
    c.queries = attnpool::dense_tensor<const T>(c.query_data.data(), c.batch,
                                                hq, n, dk);
    out_elements = c.batch * hq * n * (dv + out_pad);
    c.out_view = {nullptr,
                  c.batch,
                  hq,
                  n,
                  dv,
                  hq * n * (dv + out_pad),
                  n * (dv + out_pad),
                  dv + out_pad};
  } else {
    c.query_data.resize(total_n * hq * dk);
    c.queries = Interleaved<const T>(c.query_data.data(), 1, hq, total_n, dk);
    out_elements = total_n * hq * (dv + out_pad);
    c.out_view = Interleaved<T>(nullptr, 1, hq, total_n, dv, out_pad);
  }
  fill(c.query_data);

  // The keys each sequence hides from every query: past its valid length
  // (dense), or past the last query's position (causal, offset −hide).
  std::vector<size_t> visible_keys = m_of;
  const size_t hide = 1 + rng() % 3;
  if (options.hide_keys) {
    for (size_t s = 0; s < c.batch; ++s) {
      visible_keys[s] = layer.per_query_masks
                            ? rng() % m_of[s]
                            : m_of[s] - std::min(m_of[s], hide);
    }
  }

  // Keys and values: dense tensors, packed rows, or a pool of blocks.
  if (layer.kind == LayerKind::dense) {
    const size_t m = m_of[0];
    c.key_data.resize(c.batch * hkv * m * dk);
    c.value_data.resize(c.batch * hkv * m * dv);
    c.keys =
        attnpool::dense_tensor<const T>(c.key_data.data(), c.batch, hkv, m, dk);
    c.values = attnpool::dense_tensor<const T>(c.value_data.data(), c.batch,
                                               hkv, m, dv);
  } else if (layer.kind == LayerKind::varlen) {
    c.key_data.resize(total_m * hkv * dk);
    c.value_data.resize(total_m * hkv * dv);
    c.keys = Interleaved<const T>(c.key_data.data(), 1, hkv, total_m, dk);
    c.values = Interleaved<const T>(c.value_data.data(), 1, hkv, total_m, dv);
  } else {
    const size_t block = 1 + rng() % 7;
    size_t blocks = 2;  // two that no sequence lists
    size_t widest = 0;
    for (size_t m : m_of) {
      blocks += (m + block - 1) / block;
      widest = std::max(widest, (m + block - 1) / block);
    }
    c.block_table_stride = widest + 1;
    c.block_table.assign(c.batch * c.block_table_stride, -1);  // never read
    std::vector<int32_t> order(blocks);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    size_t next = 0;
    for (size_t s = 0; s < c.batch; ++s) {
      for (size_t k = 0; k * block < m_of[s]; ++k) {
        c.block_table[s * c.block_table_stride + k] = order[next++];
      }
    }
    c.cache_lengths = m_of;
    c.key_data.resize(blocks * hkv * block * dk);
    c.value_data.resize(blocks * hkv * block * dv);
    c.keys = attnpool::dense_tensor<const T>(c.key_data.data(), blocks, hkv,
                                             block, dk);
    c.values = attnpool::dense_tensor<const T>(c.value_data.data(), blocks, hkv,
                                               block, dv);
  }
  fill(c.key_data);
  fill(c.value_data);

  // Hidden rows: where key j of sequence s lives, for j past its visible
  // keys, and a paged pool's rows that no listed block holds.
  const auto hidden_row = [&](size_t s, size_t h, size_t j) {
    size_t key_row = 0, value_row = 0;
    if (layer.kind == LayerKind::dense) {
      key_row = (s * hkv + h) * m_of[0] + j;
      value_row = key_row;
    } else if (layer.kind == LayerKind::varlen) {
      key_row = (c.key_offsets[s] + j) * hkv + h;
      value_row = key_row;
    } else {
      const size_t block = c.keys.rows;
      const size_t p =
          size_t(c.block_table[s * c.block_table_stride + j / block]);
      key_row = (p * hkv + h) * block + j % block;
      value_row = key_row;
    }
    for (size_t e = 0; e < dk; ++e) c.hidden_keys.push_back(key_row * dk + e);
    for (size_t e = 0; e < dv; ++e)
      c.hidden_values.push_back(value_row * dv + e);
  };
  for (size_t s = 0; s < c.batch; ++s)
    for (size_t h = 0; h < hkv; ++h)
      for (size_t j = visible_keys[s]; j < m_of[s]; ++j) hidden_row(s, h, j);
  if (layer.kind == LayerKind::paged) {
    std::vector<bool> listed(c.keys.batch * c.keys.rows, false);
    for (size_t s = 0; s < c.batch; ++s) {
      for (size_t j = 0; j < m_of[s]; ++j) {
        const size_t p =
            size_t(c.block_table[s * c.block_table_stride + j / c.keys.rows]);
        listed[p * c.keys.rows + j % c.keys.rows] = true;
      }
    }
    for (size_t p = 0; p < c.keys.batch; ++p)
      for (size_t h = 0; h < hkv; ++h)
        for (size_t r = 0; r < c.keys.rows; ++r) {
          if (listed[p * c.keys.rows + r]) continue;
          const size_t row = (p * hkv + h) * c.keys.rows + r;
          for (size_t e = 0; e < dk; ++e) c.hidden_keys.push_back(row * dk + e);
          for (size_t e = 0; e < dv; ++e)
            c.hidden_values.push_back(row * dv + e);
        }
  }

  const auto bytes = [](const auto& array) {
    return array.size() * sizeof(array[0]);
  };
  if (layer.kind == LayerKind::varlen) {
    c.index_arrays = {
        {"sequences.query_offsets", c.query_offsets.data(),
         bytes(c.query_offsets)},
        {"sequences.key_offsets", c.key_offsets.data(), bytes(c.key_offsets)}};
  } else if (layer.kind == LayerKind::paged) {
    c.index_arrays = {
        {"query_offsets", c.query_offsets.data(), bytes(c.query_offsets)},
        {"cache.block_table", c.block_table.data(), bytes(c.block_table)},
        {"cache.lengths", c.cache_lengths.data(), bytes(c.cache_lengths)}};
  }

  // The mask: a random choice of the fields the layer takes (every one,
  // with every_field), each drawn as its users give it.
  auto& mask = c.mask;
  const size_t n = n_of[0], m = m_of[0];  // a dense call's
  if (layer.per_query_masks) {
    if (options.hide_keys) {
      c.valid_lengths = visible_keys;
    } else if (chance(2)) {
      mask.lengths_per_query = rng() % 2 == 0;
      c.valid_lengths.resize(mask.lengths_per_query ? c.batch * n : c.batch);
      for (size_t& length : c.valid_lengths) length = rng() % (m + 1);
    }
    if (!c.valid_lengths.empty()) mask.valid_lengths = c.valid_lengths.data();
    if (chance(3)) {
      const size_t bias_batch = pick({1, c.batch}), bias_heads = pick({1, hq});
      c.bias.resize(bias_batch * bias_heads * n * m);
      std::uniform_real_distribution<double> value(-3, 3);
      for (T& x : c.bias) x = T(value(rng));
      mask.bias = attnpool::dense_tensor<const T>(c.bias.data(), bias_batch,
                                                  bias_heads, n, m);
    }
    if (chance(3)) {
      c.visible.resize(c.batch * n * m);
      for (uint8_t& x : c.visible) x = rng() % 4 != 0;
      mask.visible = attnpool::dense_tensor<const uint8_t>(c.visible.data(),
                                                           c.batch, 1, n, m);
    }
  }
  if (options.hide_keys && !layer.per_query_masks) {
    mask.causal = true;
    mask.causal_offset = -static_cast<std::ptrdiff_t>(hide);
  } else if (chance(2)) {
    mask.causal = true;
    mask.causal_offset = static_cast<std::ptrdiff_t>(rng() % 7) - 3;
  }
  if (chance(3)) mask.window_left = rng() % 9;
  if (chance(4)) mask.window_right = rng() % 3;
  if (chance(4)) mask.chunk = pick({3, 8});
  if (chance(3)) mask.softcap = T(2.5);
  if (chance(3)) {
    c.slopes = attnpool::alibi_slopes<T>(hq);
    mask.alibi_slopes = c.slopes.data();
    mask.alibi_symmetric = rng() % 2 == 0;
  }
  if (chance(3)) {
    for (size_t h = 0; h < hq; ++h)
      c.sinks.push_back(T(0.25 * double(h) - 0.5));
    mask.sinks = c.sinks.data();
  }
  if (rng() % 2) c.scale = 0.3;

  // The output buffer: canaries before the view, between its rows and
  // after it, a tail where any index array or mask array fits (the hostile
  // test moves them onto the output).
  size_t tail = 64;
  for (const auto& array : c.index_arrays) {
    tail = std::max(tail, array.bytes / sizeof(T) + 4);
  }
  tail =
      std::max(tail, c.valid_lengths.size() * sizeof(size_t) / sizeof(T) + 4);
  c.out.assign(1 + out_elements + tail, std::numeric_limits<T>::quiet_NaN());
  c.out_view.data = c.out.data() + 1;
  return call;
}

template struct LayerCall<float>;
template struct LayerCall<double>;
template std::unique_ptr<LayerCall<float>> MakeLayerCall<float>(
    const Layer&, uint64_t, const LayerOptions&);
template std::unique_ptr<LayerCall<double>> MakeLayerCall<double>(
    const Layer&, uint64_t, const LayerOptions&);

}  // namespace attnpool_test
