// The mask options of the commands, one per field of the list
// (attnpool/mask_fields.h): --<name> for the command on matrices (pool),
// --<heads_name> for the attention layers ('-' for '_'), each read as its
// field's kind says (a flag, a number, a count, a position, or an .npy file
// of lengths, a matrix, booleans or a value per query head).
#pragma once

#include <attnpool/attnpool.h>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "tools/cli/arrays.h"
#include "tools/cli/options.h"

namespace attnpool_cli {

// Which mask: a Mask over matrices, or an AttentionMask over the layers'
// (batch, heads, n, m).
enum class MaskShape { matrices, layers };

std::vector<OptionInfo> MaskOptions(MaskShape shape);

// The call the mask applies to: n queries, m keys; the layers' batch and
// query heads (`flat`: their inputs were 2-D, one sequence); the dtype of
// its scores (`score_type`), and the input whose dtype the arrays match
// (its label, and whether narrow inputs made the scores float32).
struct MaskCall {
  MaskShape shape = MaskShape::matrices;
  size_t n = 0, m = 0, batch = 1, heads = 1;
  bool flat = true;
  NpyType score_type = NpyType::float32;
  std::string reference;  // e.g. "--queries q.npy"
  bool narrow = false;
};

// The mask of a call, read from the command line's options.
class MaskInputs {
 public:
  MaskInputs() = default;
  MaskInputs(const Arguments& arguments, const MaskCall& call);

  // Whether an option gives an n×m array (bias, visible): not under
  // mpirun, where each rank holds only its keys. Names it, or "".
  static std::string ArrayOption(const Arguments& arguments);

  template <typename T>
  attnpool::Mask<T> Mask() const;
  template <typename T>
  attnpool::AttentionMask<T> AttentionMask() const;

  // The layers' --alibi: the standard slopes of the call's heads.
  void SetAlibiSlopes(const std::vector<double>& slopes);

  // How each kind is held here.
  struct Lengths {
    std::vector<size_t> entries;
    bool given = false, per_query = false;
  };
  struct Array {
    std::optional<NpyArray> array;
    size_t batch = 1, heads = 1;
  };
  struct Values {  // a number, or (layers) one per query head
    std::vector<double> doubles;
    std::vector<float> floats;
    bool given = false;
  };
 private:
  MaskCall call_;
#define ATTNPOOL_CLI_HELD_lengths Lengths
#define ATTNPOOL_CLI_HELD_flag bool
#define ATTNPOOL_CLI_HELD_position std::ptrdiff_t
#define ATTNPOOL_CLI_HELD_count std::optional<size_t>
#define ATTNPOOL_CLI_HELD_matrix Array
#define ATTNPOOL_CLI_HELD_booleans Array
#define ATTNPOOL_CLI_HELD_number Values
#define ATTNPOOL_CLI_HELD_head_number Values
#define ATTNPOOL_CLI_MEMBER(name, heads_name, kind, needs, check, help) \
  ATTNPOOL_CLI_HELD_##kind name{};
  ATTNPOOL_MASK_FIELDS(ATTNPOOL_CLI_MEMBER)
#undef ATTNPOOL_CLI_MEMBER

  template <class Kind, class Held>
  void Read(const Arguments& arguments, const attnpool::MaskField<Kind>& field,
            Held& held);
};

extern template attnpool::Mask<float> MaskInputs::Mask<float>() const;
extern template attnpool::Mask<double> MaskInputs::Mask<double>() const;
extern template attnpool::AttentionMask<float>
MaskInputs::AttentionMask<float>() const;
extern template attnpool::AttentionMask<double>
MaskInputs::AttentionMask<double>() const;

}  // namespace attnpool_cli
