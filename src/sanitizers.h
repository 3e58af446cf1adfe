// Whether the build runs under AddressSanitizer (GCC defines
// __SANITIZE_ADDRESS__, clang answers __has_feature): its allocator poisons
// freed memory and aborts where malloc would return null.
#pragma once

namespace attnpool {
namespace detail {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif

}  // namespace detail
}  // namespace attnpool
