// attnpool sdpa, additive and mha: the attention layers, on (batch, heads,
// rows, cols) tensors or (batch, rows, cols) sequences, with their masks.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tools/cli/arrays.h"
#include "tools/cli/commands.h"
#include "tools/cli/mask_options.h"
#include "tools/cli/options.h"
#include "tools/cli/run.h"

namespace attnpool_cli {
namespace {

// --isa, --threads and --time: the run options that apply to one call.
std::vector<OptionInfo> LayerRunOptions() {
  std::vector<OptionInfo> options;
  for (const auto& option : kRunOptions) {
    const std::string name = option.name;
    if (name == "--isa" || name == "--threads" || name == "--time") {
      options.push_back(option);
    }
  }
  return options;
}

// The masks of the attention layers and --empty-rows, after the layer's
// own options.
std::vector<OptionInfo> LayerMaskOptions() {
  std::vector<OptionInfo> options = MaskOptions(MaskShape::layers);
  options.push_back({"--alibi", nullptr,
                     "ALiBi with the standard slopes of the H query heads "
                     "(attnpool.alibi_slopes)"});
  options.push_back(EmptyRowsOption(
      "output of a query that sees no key: NaN (default) or 0"));
  return options;
}

// --queries, --keys, --values and -o, the help of each input saying its
// shapes.
std::vector<OptionInfo> LayerInputOptions(const char* queries_help,
                                          const char* keys_help,
                                          const char* values_help) {
  return {{"--queries", "Q.npy", queries_help, {"queries"}},
          {"--keys", "K.npy", keys_help, {"keys"}},
          {"--values", "V.npy", values_help, {"values"}},
          kOut};
}

// A layer command: the lists of `own_options`, then the masks and the run
// options.
Command LayerCommand(const char* name, const char* summary,
                     std::vector<std::vector<OptionInfo>> own_options,
                     int (*run)(const Arguments& arguments)) {
  own_options.push_back(LayerMaskOptions());
  own_options.push_back(LayerRunOptions());
  return MakeCommand(name, summary, own_options, run);
}

// How a layer's arrays of more than 2 dimensions are read (2-D arrays are
// (1, 1, rows, cols)): (batch, heads, rows, cols); multi-head attention's
// sequences (batch, rows, cols); packed sequences (rows, heads, cols).
// A paged cache's pools: (blocks, block_size, heads, cols), or (blocks,
// block_size, cols) of one head.
enum class Layout { heads, sequences, packed, pool };

// The (batch, heads, rows, cols) view of an array of `layout` (packed: a
// (1, heads, rows, cols) view of (rows, heads, cols); pool: (blocks, heads,
// block_size, cols) of (blocks, block_size, heads, cols)).
template <typename T>
attnpool::TensorView<T> LayoutView(T* data, Layout layout, size_t batch,
                                   size_t heads, size_t rows, size_t cols) {
  if (layout != Layout::packed && layout != Layout::pool) {
    return attnpool::dense_tensor(data, batch, heads, rows, cols);
  }
  return {data, batch,       heads, rows, cols, rows * heads * cols,
          cols, heads * cols};
}

// A float array seen as a (batch, heads, rows, cols) tensor.
struct InputTensor {
  std::string option, path;
  NpyArray array;
  Layout layout = Layout::heads;
  size_t batch = 1, heads = 1, rows = 0, cols = 0;

