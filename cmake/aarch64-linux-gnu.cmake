# Cross build for 64-bit ARM on Debian multiarch (g++-aarch64-linux-gnu,
# libhwy-dev:arm64). Programs run under qemu-aarch64; the CPU it emulates is
# chosen by QEMU_CPU (max: SVE2, a64fx: SVE, cortex-a72: NEON).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64)
