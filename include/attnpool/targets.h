// Instruction-set targets: which are compiled, which this CPU runs, and
// forcing one for tests and benchmarks.
//
// Target names are Highway's: "AVX3" (AVX-512), "AVX2", "SSE4", "NEON",
// "SVE", "SVE2", and the portable fallback "SCALAR" or "EMU128" (whichever
// Highway builds with this compiler). Lookups are case-insensitive and also
// accept "avx512" for AVX3 and either fallback name for the fallback.
//
// The environment variable ATTNPOOL_ISA, read once at the first call into the
// library, forces a target as force_target() does; an unknown or unsupported
// value makes every call throw attnpool::Error naming ATTNPOOL_ISA (as a bad
// ATTNPOOL_TUNING does, below): computations, merges and finishes, rules of
// thumb and grids, and the target and tuning queries and forcing. Only the
// facts of the build and the CPU answer regardless: compiled_targets(),
// supported_targets(), supported_bf16_dot_instructions(), tunings(),
// last_run_target(), last_fused_path(), and the enum names and properties.
//
// Thread safety: every computing function may be called from many threads
// at once (each call's result is the same bits as the call made alone), the
// first calls of a process included (initialization is thread-safe), and
// the threads of the application's own OpenMP team among them. The
// forced target is process-global and NOT thread-safe: force_target() and
// reset_target() must not run concurrently with any other attnpool call.
// Calls that start after force_target() returns (in its thread, or in
// threads synchronized with it, e.g. started afterwards) run on the forced
// target. last_run_target() is per thread. (tests/test_concurrency.cc)
// After fork(), the child of a process that ran calls on several threads
// may call only with Execution::threads = 1: GNU OpenMP's thread pool does
// not survive a fork, and a region opened in the child never starts.
#pragma once

#include <string>
#include <vector>

namespace attnpool {

// Targets compiled into this build, best first.
std::vector<std::string> compiled_targets();

// Compiled targets that this CPU can run, best first (independent of forcing).
std::vector<std::string> supported_targets();

// The target the next call will run on: the forced one, else the best
// supported one.
std::string active_target();

// Makes every following call run on `name`. Throws attnpool::Error (argument
// "target") if the name is unknown, not compiled, or not supported by this
// CPU: never a silent fallback.
void force_target(const std::string& name);

// Back to the best supported target (ignores a valid ATTNPOOL_ISA), this
// CPU's choice of bf16 dot-product instruction and its tuning profile
// (ignores a valid ATTNPOOL_TUNING). A bad value of either still makes it
// throw, as every forcing call: it cannot undo the environment.
void reset_target();

// The bf16 dot-product instruction that the score tile of dot products of
// bfloat16 queries and keys runs on now (pool.h, the "tile_bf16" path: the
// fused tile, so more than 4 queries per call over keys in one strided
// array): "AMX_BF16" (x86 AMX tiles, tdpbf16ps, where the CPU has them and
// Linux grants their state to the process: the library asks for it with
// arch_prctl(ARCH_REQ_XCOMP_PERM) the first time this, the list below,
// forcing one, or a fused call of bf16 queries and keys asks which
// instruction runs; the grant enlarges the process's signal frames, so a
// later sigaltstack() smaller than that fails, and Linux refuses the grant
// while a smaller one is installed), "AVX512_BF16" (x86 vdpbf16ps) — either
// beside
// AVX3 — or "BF16" (ARMv8.6 BFDOT, beside NEON and SVE; GCC builds on
// Linux); "" where it does not (the CPU lacks one, the active target is
// another, forced or not, or none pays here: the float tile runs). Unless
// forced, the best of supported_bf16_dot_instructions() taken to pay on
// this CPU: all of them, except vdpbf16ps on x86 CPUs that list AMX (where
// measured, its tile was slower than the float tile: docs/benchmarks.md),
// which run AMX where Linux grants it, else the float tile.
// Each result is within the same bound (pool.h).
std::string bf16_dot_instruction();

// The bf16 dot-product instructions this CPU runs that tile on, best first
// (independent of forcing; empty where it has none).
std::vector<std::string> supported_bf16_dot_instructions();

// Makes the tile run on `name` (one of supported_bf16_dot_instructions(),
// case-insensitive) while the active target is of its family, until
// reset_target() or force_bf16_dot_instruction("") (back to this CPU's
// choice). Throws attnpool::Error (argument "instruction") for any other
// name. Process-global and not thread-safe, like force_target().
void force_bf16_dot_instruction(const std::string& name);

// The tuning profile the fused kernel runs with now: its block sizes and
// prefetch distances, one named profile per kind of CPU, chosen from what
// the CPU is (vendor and family from CPUID, the L2 size from Linux's sysfs)
// unless forced:
//   "zen4"      AMD Zen 4: strided decode of float keys leaves its reads to
//               the hardware prefetchers (faster there than prefetching
//               the keys: docs/benchmarks.md);
//   "small_l2"  an L2 under 1 MiB (CPU 0's, as Linux lists it): half the
//               blocks;
//   "generic"   every other CPU.
// Each profile computes within the same stated bounds (pool.h); results are
// bitwise the same for any thread count under one profile, but may differ
// between profiles in the last bits (the key blocks, where the online
// softmax rescales, move). A profile may be forced with parameters of its
// own (below); tuning() then returns the name with them, e.g. "generic
// query_rows=192". The environment variable ATTNPOOL_TUNING, read once at
// the first call into the library, forces a profile as force_tuning()
// does; a name or parameters force_tuning() would refuse make every call
// throw attnpool::Error naming ATTNPOOL_TUNING (those ATTNPOOL_ISA's
// paragraph above lists).
std::string tuning();

// The profile's parameters, e.g. "query_rows=96 key_block_bytes=2048
// decode_stretch=4 decode_key_prefetch_rows=0 decode_load_bytes=32
// decode_interleave=1" (core/tuning.h says what each is).
std::string tuning_parameters();

// Every profile's name, this CPU's choice first.
std::vector<std::string> tunings();

// Makes every following call run with the profile `name`
// (case-insensitive), "" back to this CPU's choice. Any of the profile's
// parameters may follow its name as name=value, whitespace apart ("zen4
// decode_interleave=0 decode_key_prefetch_rows=64": tuning_parameters()'s
// names; query_rows a multiple of 24 up to 1536, key_block_bytes 1 to 2^20,
// decode_stretch 1 to 64, decode_key_prefetch_rows up to 4096,
// decode_load_bytes 0 or 32, decode_interleave 0 or 1), to measure or test
// a machine's best parameters without rebuilding. Throws attnpool::Error
// (argument "tuning") for an unknown name or parameter or a value outside
// those, and then changes nothing. Process-global and not thread-safe, like
// force_target().
void force_tuning(const std::string& name);

// The target on which the calling thread's most recent attnpool computation
// actually ran, or "" if it ran none yet (or the last call had nothing to do).
std::string last_run_target();

}  // namespace attnpool
