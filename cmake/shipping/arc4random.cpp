// arc4random for the binaries that ship (DcpShipping.cmake): the wheel's and the GPU bundle's.
//
// They link the C++ runtime statically (DCP_STATIC_DEPS), and GCC 12's libstdc++.a, built against
// glibc 2.36, calls arc4random from std::random_device (and pulls that object in with its
// copy-on-write strings). Left to glibc, that one reference would need glibc 2.36 at run time, and
// the wheel would not install on Ubuntu 22.04 (glibc 2.35), the base of most engines' CI images.
// Defined here, hidden, the reference binds inside the binary to the kernel's getrandom(2)
// (glibc 2.25), and the binaries need nothing newer than glibc 2.34 (tools/py/check_wheel.py
// checks the wheel's tag). <stdlib.h>, which declares glibc's own, is not included.
#include <sys/random.h>

#include <cerrno>
#include <cstdint>

extern "C" __attribute__((visibility("hidden"))) uint32_t arc4random() noexcept {
  uint32_t value = 0;
  for (;;) {
    const ssize_t got = getrandom(&value, sizeof value, 0);
    if (got == static_cast<ssize_t>(sizeof value)) return value;
    // Fewer bytes than asked or an interrupt: ask again. Anything else is a kernel without
    // getrandom (Linux < 3.17), which no manylinux_2_34 system runs.
    if (got < 0 && errno != EINTR) __builtin_trap();
  }
}
