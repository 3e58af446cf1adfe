/* The fields of a mask, one line each. Everything that carries a mask is
 * generated from this list: the C++ Mask (mask.h: one head of one sequence)
 * and AttentionMask (all heads of a batch), the C structs (attnpool_c.h),
 * their checks and conversions, the agreement of MPI ranks, the command
 * line's options and the Python keywords. A field's meaning lives where it
 * acts: the keys a query sees (core/visible_run.h), a score adjustment
 * (arch/normalize-inl.h, ScoreAdjuster), and the scalar reference
 * (src/reference.h). New fields go at the end: the C structs grow by their
 * struct_size.
 *
 * X(name, heads_name, kind, needs, check, help)
 *   name        the member of Mask, the CLI option (--name with '-' for
 *               '_') and Python keyword of the matrix functions
 *   heads_name  the same for AttentionMask and the attention layers: name,
 *               or for a value per query head its plural
 *   kind        how it is held (mask.h, MaskKind):
 *                 lengths      per-query key counts (n entries; per batch
 *                              entry or per query in AttentionMask)
 *                 flag         a yes/no switch
 *                 position     a signed key position
 *                 count        an optional key count
 *                 matrix       n x m of the call's type, added to scores
 *                              ((B, H, n, m) with broadcasting for heads)
 *                 booleans     n x m of uint8, 0 hiding ((B, H, n, m) too)
 *                 number       an optional number of the call's type
 *                 head_number  an optional number; one per query head in
 *                              AttentionMask
 *   needs       what the normalization must compute with it: any, scores
 *               (softmax, argmax, or an exponential kernel) or softmax
 *               (softmax, or sum of an exponential kernel)
 *   check       what a given value must be: any, positive (a count > 0),
 *               span (a count > 0 and at most 2^62: positions past the
 *               range of ptrdiff_t keep their spans), finite, not_nan, cap
 *               (finite, > 0, its reciprocal finite)
 *   help        its meaning in a line (the CLI's help, the Python docs)
 */
#ifndef ATTNPOOL_MASK_FIELDS_H_
#define ATTNPOOL_MASK_FIELDS_H_

#define ATTNPOOL_MASK_FIELDS(X)                                                \
  X(valid_lengths, valid_lengths, lengths, any, any,                          \
    "query i sees keys j < valid_lengths[i]")                                  \
  X(causal, causal, flag, any, any,                                            \
    "query i sees keys j <= p, its key position p = i + causal_offset")        \
  X(causal_offset, causal_offset, position, any, any,                          \
    "query i sits at key position p = i + causal_offset (default 0)")          \
  X(window_left, window_left, count, any, any,                                 \
    "sliding window: query i sees keys j >= p - window_left")                  \
  X(window_right, window_right, count, any, any,                               \
    "sliding window: query i sees keys j <= p + window_right")                 \
  X(bias, bias, matrix, scores, any,                                           \
    "added to the scores (-inf hides the key)")                                \
  X(visible, visible, booleans, any, any, "0 hides key j from query i")        \
  X(softcap, softcap, number, scores, cap,                                     \
    "logit soft-capping: a score s becomes softcap * tanh(s / softcap)")       \
  X(alibi_slope, alibi_slopes, head_number, scores, finite,                    \
    "ALiBi: a score s becomes s + slope * (j - p)")                            \
  X(sink, sinks, head_number, softmax, not_nan,                                \
    "attention sink: a logit in the softmax's denominator with no value")      \
  X(chunk, chunk, count, any, span,                                        \
    "chunked attention: query i sees keys j with j / chunk == p / chunk")      \
  X(alibi_symmetric, alibi_symmetric, flag, any, any,                          \
    "ALiBi of the distance either way: s becomes s - slope * |j - p|")

#endif /* ATTNPOOL_MASK_FIELDS_H_ */
