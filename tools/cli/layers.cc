// attnpool sdpa, additive and mha: the attention layers, on (batch, heads,
// rows, cols) tensors or (batch, rows, cols) sequences, with their masks.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tools/cli/arrays.h"
#include "tools/cli/commands.h"
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

// The masks of the attention layers, after the layer's own options.
const std::vector<OptionInfo> kLayerMaskOptions = {
    {"--valid-lengths",
     "L.npy",
     "integers, each <= m: one per batch entry, shape (B,), or one per "
     "query, shape (B, n); with 2-D inputs one per query, shape (n,)",
     {"mask.valid_lengths"}},
    {"--causal", nullptr, "query i sees keys j <= i + causal offset"},
    {"--causal-offset", "K", "the offset of --causal (default 0)"},
    {"--bias",
     "B.npy",
     "added to the scores: shape (n, m), or (B or 1, H or 1, n, m) (a 1 is "
     "broadcast), the dtype of the inputs",
     {"mask.bias"}},
    {"--visible",
     "M.npy",
     "bool or uint8, shaped as --bias: 0 hides key j from query i",
     {"mask.visible"}},
    {"--empty-rows", "nan|zero",
     "output of a query that sees no key: NaN (default) or 0"},
};

Command LayerCommand(const char* name, const char* summary,
                     std::vector<OptionInfo> options) {
  return MakeCommand(
      name, summary,
      {std::move(options), kLayerMaskOptions, LayerRunOptions()});
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
      "one head.",
      {{"--queries",
        "Q.npy",
        "queries, (B, H, n, d) or (n, d) (required)",
        {"queries"}},
       {"--keys",
        "K.npy",
        "keys, (B, Hkv, m, d) or (m, d) (required)",
        {"keys"}},
       {"--values",
        "V.npy",
        "values, (B, Hkv, m, dv) or (m, dv) (required)",
        {"values"}},
       kOut,
       {"--scale",
        "S",
        "the factor of the scores (default 1/sqrt(d))",
        {"scale", "kernel.scale"}}});
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
      {{"--queries",
        "Q.npy",
        "queries, (B, H, n, dq) or (n, dq) (required)",
        {"queries"}},
       {"--keys",
        "K.npy",
        "keys, (B, Hkv, m, dk) or (m, dk) (required)",
        {"keys"}},
       {"--values",
        "V.npy",
        "values, (B, Hkv, m, dv) or (m, dv) (required)",
        {"values"}},
       kOut,
       {"--w-q", "WQ.npy", "W_q, (h, dq) (required)", {"weights.w_q"}},
       {"--w-k", "WK.npy", "W_k, (h, dk) (required)", {"weights.w_k"}},
       {"--w-v", "WV.npy", "w_v, (h,) (required)", {"weights.w_v"}}});
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
      {{"--heads", "H", "the number of heads (required)", {"weights.heads"}},
       {"--queries",
        "Q.npy",
        "queries, (B, n, d_q) or (n, d_q) (required)",
        {"queries"}},
       {"--keys",
        "K.npy",
        "keys, (B, m, d_k) or (m, d_k) (required)",
        {"keys"}},
       {"--values",
        "V.npy",
        "values, (B, m, d_v) or (m, d_v) (required)",
        {"values"}},
       kOut,
       {"--w-q", "WQ.npy", "(d_q, H dh) (required)", {"weights.w_q"}},
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
        {"weights.b_o"}}});
}

namespace {

// A float array seen as a (batch, heads, rows, cols) tensor: 2-D arrays are
// (1, 1, rows, cols); 3-D ones (batch, 1, rows, cols) where `ranks` allows 3
// (multi-head attention's sequences); 4-D ones as they are.
struct InputTensor {
  std::string option, path;
  NpyArray array;
  size_t batch = 1, heads = 1, rows = 0, cols = 0;