  size_t rank() const { return array.shape.size(); }
  std::string Label() const { return option + " " + path; }
  std::string Describe() const {
    return Label() + " (shape " + ShapeText(array.shape) + ")";
  }
  template <typename T>
  attnpool::TensorView<const T> View() const {
    return LayoutView(array.data<T>(), layout, batch, heads, rows, cols);
  }
};

// A float array, or with `narrow` keys or values of any element type.
InputTensor LoadTensor(const std::string& option, const std::string& path,
                       Layout layout, bool narrow = false) {
  InputTensor tensor{option, path, Load(option, path), layout};
  if (!narrow || !IsNarrow(tensor.array)) {
    RequireFloat(tensor.Label(), tensor.array);
  }
  const auto& shape = tensor.array.shape;
  const size_t high_rank =
      layout == Layout::heads || layout == Layout::pool ? 4 : 3;
  if (layout == Layout::pool && (shape.size() == 3 || shape.size() == 4)) {
    tensor.batch = shape[0];
    tensor.rows = shape[1];
    tensor.heads = shape.size() == 4 ? shape[2] : 1;
    tensor.cols = shape.back();
  } else if (layout == Layout::pool) {
    throw CliError{tensor.Describe() +
                   ": expected a (blocks, block_size, heads, d) or (blocks, "
                   "block_size, d) pool"};
  } else if (shape.size() == 2) {
    tensor.rows = shape[0];
    tensor.cols = shape[1];
  } else if (shape.size() == 3 && layout == Layout::packed) {
    tensor.rows = shape[0];
    tensor.heads = shape[1];
    tensor.cols = shape[2];
  } else if (shape.size() == 3 && high_rank == 3) {
    tensor.batch = shape[0];
    tensor.rows = shape[1];
    tensor.cols = shape[2];
  } else if (shape.size() == 4 && high_rank == 4) {
    tensor.batch = shape[0];
    tensor.heads = shape[1];
    tensor.rows = shape[2];
    tensor.cols = shape[3];
  } else {
    throw CliError{tensor.Describe() + ": expected a 2-D or " +
                   std::to_string(high_rank) + "-D array, not " +
                   std::to_string(shape.size()) + "-D"};
  }
  return tensor;
}

void RequireSameRank(const InputTensor& reference, const InputTensor& other) {
  if (other.rank() != reference.rank()) {
    throw CliError{other.Describe() + " is " + std::to_string(other.rank()) +
                   "-D but " + reference.Describe() + " is " +
                   std::to_string(reference.rank()) + "-D"};
  }
}

// The masks of a layer call (mask_options.h) over `heads` query heads; 2-D
// inputs are one sequence. --alibi: the standard slopes.
MaskInputs LoadLayerMask(const Arguments& arguments, const InputTensor& queries,
                         const InputTensor& keys, size_t heads, NpyType type) {
  MaskCall call;
  call.shape = MaskShape::layers;
  call.n = queries.rows;
  call.m = keys.rows;
  call.batch = queries.batch;
  call.heads = heads;
  call.flat = queries.rank() == 2;
  call.score_type = type;
  call.reference = queries.Label();
  call.narrow = type != queries.array.type;  // narrow inputs: float32
  MaskInputs mask(arguments, call);
  if (arguments.Has("--alibi")) {
    if (arguments.Has("--alibi-slopes")) {
      UsageError("--alibi and --alibi-slopes: give one");
    }
    mask.SetAlibiSlopes(attnpool::alibi_slopes(heads));
  }
  return mask;
}

// Queries, keys and values of an attention layer: one dtype and rank, one
// batch, a value per key, keys and values with the same heads.
struct LayerInputs {
  InputTensor queries, keys, values;
};

// Keys and values of `key_layout` (a paged cache's pools), or of `layout`;
// with `narrow`, queries, keys and values of any element type (those not
// narrow then float32).
LayerInputs LoadLayerInputs(const Arguments& arguments, Layout layout,
                            Layout key_layout, bool narrow) {
  LayerInputs inputs{
      LoadTensor("--queries", arguments.Required("--queries"), layout, narrow),
      LoadTensor("--keys", arguments.Required("--keys"), key_layout, narrow),
      LoadTensor("--values", arguments.Required("--values"), key_layout,
                 narrow)};
  const InputTensor &queries = inputs.queries, &keys = inputs.keys,
                    &values = inputs.values;
  const bool any_narrow =
      IsNarrow(queries.array) || IsNarrow(keys.array) || IsNarrow(values.array);
  if (any_narrow && !IsNarrow(queries.array) &&
      queries.array.type != NpyType::float32) {
    throw CliError{queries.Label() +
                   " must be float32 or reduced-precision beside "
                   "reduced-precision keys or values"};
  }
  for (const InputTensor* other : {&keys, &values}) {
    if (!any_narrow) RequireSameType(queries, *other);
    if (key_layout != layout) continue;
    RequireSameRank(queries, *other);
    RequireExtent(*other, "batch entries", other->batch, queries.batch,
                  "(the batch of " + queries.Describe() + ")");
  }
  if (key_layout != layout) {
    RequireExtent(values, "blocks", values.batch, keys.batch,
                  "(the blocks of " + keys.Describe() + ")");
  }
  RequireRowPerKey(keys, values);
  RequireExtent(values, "heads", values.heads, keys.heads,
                "(the heads of " + keys.Describe() + ")");
  return inputs;
}

// The shape --time prints for sdpa and additive.
std::string TensorShapeText(const LayerInputs& inputs) {
  return "B=" + std::to_string(inputs.queries.batch) +
         " H=" + std::to_string(inputs.queries.heads) +
         " n=" + std::to_string(inputs.queries.rows) +
         " m=" + std::to_string(inputs.keys.rows) +
         " d=" + std::to_string(inputs.queries.cols) +
         " dv=" + std::to_string(inputs.values.cols);
}

// The shape of a layer's output: the queries' with `cols` last.
std::vector<size_t> OutputShape(const InputTensor& queries, size_t cols) {
  std::vector<size_t> shape = queries.array.shape;
  shape.back() = cols;
  return shape;
}

// What a layer's own options and arrays make of its run: the query heads
// its masks cover, the columns of its output, and its shape for --time.
struct LayerExtents {
  size_t mask_heads, out_cols;
  std::string shape;
};

// The arguments of one layer call that every layer takes, as the library's
// views: the inputs, the output, the masks, --empty-rows and the execution.
template <typename T>
struct LayerCall {
  attnpool::TensorView<const T> queries, keys, values;
  attnpool::TensorView<T> out;
  attnpool::AttentionMask<T> mask;
  attnpool::EmptyRows empty_rows;
  attnpool::Execution execution;
  // Keys and values in reduced precision (sdpa; then keys and values above
  // are empty and T float), and the queries where they are too (then the
  // queries above are empty).
  std::optional<attnpool::ElementTensor> narrow_keys, narrow_values,
      narrow_queries;
};

// Queries, keys or values of any element type as the library's tensor
// (scales, for scaled types, of the tensor's (batch, heads, rows) in its
// layout).
attnpool::ElementTensor ElementTensorOf(const InputTensor& tensor,
                                        const StoredElements& elements) {
  attnpool::ElementTensor result =
      LayoutView(tensor.array.data<float>(), tensor.layout, tensor.batch,
                 tensor.heads, tensor.rows, tensor.cols);
  result.type = elements.type;
  result.data = tensor.array.storage.get();
  if (attnpool::element_properties(elements.type).scaled) {
    result.scales = LayoutView(elements.scales.data<float>(), tensor.layout,
                               tensor.batch, tensor.heads, tensor.rows, 1);
  }
  return result;
}

// The run of an attention layer command, whose required options are checked
// and run options read: the constructor reads --empty-rows, applies --isa,
// then reads the inputs; the command reads its own arrays against inputs();
// Call reads the masks, calls the layer and writes its output.
class LayerRun {
 public:
  // Inputs 2-D, or of `layout` (keys and values of `key_layout`).
  // With `narrow`, queries, keys and values of any element type
  // (element.h), except the queries where `no_narrow_queries` says why.
  LayerRun(const Arguments& arguments, const RunSettings& settings,
           Layout layout, std::optional<Layout> key_layout = {},
           bool narrow = false, const char* no_narrow_queries = nullptr)
      : arguments_(arguments),
        empty_rows_(ParseEmptyRows(arguments)),
        reading_(arguments, settings),
        inputs_(LoadLayerInputs(arguments, layout, key_layout.value_or(layout),
                                narrow)) {
    const auto rows_shape = [](const InputTensor& tensor) {
      return std::vector<size_t>(tensor.array.shape.begin(),
                                 tensor.array.shape.end() - 1);
    };
    const bool narrow_queries = IsNarrow(inputs_.queries.array);
    if (narrow_queries && no_narrow_queries != nullptr) {
      throw CliError{inputs_.queries.Label() +
                     ": reduced-precision queries are " + no_narrow_queries};
    }
    if (narrow_queries || IsNarrow(inputs_.keys.array) ||
        IsNarrow(inputs_.values.array)) {
      // The queries' options are checked against their file, float32 too.
      const StoredElements queries =
          ReadStoredElements(arguments, inputs_.queries.Label(), "--queries",
                             inputs_.queries.array, rows_shape(inputs_.queries),
                             "--queries-dtype", "--query-scales");
      if (narrow_queries) query_elements_ = queries;
      key_elements_ = ReadStoredElements(
          arguments, inputs_.keys.Label(), "--keys", inputs_.keys.array,
          rows_shape(inputs_.keys), "--keys-dtype", "--key-scales");
      value_elements_ = ReadStoredElements(
          arguments, inputs_.values.Label(), "--values", inputs_.values.array,
          rows_shape(inputs_.values), "--values-dtype", "--value-scales");
    } else if (narrow) {
      for (const char* option :
           {"--queries-dtype", "--keys-dtype", "--values-dtype",
            "--query-scales", "--key-scales", "--value-scales"}) {
        if (arguments.Get(option)) {
          throw CliError{std::string(option) +
                         " applies to reduced-precision inputs only"};
        }
      }
    }
  }

