// Whether the library runs under AddressSanitizer (ATTNPOOL_SANITIZE, whose
// build defines ATTNPOOL_ADDRESS_SANITIZER in every TU: the tests' own code
// is not instrumented, yet must know): its allocator poisons freed memory
// and aborts where malloc would return null.
#pragma once

namespace attnpool {
namespace detail {

#if defined(ATTNPOOL_ADDRESS_SANITIZER) || defined(__SANITIZE_ADDRESS__)
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