  size_t rank() const { return array.shape.size(); }
  std::string Label() const { return option + " " + path; }
  std::string Describe() const {
    return Label() + " (shape " + ShapeText(array.shape) + ")";
  }
  template <typename T>
  attnpool::TensorView<const T> View() const {
    return attnpool::dense_tensor(array.data<T>(), batch, heads, rows, cols);
  }
};

InputTensor LoadTensor(const std::string& option, const std::string& path,
                       size_t high_rank) {
  InputTensor tensor{option, path, Load(option, path)};
  RequireFloat(tensor.Label(), tensor.array);
  const auto& shape = tensor.array.shape;
  if (shape.size() == 2) {
    tensor.rows = shape[0];
    tensor.cols = shape[1];
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

// The masks of a layer call over `batch` entries, `heads` query heads, n
// queries and m keys, as arrays read from their files.
struct LayerMask {
  std::vector<size_t> lengths;
  bool has_lengths = false, lengths_per_query = false;
  bool causal = false;
  std::ptrdiff_t causal_offset = 0;
  std::optional<NpyArray> bias, visible;
  size_t bias_batch = 1, bias_heads = 1, visible_batch = 1, visible_heads = 1;
  size_t n = 0, m = 0;

  template <typename T>
  attnpool::AttentionMask<T> Get() const {
    attnpool::AttentionMask<T> mask;
    if (has_lengths) mask.valid_lengths = lengths.data();
    mask.lengths_per_query = lengths_per_query;
    mask.causal = causal;
    mask.causal_offset = causal_offset;
    if (bias) {
      mask.bias =
          attnpool::dense_tensor(bias->data<T>(), bias_batch, bias_heads, n, m);
    }
    if (visible) {
      mask.visible = attnpool::dense_tensor(visible->data<uint8_t>(),
                                            visible_batch, visible_heads, n, m);
    }
    return mask;
  }
};

// The (batch, heads) of a --bias or --visible array of shape (n, m) or
// (B or 1, H or 1, n, m).
void MaskExtents(const std::string& label, const std::vector<size_t>& shape,
                 size_t batch, size_t heads, size_t n, size_t m,
                 size_t* mask_batch, size_t* mask_heads) {
  const bool matrix = shape.size() == 2 && shape[0] == n && shape[1] == m;
  const bool tensor =
      shape.size() == 4 && (shape[0] == 1 || shape[0] == batch) &&
      (shape[1] == 1 || shape[1] == heads) && shape[2] == n && shape[3] == m;
  if (!matrix && !tensor) {
    const std::string nm = std::to_string(n) + ", " + std::to_string(m);
    throw CliError{label + ": shape " + ShapeText(shape) + ", expected (" + nm +
                   ") or (1 or " + std::to_string(batch) + ", 1 or " +
                   std::to_string(heads) + ", " + nm +
                   "): (batch, heads,) queries x keys"};
  }
  *mask_batch = tensor ? shape[0] : 1;
  *mask_heads = tensor ? shape[1] : 1;
}

// Reads the mask options of `heads` query heads; 2-D inputs are one
// sequence.
LayerMask LoadLayerMask(const Arguments& arguments, const InputTensor& queries,
                        const InputTensor& keys, size_t heads) {
  LayerMask mask;
  const size_t batch = queries.batch, n = queries.rows, m = keys.rows;
  const bool flat = queries.rank() == 2;
  mask.n = n;
  mask.m = m;
  ParseCausal(arguments, &mask.causal, &mask.causal_offset);
  if (const auto path = arguments.Get("--valid-lengths")) {
    const std::string label = "--valid-lengths " + *path;
    const NpyArray array = Load("--valid-lengths", *path);
    const auto& shape = array.shape;
    if (flat ? shape.size() == 1 && shape[0] == n
             : shape.size() == 2 && shape[0] == batch && shape[1] == n) {
      mask.lengths_per_query = true;
    } else if (flat || shape.size() != 1 || shape[0] != batch) {
      throw CliError{label + ": shape " + ShapeText(shape) + ", expected " +
                     (flat ? "(" + std::to_string(n) + ",): one entry per query"
                           : "(" + std::to_string(batch) +
                                 ",): one entry per batch "
                                 "entry, or (" +
                                 std::to_string(batch) + ", " +
                                 std::to_string(n) + "): one per query")};
    }
    mask.lengths = LengthEntries(label, array, m);
    mask.has_lengths = true;
  }
  if (const auto path = arguments.Get("--bias")) {
    const std::string label = "--bias " + *path;
    mask.bias = Load("--bias", *path);
    RequireFloat(label, *mask.bias);
    RequireTypeOf(queries, label, mask.bias->type);
    MaskExtents(label, mask.bias->shape, batch, heads, n, m, &mask.bias_batch,
                &mask.bias_heads);
  }
  if (const auto path = arguments.Get("--visible")) {
    const std::string label = "--visible " + *path;
    mask.visible = LoadVisible(*path);
    MaskExtents(label, mask.visible->shape, batch, heads, n, m,
                &mask.visible_batch, &mask.visible_heads);
  }
  return mask;
}

std::string TensorShapeText(const InputTensor& queries, const InputTensor& keys,
                            const InputTensor& values) {
  return "B=" + std::to_string(queries.batch) +
         " H=" + std::to_string(queries.heads) +
         " n=" + std::to_string(queries.rows) +
         " m=" + std::to_string(keys.rows) +
         " d=" + std::to_string(queries.cols) +
         " dv=" + std::to_string(values.cols);
}

// Queries, keys and values of an attention layer: one dtype and rank, one
// batch, a value per key, keys and values with the same heads.
struct LayerInputs {
  InputTensor queries, keys, values;
};

// --queries, --keys and --values are given (checked before a layer's own
// options; LoadLayerInputs reads them).
void RequireLayerInputs(const Arguments& arguments) {
  for (const char* option : {"--queries", "--keys", "--values"}) {
    arguments.Required(option);
  }
}

LayerInputs LoadLayerInputs(const Arguments& arguments, size_t high_rank) {
  LayerInputs inputs{
      LoadTensor("--queries", arguments.Required("--queries"), high_rank),
      LoadTensor("--keys", arguments.Required("--keys"), high_rank),
      LoadTensor("--values", arguments.Required("--values"), high_rank)};
  const InputTensor &queries = inputs.queries, &keys = inputs.keys,
                    &values = inputs.values;
  for (const InputTensor* other : {&keys, &values}) {
    RequireSameType(queries, *other);
    RequireSameRank(queries, *other);
    RequireExtent(*other, "batch entries", other->batch, queries.batch,
                  "(the batch of " + queries.Describe() + ")");
  }
  RequireRowPerKey(keys, values);
  RequireExtent(values, "heads", values.heads, keys.heads,
                "(the heads of " + keys.Describe() + ")");
  return inputs;
}

// The shape of a layer's output: the queries' with `cols` last.
std::vector<size_t> OutputShape(const InputTensor& queries, size_t cols) {
  std::vector<size_t> shape = queries.array.shape;
  shape.back() = cols;
  return shape;
}

// Runs one layer call into a new output, the queries' batch, heads and rows
// of `cols` columns, then writes it and the timing.
template <typename T, class Call>
int RunLayer(const Run& run, const std::string& out_path,
             const InputTensor& queries, size_t cols, const std::string& shape,
             const Call& call) {
  Results results{out_path,
                  attnpool_tools::MakeNpyArray(queries.array.type,
                                               OutputShape(queries, cols))};
  const auto out =
      attnpool::dense_tensor(results.out.mutable_data<T>(), queries.batch,
                             queries.heads, queries.rows, cols);
  const auto start = Clock::now();
  try {
    call(out);
  } catch (const attnpool::Error& error) {
    throw LibraryError(error, &run.command);
  }
  return Finish(run, results, Clock::now() - start, shape);
}

}  // namespace

int Sdpa(const Arguments& arguments) {
  RequireLayerInputs(arguments);
  const std::string out_path = arguments.Required("-o");
  const RunSettings settings = ReadSettings(arguments);
  const std::optional<double> scale = NumberOption(arguments, "--scale");
  const auto empty_rows = ParseEmptyRows(arguments);
  ApplyIsa(arguments);

  const auto read_start = Clock::now();
  const LayerInputs inputs = LoadLayerInputs(arguments, 4);
  const InputTensor &queries = inputs.queries, &keys = inputs.keys,
                    &values = inputs.values;
  RequireSameColumns(queries, keys);
  const LayerMask mask = LoadLayerMask(arguments, queries, keys, queries.heads);
  const Run run{arguments.command(), settings, Clock::now() - read_start};
  return WithElementType(queries.array.type, [&](auto zero) {
    using T = decltype(zero);
    return RunLayer<T>(run, out_path, queries, values.cols,
                       TensorShapeText(queries, keys, values),
                       [&](attnpool::TensorView<T> out) {
                         attnpool::scaled_dot_product_attention(
                             queries.View<T>(), keys.View<T>(),
                             values.View<T>(), out, mask.Get<T>(), scale,
                             empty_rows, settings.execution);
                       });
  });
}

int Additive(const Arguments& arguments) {
  RequireLayerInputs(arguments);
  const std::string out_path = arguments.Required("-o");
  const std::string w_q_path = arguments.Required("--w-q");
  const std::string w_k_path = arguments.Required("--w-k");
  const std::string w_v_path = arguments.Required("--w-v");
  const RunSettings settings = ReadSettings(arguments);
  const auto empty_rows = ParseEmptyRows(arguments);
  ApplyIsa(arguments);

  const auto read_start = Clock::now();
  const LayerInputs inputs = LoadLayerInputs(arguments, 4);
  const InputTensor &queries = inputs.queries, &keys = inputs.keys,
                    &values = inputs.values;
  const InputMatrix w_q = LoadMatrix("--w-q", w_q_path);
  const InputMatrix w_k = LoadMatrix("--w-k", w_k_path);
  const InputMatrix w_v = LoadMatrix("--w-v", w_v_path);
  for (const InputMatrix* weight : {&w_q, &w_k, &w_v}) {
    RequireSameType(queries, *weight);
  }
  RequireSameColumns(queries, w_q);
  RequireSameColumns(keys, w_k);
  RequireExtent(w_k, "rows", w_k.rows, w_q.rows,
                "(the rows of " + w_q.Describe() + ")");
  RequireShape(w_v, {w_q.rows}, "one entry per row of " + w_q.Label());
  const LayerMask mask = LoadLayerMask(arguments, queries, keys, queries.heads);
  const Run run{arguments.command(), settings, Clock::now() - read_start};
  return WithElementType(queries.array.type, [&](auto zero) {
    using T = decltype(zero);
    attnpool::AdditiveWeights<T> weights;
    weights.w_q = View<T>(w_q);
    weights.w_k = View<T>(w_k);
    weights.w_v = w_v.array.data<T>();
    return RunLayer<T>(run, out_path, queries, values.cols,
                       TensorShapeText(queries, keys, values) +
                           " h=" + std::to_string(w_q.rows),
                       [&](attnpool::TensorView<T> out) {
                         attnpool::additive_attention(
                             weights, queries.View<T>(), keys.View<T>(),
                             values.View<T>(), out, mask.Get<T>(), empty_rows,
                             settings.execution);
                       });
  });
}

int Mha(const Arguments& arguments) {
  const std::string heads_text = arguments.Required("--heads");
  RequireLayerInputs(arguments);
  const std::string out_path = arguments.Required("-o");
  const char* const weight_options[4] = {"--w-q", "--w-k", "--w-v", "--w-o"};
  std::vector<std::string> weight_paths;
  for (const char* option : weight_options) {
    weight_paths.push_back(arguments.Required(option));
  }
  const long long heads = ParseInteger("--heads", heads_text);
  if (heads < 1) UsageError("--heads " + heads_text + ": must be at least 1");
  const RunSettings settings = ReadSettings(arguments);
  const auto empty_rows = ParseEmptyRows(arguments);
  ApplyIsa(arguments);

  const auto read_start = Clock::now();
  const LayerInputs inputs = LoadLayerInputs(arguments, 3);
  const InputTensor &queries = inputs.queries, &keys = inputs.keys,
                    &values = inputs.values;
  std::vector<InputMatrix> w;
  for (size_t k = 0; k < 4; ++k) {
    w.push_back(LoadMatrix(weight_options[k], weight_paths[k]));
    RequireSameType(queries, w.back());
  }
  const InputMatrix &w_q = w[0], &w_k = w[1], &w_v = w[2], &w_o = w[3];
  RequireColumnsOf(queries, w_q, "rows", w_q.rows);
  RequireColumnsOf(keys, w_k, "rows", w_k.rows);
  RequireColumnsOf(values, w_v, "rows", w_v.rows);
  RequireSameColumns(w_q, w_k);
  RequireColumnsOf(w_v, w_o, "rows", w_o.rows);
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
  const LayerMask mask =
      LoadLayerMask(arguments, queries, keys, static_cast<size_t>(heads));
  const Run run{arguments.command(), settings, Clock::now() - read_start};
  return WithElementType(queries.array.type, [&](auto zero) {
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
    return RunLayer<T>(
        run, out_path, queries, w_o.cols,
        "B=" + std::to_string(queries.batch) + " heads=" +
            std::to_string(heads) + " n=" + std::to_string(queries.rows) +
            " m=" + std::to_string(keys.rows) + " d=" +
            std::to_string(queries.cols) + " d_out=" + std::to_string(w_o.cols),
        [&](attnpool::TensorView<T> out) {
          attnpool::multi_head_attention(
              weights, queries.View<T>(), keys.View<T>(), values.View<T>(), out,
              mask.Get<T>(), empty_rows, settings.execution);
        });
  });
}

}  // namespace attnpool_cli
