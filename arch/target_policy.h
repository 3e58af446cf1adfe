// The one target policy of the project: included before any Highway header by
// every arch/*.cc and by src/targets.cc, so that every TU agrees on
// HWY_TARGETS.
//
// Left out, to keep the build small on 2 cores:
//  - SSSE3: superseded by SSE4 on every x86 CPU that has it;
//  - AVX3_DL: for float/double arithmetic it adds nothing over AVX3;
//  - SVE_256 / SVE2_128: fixed-width SVE variants; the generic SVE and SVE2
//    targets run on those CPUs too.
// EMU128 (portable C++) stays: it is the fallback and is tested like the rest.
// The sanitized build (ATTNPOOL_SANITIZED_BUILD, tools/fuzz-common.sh) leaves
// out SSE4 too: EMU128 has its 128-bit vectors (the same lanes, tails and
// blocks of the same code), and the release suite forces SSE4 on every x86
// run. Under the sanitizers, SSE4's test cases took 74 s of the suite's 402
// (summed, Zen 4).
#pragma once

#ifdef ATTNPOOL_SANITIZED_BUILD
#define ATTNPOOL_SANITIZED_DISABLED_TARGETS HWY_SSE4
#else
#define ATTNPOOL_SANITIZED_DISABLED_TARGETS 0
#endif

#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS \
  (HWY_SSSE3 | HWY_SVE_256 | HWY_SVE2_128 | ATTNPOOL_SANITIZED_DISABLED_TARGETS)
#endif