  const LayerInputs& inputs() const { return inputs_; }

  // Runs `layer(T(), LayerCall<T>)`, T the inputs' element type, into a new
  // output: the queries' batch, heads and rows, of extents.out_cols
  // columns. Then writes it, and with --time the timing.
  template <class Layer>
  int Call(const LayerExtents& extents, const Layer& layer) const {
    const InputTensor& queries = inputs_.queries;
    // Narrow inputs compute in float.
    const NpyType type = key_elements_ ? NpyType::float32 : queries.array.type;
    const MaskInputs mask = LoadLayerMask(arguments_, queries, inputs_.keys,
                                          extents.mask_heads, type);
    return reading_.Compute(type, [&](auto zero, const Run& run) {
      using T = decltype(zero);
      Results results{
          arguments_.Required("-o"),
          MakeResult("-o", type, OutputShape(queries, extents.out_cols))};
      CheckResults(results);
      LayerCall<T> call{
          query_elements_ ? attnpool::TensorView<const T>() : queries.View<T>(),
          key_elements_ ? attnpool::TensorView<const T>()
                        : inputs_.keys.View<T>(),
          key_elements_ ? attnpool::TensorView<const T>()
                        : inputs_.values.View<T>(),
          LayoutView(results.out.mutable_data<T>(), queries.layout,
                     queries.batch, queries.heads, queries.rows,
                     extents.out_cols),
          mask.AttentionMask<T>(),
          empty_rows_,
          run.settings.execution,
          {},
          {},
          {}};
      if (key_elements_) {
        call.narrow_keys = ElementTensorOf(inputs_.keys, *key_elements_);
        call.narrow_values = ElementTensorOf(inputs_.values, *value_elements_);
      }
      if (query_elements_) {
        call.narrow_queries = ElementTensorOf(queries, *query_elements_);
      }
      const auto start = Clock::now();
      try {
        layer(zero, call);
      } catch (const attnpool::Error& error) {
        throw LibraryError(error, &run.command);
      }
      return Finish(run, results, Clock::now() - start, extents.shape);
    });
  }

