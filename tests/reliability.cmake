# Reliability tests over the API table (tests/api_table.h): hostile inputs,
# non-finite data, determinism, concurrency, huge shapes; the fuzz target and
# the replay of its corpus. Included by tests/CMakeLists.txt.

# The tables (functions on matrices, attention layers) and the workspace,
# shared by the Catch2 suite and the fuzzers.
add_library(attnpool_test_api OBJECT api_table.cc layer_table.cc)
target_link_libraries(attnpool_test_api PUBLIC attnpool_testing)
target_include_directories(attnpool_test_api PUBLIC ${PROJECT_SOURCE_DIR})

target_sources(attnpool_tests PRIVATE
  test_concurrency.cc
  test_determinism.cc
  test_hostile.cc
  test_huge.cc
  test_nonfinite.cc
  $<TARGET_OBJECTS:attnpool_test_api>)
find_package(Threads REQUIRED)
target_link_libraries(attnpool_tests PRIVATE Threads::Threads)

# A target this process cannot run, in ATTNPOOL_ISA: every call is refused.
if(CMAKE_SYSTEM_PROCESSOR MATCHES "aarch64|arm64")
  set(foreign_isa avx2)
else()
  set(foreign_isa neon)
endif()
add_test(NAME hostile.ATTNPOOL_ISA=${foreign_isa}
  COMMAND attnpool_tests "hostile: an unsupported ATTNPOOL_ISA rejects every call"
          --warn NoTests)
set_tests_properties(hostile.ATTNPOOL_ISA=${foreign_isa} PROPERTIES
  ENVIRONMENT ATTNPOOL_ISA=${foreign_isa})

if(NOT CMAKE_CROSSCOMPILING)
  # Offsets past 2^32 in reserved address space (slow under qemu-user).
  add_test(NAME huge.strides_past_2^32 COMMAND attnpool_tests
    "huge: element offsets past 2^32 in every function" --warn NoTests)
  # The determinism cases again, with the default thread count from the
  # environment.
  foreach(threads 1 2 3 7)
    add_test(NAME determinism.OMP_NUM_THREADS=${threads}
      COMMAND attnpool_tests "[determinism]" --warn NoTests)
    set_tests_properties(determinism.OMP_NUM_THREADS=${threads} PROPERTIES
      ENVIRONMENT OMP_NUM_THREADS=${threads})
  endforeach()
  # Native, unsanitized builds only: a few seconds, then ~8.6 GB and
  # 10-20 s each.
  if(NOT ATTNPOOL_SANITIZE)
    add_test(NAME huge.fused_pairs_past_2^32 COMMAND attnpool_tests
      "huge: fused pool over 65600^2 pairs in bounded memory" --warn NoTests)
    add_test(NAME huge.fused_wide_values COMMAND attnpool_tests
      "huge: fused pool over wide value rows in bounded memory" --warn NoTests)
    add_test(NAME huge.staged_one_workspace COMMAND attnpool_tests
      "huge: staged pipeline over 46341^2 weights in one workspace" --warn NoTests)
    add_test(NAME huge.distances_past_2^32 COMMAND attnpool_tests
      "huge: distances with 46341^2 entries at offsets past 2^32" --warn NoTests)
  endif()
endif()

# The fuzz target's corpus (seeds and past failures), replayed by a plain
# driver in every build, the cross build under qemu included; in the
# sanitized build by the libFuzzer target itself (-runs=0), the driver then
# built only when asked for (tools/fuzz-campaign.sh reproduces with it).
if(ATTNPOOL_BUILD_FUZZERS)
  set(replay_build EXCLUDE_FROM_ALL)
endif()
add_executable(attnpool_fuzz_replay ${replay_build}
  fuzz/fuzz_api.cc fuzz/fuzz_decode.cc fuzz/fuzz_layers.cc fuzz/fuzz_regression.cc
  fuzz/replay_main.cc
  $<TARGET_OBJECTS:attnpool_test_api>)
target_link_libraries(attnpool_fuzz_replay PRIVATE attnpool_testing)
target_include_directories(attnpool_fuzz_replay PRIVATE ${PROJECT_SOURCE_DIR})
if(NOT ATTNPOOL_BUILD_FUZZERS)
  add_test(NAME fuzz.corpus
    COMMAND attnpool_fuzz_replay ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus)
  # And 300 random inputs of a fixed seed (tools/test-arm.sh runs others
  # under qemu, at vector lengths its suites do not).
  add_test(NAME fuzz.random COMMAND attnpool_fuzz_replay --random 3 300)
endif()

# libFuzzer (clang): tools/test-sanitize.sh runs it per function (a fixed
# seed and number of inputs), tools/fuzz-campaign.sh for long campaigns. It
# and its harness are instrumented like the library: coverage guides it
# through the decoder too.
if(ATTNPOOL_BUILD_FUZZERS)
  add_executable(attnpool_fuzz fuzz/fuzz_api.cc fuzz/fuzz_decode.cc fuzz/fuzz_layers.cc fuzz/fuzz_regression.cc
    $<TARGET_OBJECTS:attnpool_test_api>)
  target_link_libraries(attnpool_fuzz PRIVATE attnpool_testing)
  target_include_directories(attnpool_fuzz PRIVATE ${PROJECT_SOURCE_DIR})
  target_compile_options(attnpool_fuzz PRIVATE ${ATTNPOOL_SANITIZE_OPTIONS})
  target_link_options(attnpool_fuzz PRIVATE -fsanitize=fuzzer)
  add_test(NAME fuzz.corpus COMMAND attnpool_fuzz -runs=0
    ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus)
endif()

# An ASan-instrumented library cannot be linked by the outside consumer
# project (built without the sanitizer flags).
if(ATTNPOOL_SANITIZE AND TEST install.consumer)
  set_tests_properties(install.consumer PROPERTIES DISABLED TRUE)
endif()
