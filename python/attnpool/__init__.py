"""attnpool: attention pooling by similarity, on NumPy arrays.

Each output row is a weighted sum of value rows, weighted by how similar a
query is to each key: the Nadaraya–Watson kernel regressor (Gaussian,
boxcar, Epanechnikov, ... kernels with a bandwidth) and the attention layers
of deep learning (scaled dot-product attention with masks and grouped-query
heads, additive, multi-head), on SIMD kernels chosen for this CPU at run
time.

Arrays are float32 or float64; every array of a call has the dtype of its
first, and so does the result. Inputs are read in place when their rows are
contiguous and copied once otherwise (as are big-endian arrays and arrays at
byte strides that are no multiple of their element). ``out=`` must have the
result's shape and dtype, contiguous rows, native byte order, and be
writable. Errors raise ``TypeError``
(a wrong type: a dtype, a non-integer count, an ``out=`` that is no array)
or ``ValueError`` (everything else), the message naming the
argument; nothing is written to outputs then. The GIL is released while the
library computes; ``threads`` sets the OpenMP threads of one call (None: the
OpenMP default).
"""

from . import _core
from ._checks import MASK_FIELDS
from ._elements import (Int8Rows, ScaledRows, bfloat16_to_float,
                        dequantize_rows, element_types, quantize_rows,
                        to_bfloat16, widen_rows)
from ._layers import (additive_attention, alibi_slopes, multi_head_attention,
                      scaled_dot_product_attention,
                      scaled_dot_product_attention_paged,
                      scaled_dot_product_attention_varlen)
from ._pool import PoolState, attention_pool
from ._regression import NadarayaWatson, bandwidth_rule, cross_validate
from ._stages import apply_kernel, normalize, pairwise_distances, weighted_sum

__version__: str = _core.__version__

#: The names of the library's kernels, distances and normalizations.
KERNELS: tuple = tuple(_core.kernel_names())
DISTANCES: tuple = tuple(_core.distance_names())
NORMALIZATIONS: tuple = tuple(_core.normalization_names())


def targets() -> list:
    """The instruction sets compiled in, best first (e.g. AVX3, AVX2, SSE4,
    SCALAR)."""
    return _core.compiled_targets()


#: The compiled targets this CPU can run, best first.
supported_targets = _core.supported_targets
#: The target calls run on (the best supported, or the forced one).
active_target = _core.active_target
#: Runs every later call on the named target (ValueError if unsupported).
force_target = _core.force_target
#: Back to the best supported target.
reset_target = _core.reset_target
#: The target the last call of this thread ran on.
last_run_target = _core.last_run_target
#: The bf16 dot-product instruction bf16 query·key dot products run on now
#: ("AMX_BF16", "AVX512_BF16", "BF16" on ARM), or "" where none runs.
bf16_dot_instruction = _core.bf16_dot_instruction
#: The bf16 dot-product instructions this CPU runs that tile on, best first.
supported_bf16_dot_instructions = _core.supported_bf16_dot_instructions
#: Makes the tile run on one of them (ValueError otherwise) until
#: reset_target(); "" restores this CPU's choice.
force_bf16_dot_instruction = _core.force_bf16_dot_instruction
#: The tuning profile the fused kernel runs with now (its block sizes and
#: prefetch distances, chosen from what the CPU is: "zen4", "small_l2",
#: "generic"), and its parameters as "name=value ..." text.
tuning = _core.tuning
tuning_parameters = _core.tuning_parameters
#: Every profile, this CPU's choice first.
tunings = _core.tunings
#: Makes every following call run with a profile, any of its parameters
#: after its name as name=value ("generic query_rows=192"), until
#: reset_target() (ValueError for an unknown name or parameter or a value out
#: of range); "" restores this CPU's choice.
force_tuning = _core.force_tuning
#: The fused path the last attention_pool of this thread took.
last_fused_path = _core.last_fused_path


def mask_fields():
    """The mask keywords, one per field of the library's list
    (attnpool/mask_fields.h): tuples (name, heads_name, kind, needs, help),
    `name` the keyword of the functions on matrices, `heads_name` the
    attention layers'."""
    return list(MASK_FIELDS)

__all__ = [
    "pairwise_distances", "apply_kernel", "normalize", "weighted_sum",
    "attention_pool", "PoolState", "scaled_dot_product_attention",
    "scaled_dot_product_attention_varlen", "scaled_dot_product_attention_paged",
    "additive_attention", "multi_head_attention", "alibi_slopes", "NadarayaWatson",
    "cross_validate", "bandwidth_rule", "targets", "supported_targets",
    "active_target", "force_target", "reset_target", "last_run_target",
    "bf16_dot_instruction", "supported_bf16_dot_instructions",
    "force_bf16_dot_instruction", "tuning", "tuning_parameters", "tunings",
    "force_tuning", "last_fused_path", "mask_fields", "KERNELS", "DISTANCES", "NORMALIZATIONS", "Int8Rows",
    "ScaledRows", "element_types", "widen_rows",
    "to_bfloat16", "bfloat16_to_float", "quantize_rows", "dequantize_rows",
]
