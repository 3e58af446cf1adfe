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
//
// The sanitized build (ATTNPOOL_SANITIZED_BUILD, tools/fuzz-common.sh) is a
// test build for memory and undefined-behaviour errors, not a shipped one:
// compiled for AVX2 as its baseline, so that neither EMU128 nor SSE4 is
// (the release suite forces both on every x86 run, and they dominate the
// sanitized fused kernel's compile), with AVX3 only where the CPU runs
// it (ATTNPOOL_SANITIZED_AVX3): code that cannot run is not worth compiling
// under the sanitizers. docs/benchmarks.md gives the compile times.
#pragma once

#if defined(ATTNPOOL_SANITIZED_BUILD) && !defined(ATTNPOOL_SANITIZED_AVX3)
#define ATTNPOOL_SANITIZED_DISABLED_TARGETS HWY_AVX3
#else
#define ATTNPOOL_SANITIZED_DISABLED_TARGETS 0
#endif

#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS \
  (HWY_SSSE3 | HWY_SVE_256 | HWY_SVE2_128 | ATTNPOOL_SANITIZED_DISABLED_TARGETS)
#endif
