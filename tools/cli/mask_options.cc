#include "tools/cli/mask_options.h"

#include <cstdint>
#include <type_traits>

namespace attnpool_cli {
namespace {

using namespace attnpool::mask_kind;  // NOLINT(build/namespaces)

template <class Kind, class Expected>
constexpr bool kIs = std::is_same<Kind, Expected>::value;

// The option of a field: its name (--name, '-' for '_').
template <class Kind>
std::string OptionName(const attnpool::MaskField<Kind>& field,
                       MaskShape shape) {
  std::string name =
      shape == MaskShape::layers ? field.heads_name : field.name;
  for (char& c : name) {
    if (c == '_') c = '-';
  }
  return "--" + name;
}

// The help texts of the options: what the kind's value is, for `shape`,
// then the field's meaning. (Strings the options point into live as long
// as the process.)
const char* Kept(std::string text) {
  static std::vector<std::unique_ptr<std::string>> kept;
  kept.push_back(std::make_unique<std::string>(std::move(text)));
  return kept.back()->c_str();
}

template <class Kind>
OptionInfo OptionOf(const attnpool::MaskField<Kind>& field, MaskShape shape) {
  const bool layers = shape == MaskShape::layers;
  const char* value = "X";
  std::string shape_text;
  if constexpr (kIs<Kind, lengths>) {
    value = "L.npy";
    shape_text =
        layers ? "integers, each <= m: one per batch entry, shape (B,), or one "
                 "per query, shape (B, n); with 2-D inputs one per query, "
                 "shape (n,)"
               : "integers, n entries";
  } else if constexpr (kIs<Kind, flag>) {
    value = nullptr;
  } else if constexpr (kIs<Kind, position>) {
    value = "K";
  } else if constexpr (kIs<Kind, count>) {
    value = "N";
  } else if constexpr (kIs<Kind, matrix>) {
    value = "B.npy";
    shape_text = layers ? "shape (n, m), or (B or 1, H or 1, n, m) (a 1 is "
                          "broadcast), the dtype of the inputs"
                        : "n x m, the dtype of the inputs";
  } else if constexpr (kIs<Kind, booleans>) {
    value = "M.npy";
    shape_text = layers ? "bool or uint8, shaped as a bias"
                        : "n x m, bool or uint8";
  } else if constexpr (kIs<Kind, head_number>) {
    value = layers ? "A.npy" : "X";
    if (layers) shape_text = "one per query head, shape (H,)";
  }
  const std::string help =
      shape_text.empty() ? field.help : shape_text + ": " + field.help;
  return {Kept(OptionName(field, shape)),
          value,
          Kept(help),
          {layers ? field.heads_argument : field.argument}};
}

template <typename T>
const T* ValuesOf(const MaskInputs::Values& values) {
  if (!values.given) return nullptr;
  if constexpr (std::is_same<T, float>::value) {
    return values.floats.data();
  } else {
    return values.doubles.data();
  }
}

// A held field into a Mask's member, by type.
template <typename T>
void ToMask(const MaskInputs::Lengths& held, const size_t*& member) {
  if (held.given) member = held.entries.data();
}
template <typename T>
void ToMask(bool held, bool& member) {
  member = held;
}
template <typename T>
void ToMask(std::ptrdiff_t held, std::ptrdiff_t& member) {
  member = held;
}
template <typename T>
void ToMask(const std::optional<size_t>& held, std::optional<size_t>& member) {
  member = held;
}
template <typename T, typename U>
void ToMask(const MaskInputs::Array& held, attnpool::MatrixView<const U>& member,
            size_t n, size_t m) {
  if (held.array) member = {held.array->data<U>(), n, m};
}
template <typename T>
void ToMask(const MaskInputs::Values& held, std::optional<T>& member) {
  if (held.given) member = *ValuesOf<T>(held);
}

// The same into an AttentionMask's member.
template <typename T>
void ToHeads(const MaskInputs::Lengths& held, const size_t*& member,
             bool& per_query) {
  if (!held.given) return;
  member = held.entries.data();
  per_query = held.per_query;
}
template <typename T, typename U>
void ToHeads(const MaskInputs::Array& held, attnpool::TensorView<const U>& member,
             size_t n, size_t m) {
  if (held.array) {
    member = attnpool::dense_tensor(held.array->data<U>(), held.batch,
                                    held.heads, n, m);
  }
}
template <typename T>
void ToHeads(const MaskInputs::Values& held, const T*& member) {
  member = ValuesOf<T>(held);
}

// The (batch, heads) of a layer's mask array of shape (n, m) or (B or 1,
// H or 1, n, m).
void LayerExtents(const std::string& label, const std::vector<size_t>& shape,
                  const MaskCall& call, MaskInputs::Array& held) {
  const size_t n = call.n, m = call.m;
  const bool matrix = shape.size() == 2 && shape[0] == n && shape[1] == m;
  const bool tensor = shape.size() == 4 &&
                      (shape[0] == 1 || shape[0] == call.batch) &&
                      (shape[1] == 1 || shape[1] == call.heads) &&
                      shape[2] == n && shape[3] == m;
  if (!matrix && !tensor) {
    const std::string nm = std::to_string(n) + ", " + std::to_string(m);
    throw CliError{label + ": shape " + ShapeText(shape) + ", expected (" + nm +
                   ") or (1 or " + std::to_string(call.batch) + ", 1 or " +
                   std::to_string(call.heads) + ", " + nm +
                   "): (batch, heads,) queries x keys"};
  }
  held.batch = tensor ? shape[0] : 1;
  held.heads = tensor ? shape[1] : 1;
}

}  // namespace

std::vector<OptionInfo> MaskOptions(MaskShape shape) {
  std::vector<OptionInfo> options;
  attnpool::VisitMaskFields(
      [&](auto field) { options.push_back(OptionOf(field, shape)); });
  return options;
}

template <class Kind, class Held>
void MaskInputs::Read(const Arguments& arguments,
                      const attnpool::MaskField<Kind>& field, Held& held) {
  const bool layers = call_.shape == MaskShape::layers;
  const std::string option = OptionName(field, call_.shape);
  if constexpr (kIs<Kind, flag>) {
    held = arguments.Has(option);
    return;
  }
  const auto text = arguments.Get(option);
  if (!text) return;
  const std::string label = option + " " + *text;
  if constexpr (kIs<Kind, lengths>) {
    const NpyArray array = Load(option, *text);
    const auto& shape = array.shape;
    if (!layers) {
      RequireArrayShape(label, array, {call_.n}, "one entry per query");
    } else if (call_.flat ? shape.size() == 1 && shape[0] == call_.n
                          : shape.size() == 2 && shape[0] == call_.batch &&
                                shape[1] == call_.n) {
      held.per_query = true;
    } else if (call_.flat || shape.size() != 1 || shape[0] != call_.batch) {
      throw CliError{
          label + ": shape " + ShapeText(shape) + ", expected " +
          (call_.flat
               ? "(" + std::to_string(call_.n) + ",): one entry per query"
               : "(" + std::to_string(call_.batch) +
                     ",): one entry per batch entry, or (" +
                     std::to_string(call_.batch) + ", " +
                     std::to_string(call_.n) + "): one per query")};
    }
    held.entries = LengthEntries(label, array, call_.m);
    held.given = true;
  } else if constexpr (kIs<Kind, position>) {
    held = static_cast<std::ptrdiff_t>(ParseInteger(option, *text));
  } else if constexpr (kIs<Kind, count>) {
    const long long value = ParseInteger(option, *text);
    if (value < 0) UsageError(label + ": must be >= 0");
    held = static_cast<size_t>(value);
  } else if constexpr (kIs<Kind, matrix> || kIs<Kind, booleans>) {
    NpyArray array = Load(option, *text);
    if constexpr (kIs<Kind, matrix>) {
      RequireFloat(label, array);
      if (array.type != call_.score_type) {
        throw CliError{label + " is " + NpyTypeName(array.type) + " but " +
                       (call_.narrow ? std::string("it must be ") +
                                           NpyTypeName(call_.score_type) +
                                           " beside reduced-precision inputs"
                                     : call_.reference + " is " +
                                           NpyTypeName(call_.score_type) +
                                           ": all arrays of a call must have "
                                           "one dtype (convert with "
                                           "a.astype(...))")};
      }
    } else if (array.type != NpyType::bool8 && array.type != NpyType::uint8) {
      throw CliError{label + ": dtype " + NpyTypeName(array.type) +
                     " is not supported: use bool or uint8"};
    }
    if (layers) {
      LayerExtents(label, array.shape, call_, held);
    } else {
      RequireArrayShape(label, array, {call_.n, call_.m}, "queries x keys");
    }
    held.array = std::move(array);
  } else if constexpr (kIs<Kind, head_number>) {
    if (!layers) {
      held.doubles = {ParseDouble(option, *text)};
    } else {
      const NpyArray array = Load(option, *text);
      RequireFloat(label, array);
      RequireArrayShape(label, array, {call_.heads},
                        "one entry per query head");
      held.doubles.resize(call_.heads);
      for (size_t h = 0; h < call_.heads; ++h) {
        held.doubles[h] = array.type == NpyType::float32
                              ? double(array.data<float>()[h])
                              : array.data<double>()[h];
      }
    }
    held.floats.assign(held.doubles.begin(), held.doubles.end());
    held.given = true;
  } else if constexpr (kIs<Kind, number>) {
    held.doubles = {ParseDouble(option, *text)};
    held.floats = {float(held.doubles[0])};
    held.given = true;
  }
}

MaskInputs::MaskInputs(const Arguments& arguments, const MaskCall& call)
    : call_(call) {
#define ATTNPOOL_CLI_READ(name, heads_name, kind, needs, check, help) \
  Read(arguments,                                                     \
       ATTNPOOL_MASK_FIELD(name, heads_name, kind, needs, check, help), name);
  ATTNPOOL_MASK_FIELDS(ATTNPOOL_CLI_READ)
#undef ATTNPOOL_CLI_READ
}

std::string MaskInputs::ArrayOption(const Arguments& arguments) {
  std::string found;
  attnpool::VisitMaskFields([&](auto field) {
    using Kind = typename decltype(field)::Kind;
    if constexpr (kIs<Kind, matrix> || kIs<Kind, booleans>) {
      const std::string option = OptionName(field, MaskShape::matrices);
      if (found.empty() && arguments.Has(option)) found = option;
    }
  });
  return found;
}

void MaskInputs::SetAlibiSlopes(const std::vector<double>& slopes) {
  alibi_slope.doubles = slopes;
  alibi_slope.floats.assign(slopes.begin(), slopes.end());
  alibi_slope.given = true;
}

// (Each conversion is chosen by the member's type; matrices need n and m.)
template <typename T>
attnpool::Mask<T> MaskInputs::Mask() const {
  attnpool::Mask<T> mask;
  const auto to_mask = [&](const auto& held, auto& member) {
    if constexpr (std::is_same<std::decay_t<decltype(held)>, Array>::value) {
      ToMask<T>(held, member, call_.n, call_.m);
    } else {
      ToMask<T>(held, member);
    }
  };
#define ATTNPOOL_CLI_TO_MASK(name, heads_name, kind, needs, check, help) \
  to_mask(name, mask.name);
  ATTNPOOL_MASK_FIELDS(ATTNPOOL_CLI_TO_MASK)
#undef ATTNPOOL_CLI_TO_MASK
  return mask;
}

template <typename T>
attnpool::AttentionMask<T> MaskInputs::AttentionMask() const {
  attnpool::AttentionMask<T> mask;
  const auto to_heads = [&](const auto& held, auto& member) {
    using Held = std::decay_t<decltype(held)>;
    if constexpr (std::is_same<Held, Array>::value) {
      ToHeads<T>(held, member, call_.n, call_.m);
    } else if constexpr (std::is_same<Held, Lengths>::value) {
      ToHeads<T>(held, member, mask.lengths_per_query);
    } else if constexpr (std::is_same<std::decay_t<decltype(member)>,
                                      const T*>::value) {
      ToHeads<T>(held, member);
    } else {
      ToMask<T>(held, member);
    }
  };
#define ATTNPOOL_CLI_TO_HEADS(name, heads_name, kind, needs, check, help) \
  to_heads(name, mask.heads_name);
  ATTNPOOL_MASK_FIELDS(ATTNPOOL_CLI_TO_HEADS)
#undef ATTNPOOL_CLI_TO_HEADS
  return mask;
}

template attnpool::Mask<float> MaskInputs::Mask<float>() const;
template attnpool::Mask<double> MaskInputs::Mask<double>() const;
template attnpool::AttentionMask<float> MaskInputs::AttentionMask<float>()
    const;
template attnpool::AttentionMask<double> MaskInputs::AttentionMask<double>()
    const;

}  // namespace attnpool_cli