 private:
  const Arguments& arguments_;
  const attnpool::EmptyRows empty_rows_;
  const InputReading reading_;
  const LayerInputs inputs_;
  // Set when any input is narrow (keys and values), and when the queries
  // are.
  std::optional<StoredElements> key_elements_, value_elements_, query_elements_;
};

// The offsets of packed sequences (--query-offsets, --key-offsets) or a
// paged cache's --key-lengths: 1-D integers, each at most `rows`.
std::vector<size_t> LoadOffsets(const Arguments& arguments,
                                const std::string& option, size_t rows,
                                const std::string& rows_name) {
  const std::string path = arguments.Required(option);
  const NpyArray array = Load(option, path);
  if (array.shape.size() != 1) {
    throw CliError{option + " " + path + ": shape " + ShapeText(array.shape) +
                   ", expected a 1-D array"};
  }
  return LengthEntries(option + " " + path, array, rows, rows_name);
}

// A paged cache's block table: a 2-D integer array, as int32 entries.
std::vector<int32_t> LoadBlockTable(const Arguments& arguments,
                                    size_t* stride) {
  const std::string path = arguments.Required("--block-table");
  const std::string label = "--block-table " + path;
  const NpyArray array = Load("--block-table", path);
  if (array.shape.size() != 2) {
    throw CliError{label + ": shape " + ShapeText(array.shape) +
                   ", expected (sequences, blocks per sequence)"};
  }
  *stride = array.shape[1];
  const std::vector<size_t> entries = LengthEntries(
      label, array, std::numeric_limits<int32_t>::max(), "int32 block indices");
  return std::vector<int32_t>(entries.begin(), entries.end());
}

int Sdpa(const Arguments& arguments) {
  RequireOptions(arguments, {"--queries", "--keys", "--values", "-o"});
  const bool paged =
      arguments.Has("--block-table") || arguments.Has("--key-lengths");
  const bool packed = paged || arguments.Has("--query-offsets") ||
                      arguments.Has("--key-offsets");
  if (paged) {
    RequireOptions(arguments,
                   {"--query-offsets", "--block-table", "--key-lengths"});
  } else if (packed) {
    RequireOptions(arguments, {"--query-offsets", "--key-offsets"});
  }
  const RunSettings settings = ReadSettings(arguments);
  const std::optional<double> scale = NumberOption(arguments, "--scale");
  const LayerRun run(arguments, settings,
                     packed ? Layout::packed : Layout::heads,
                     paged ? std::optional<Layout>(Layout::pool) : std::nullopt,
                     /*narrow=*/true,
                     packed ? "taken without --query-offsets only (packed and "
                              "paged calls take float32 queries)"
                            : nullptr);
  const LayerInputs& inputs = run.inputs();
  RequireSameColumns(inputs.queries, inputs.keys);
  std::vector<size_t> query_offsets, key_offsets, key_lengths;
  std::vector<int32_t> block_table;
  size_t table_stride = 0;
  if (paged) {
    query_offsets = LoadOffsets(arguments, "--query-offsets",
                                inputs.queries.rows, "the rows of --queries");
    block_table = LoadBlockTable(arguments, &table_stride);
    key_lengths =
        LoadOffsets(arguments, "--key-lengths", table_stride * inputs.keys.rows,
                    "the blocks per sequence x the block size");
    if (query_offsets.size() != key_lengths.size() + 1 ||
        block_table.size() != key_lengths.size() * table_stride) {
      throw CliError{"--key-lengths: " + std::to_string(key_lengths.size()) +
                     " sequences, --query-offsets: " +
                     std::to_string(query_offsets.size()) +
                     " entries, --block-table: " +
                     std::to_string(block_table.size() /
                                    std::max<size_t>(1, table_stride)) +
                     " rows (count, count + 1 and count)"};
    }
  } else if (packed) {
    query_offsets = LoadOffsets(arguments, "--query-offsets",
                                inputs.queries.rows, "the rows of --queries");
    key_offsets = LoadOffsets(arguments, "--key-offsets", inputs.keys.rows,
                              "the rows of --keys");
    if (query_offsets.empty() || key_offsets.size() != query_offsets.size()) {
      throw CliError{
          "--key-offsets: " + std::to_string(key_offsets.size()) +
          " entries, --query-offsets: " + std::to_string(query_offsets.size()) +
          " (both count + 1, count >= 0)"};
    }
  }
  return run.Call(
      {inputs.queries.heads, inputs.values.cols, TensorShapeText(inputs)},
      [&](auto zero, const auto& call) {
        using T = decltype(zero);
        // One call over the keys and values as given: a paged cache of them
        // (`cache`, PagedKVCache<T> or PagedElementCache, filled here),
        // packed sequences, or tensors. Narrow queries (ElementTensor) come
        // only without offsets.
        const auto attend = [&](const auto& queries, const auto& keys,
                                const auto& values, auto cache) {
          using Queries = std::decay_t<decltype(queries)>;
          if constexpr (!std::is_same<Queries,
                                      attnpool::ElementTensor>::value) {
            if (paged) {
              cache.keys = keys;
              cache.values = values;
              cache.block_table = block_table.data();
              cache.block_table_stride = table_stride;
              cache.lengths = key_lengths.data();
              return attnpool::scaled_dot_product_attention_paged(
                  queries, cache, call.out, key_lengths.size(),
                  query_offsets.data(), call.mask, scale, call.empty_rows,
                  call.execution);
            }
            if (packed) {
              return attnpool::scaled_dot_product_attention_varlen(
                  queries, keys, values, call.out,
                  {query_offsets.size() - 1, query_offsets.data(),
                   key_offsets.data()},
                  call.mask, scale, call.empty_rows, call.execution);
            }
          }
          attnpool::scaled_dot_product_attention(
              queries, keys, values, call.out, call.mask, scale,
              call.empty_rows, call.execution);
        };
        if constexpr (std::is_same<T, float>::value) {
          if (call.narrow_queries) {
            return attend(*call.narrow_queries, *call.narrow_keys,
                          *call.narrow_values, attnpool::PagedElementCache());
          }
          if (call.narrow_keys) {
            return attend(call.queries, *call.narrow_keys, *call.narrow_values,
                          attnpool::PagedElementCache());
          }
        }
        attend(call.queries, call.keys, call.values,
               attnpool::PagedKVCache<T>());
      });
}

int Additive(const Arguments& arguments) {
  RequireOptions(arguments, {"--queries", "--keys", "--values", "-o", "--w-q",
                             "--w-k", "--w-v"});
  const RunSettings settings = ReadSettings(arguments);
  const LayerRun run(arguments, settings, Layout::heads);
  const LayerInputs& inputs = run.inputs();
  const InputMatrix w_q = LoadMatrix(arguments, "--w-q");
  const InputMatrix w_k = LoadMatrix(arguments, "--w-k");
  const InputMatrix w_v = LoadMatrix(arguments, "--w-v");
  for (const InputMatrix* weight : {&w_q, &w_k, &w_v}) {
    RequireSameType(inputs.queries, *weight);
  }
  RequireSameColumns(inputs.queries, w_q);
  RequireSameColumns(inputs.keys, w_k);
  RequireExtent(w_k, "rows", w_k.rows, w_q.rows,
                "(the rows of " + w_q.Describe() + ")");
  RequireShape(w_v, {w_q.rows}, "one entry per row of " + w_q.Label());
  return run.Call({inputs.queries.heads, inputs.values.cols,
                   TensorShapeText(inputs) + " h=" + std::to_string(w_q.rows)},
                  [&](auto zero, const auto& call) {
                    using T = decltype(zero);
                    attnpool::AdditiveWeights<T> weights;
                    weights.w_q = View<T>(w_q);
                    weights.w_k = View<T>(w_k);
                    weights.w_v = w_v.array.data<T>();
                    attnpool::additive_attention(
                        weights, call.queries, call.keys, call.values, call.out,
                        call.mask, call.empty_rows, call.execution);
                  });
}

int Mha(const Arguments& arguments) {
  const char* const weight_options[4] = {"--w-q", "--w-k", "--w-v", "--w-o"};
  RequireOptions(arguments, {"--heads", "--queries", "--keys", "--values", "-o",
                             weight_options[0], weight_options[1],
                             weight_options[2], weight_options[3]});
  const std::string heads_text = arguments.Required("--heads");
  const long long heads = ParseInteger("--heads", heads_text);
  if (heads < 1) UsageError("--heads " + heads_text + ": must be at least 1");
  const RunSettings settings = ReadSettings(arguments);
  const LayerRun run(arguments, settings, Layout::sequences);
  const InputTensor &queries = run.inputs().queries, &keys = run.inputs().keys,
                    &values = run.inputs().values;
  std::vector<InputMatrix> w;
  for (const char* option : weight_options) {
    w.push_back(LoadMatrix(arguments, option));
    RequireSameType(queries, w.back());
  }
  const InputMatrix &w_q = w[0], &w_k = w[1], &w_v = w[2], &w_o = w[3];
  RequireColumnsOf(queries, w_q, "rows", w_q.rows);
  RequireColumnsOf(keys, w_k, "rows", w_k.rows);
  RequireColumnsOf(values, w_v, "rows", w_v.rows);
  RequireSameColumns(w_q, w_k);
  RequireColumnsOf(w_v, w_o, "rows", w_o.rows);
  // (Before the mask's per-head arrays are made: at most one head a column.)
  if (static_cast<unsigned long long>(heads) > std::max<size_t>(1, w_q.cols)) {
    throw CliError{"--heads " + heads_text + ": more heads than the " +
                   std::to_string(w_q.cols) + " columns of " + w_q.Label()};
  }
  // The biases: 1-D, as long as their projection's columns.
  const char* const bias_options[4] = {"--b-q", "--b-k", "--b-v", "--b-o"};
  std::optional<InputMatrix> b[4];
  for (size_t k = 0; k < 4; ++k) {
    const auto path = arguments.Get(bias_options[k]);
    if (!path) continue;
    b[k] = LoadMatrix(bias_options[k], *path);
    RequireSameType(queries, *b[k]);
    RequireShape(*b[k], {w[k].cols}, "one entry per column of " + w[k].Label());
  }
  return run.Call(
      {static_cast<size_t>(heads), w_o.cols,
       "B=" + std::to_string(queries.batch) + " heads=" +
           std::to_string(heads) + " n=" + std::to_string(queries.rows) +
           " m=" + std::to_string(keys.rows) + " d=" +
           std::to_string(queries.cols) + " d_out=" + std::to_string(w_o.cols)},
      [&](auto zero, const auto& call) {
        using T = decltype(zero);
        attnpool::MultiHeadWeights<T> weights;
        weights.heads = static_cast<size_t>(heads);
        weights.w_q = View<T>(w_q);
        weights.w_k = View<T>(w_k);
        weights.w_v = View<T>(w_v);
        weights.w_o = View<T>(w_o);
        const T** biases[4] = {&weights.b_q, &weights.b_k, &weights.b_v,
                               &weights.b_o};
        for (size_t k = 0; k < 4; ++k) {
          if (b[k]) *biases[k] = b[k]->array.data<T>();
        }
        attnpool::multi_head_attention(weights, call.queries, call.keys,
                                       call.values, call.out, call.mask,
                                       call.empty_rows, call.execution);
      });
}

}  // namespace

Command SdpaCommand() {
  return LayerCommand(
      "sdpa",
      "attnpool sdpa --queries Q.npy --keys K.npy --values V.npy -o OUT.npy "
      "[options]\n\nScaled dot-product attention: OUT = softmax(scale * Q . "
      "K^T + bias, masked) . V\nper batch entry and head. Q (B, H, n, d), K "
      "(B, Hkv, m, d), V (B, Hkv, m, dv),\nOUT (B, H, n, dv); Hkv divides H "
      "(grouped-query attention). 2-D arrays (n, d)\nare one batch entry of "
      "one head. With --query-offsets and --key-offsets,\nsequences of "
      "different lengths packed along the rows: Q (sum n, H, d),\nK (sum m, "
      "Hkv, d), V (sum m, Hkv, dv), OUT (sum n, H, dv); query i of a\n"
      "sequence of n queries and m keys sits at key i + m - n + causal "
      "offset.",
      {LayerInputOptions("queries, (B, H, n, d) or (n, d) (required)",
                         "keys, (B, Hkv, m, d) or (m, d) (required)",
                         "values, (B, Hkv, m, dv) or (m, dv) (required)"),
       {{"--scale",
         "S",
         "the factor of the scores (default 1/sqrt(d))",
         {"scale", "kernel.scale"}},
        {"--query-offsets",
         "QO.npy",
         "packed sequences: sequence b owns query rows [QO[b], QO[b+1]), "
         "integers, count + 1 entries from 0",
         {"sequences.query_offsets"}},
        {"--key-offsets",
         "KO.npy",
         "packed sequences: sequence b owns key and value rows [KO[b], "
         "KO[b+1])",
         {"sequences.key_offsets"}},
        {"--block-table",
         "BT.npy",
         "a paged KV cache: --keys and --values are pools (blocks, "
         "block_size, Hkv, d) and row b of BT lists sequence b's blocks, "
         "integers (count, blocks per sequence)",
         {"cache.block_table"}},
        {"--key-lengths",
         "L.npy",
         "a paged KV cache: sequence b has L[b] keys, shape (count,)",
         {"cache.lengths"}}},
       kReducedPrecisionOptions},
      Sdpa);
}

Command AdditiveCommand() {
  return LayerCommand(
      "additive",
      "attnpool additive --queries Q.npy --keys K.npy --values V.npy\n"
      "    --w-q WQ.npy --w-k WK.npy --w-v WV.npy -o OUT.npy [options]\n\n"
      "Additive (Bahdanau) attention: score(q, k) = w_v . tanh(W_q q + W_k "
      "k), then\nthe masks, softmax and the weighted sum of the values. Q "
      "(B, H, n, dq),\nK (B, Hkv, m, dk), V (B, Hkv, m, dv), OUT (B, H, n, "
      "dv), or 2-D arrays.",
      {LayerInputOptions("queries, (B, H, n, dq) or (n, dq) (required)",
                         "keys, (B, Hkv, m, dk) or (m, dk) (required)",
                         "values, (B, Hkv, m, dv) or (m, dv) (required)"),
       {{"--w-q", "WQ.npy", "W_q, (h, dq) (required)", {"weights.w_q"}},
        {"--w-k", "WK.npy", "W_k, (h, dk) (required)", {"weights.w_k"}},
        {"--w-v", "WV.npy", "w_v, (h,) (required)", {"weights.w_v"}}}},
      Additive);
}

Command MhaCommand() {
  return LayerCommand(
      "mha",
      "attnpool mha --heads H --queries Q.npy --keys K.npy --values V.npy\n"
      "    --w-q WQ.npy --w-k WK.npy --w-v WV.npy --w-o WO.npy -o OUT.npy "
      "[options]\n\n"
      "Multi-head attention: OUT = concat_h(sdpa(Q W_q^h + b_q^h, K W_k^h + "
      "b_k^h,\nV W_v^h + b_v^h)) W_o + b_o, head h owning columns [h dh, "
      "(h+1) dh) of the\nprojections (PyTorch's nn.MultiheadAttention "
      "weights, transposed).\nQ (B, n, d_q), K (B, m, d_k), V (B, m, d_v), "
      "OUT (B, n, d_out), or 2-D arrays\nwithout B.",
      {{{"--heads", "H", "the number of heads (required)", {"weights.heads"}}},
       LayerInputOptions("queries, (B, n, d_q) or (n, d_q) (required)",
                         "keys, (B, m, d_k) or (m, d_k) (required)",
                         "values, (B, m, d_v) or (m, d_v) (required)"),
       {{"--w-q", "WQ.npy", "(d_q, H dh) (required)", {"weights.w_q"}},
        {"--w-k", "WK.npy", "(d_k, H dh) (required)", {"weights.w_k"}},
        {"--w-v", "WV.npy", "(d_v, H dv) (required)", {"weights.w_v"}},
        {"--w-o", "WO.npy", "(H dv, d_out) (required)", {"weights.w_o"}},
        {"--b-q",
         "BQ.npy",
         "bias of the query projection, (H dh,)",
         {"weights.b_q"}},
        {"--b-k",
         "BK.npy",
         "bias of the key projection, (H dh,)",
         {"weights.b_k"}},
        {"--b-v",
         "BV.npy",
         "bias of the value projection, (H dv,)",
         {"weights.b_v"}},
        {"--b-o",
         "BO.npy",
         "bias of the output projection, (d_out,)",
         {"weights.b_o"}}}},
      Mha);
}

}  // namespace attnpool_cli
