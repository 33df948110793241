/* Linked only into the GPU bundle's binaries (tools/gpu-bundle.sh), which
 * carry libstdc++ statically: its std::random_device calls arc4random, new
 * in glibc 2.36, and that one reference would make every binary need
 * GLIBC_2.36. The bundle links with -Wl,--wrap=arc4random, so the reference
 * lands here instead: the same contract (a uniformly random 32-bit value from
 * the kernel's generator, never failing) on getrandom(2), glibc 2.25. As
 * glibc's arc4random, it ends the process when the kernel cannot give
 * randomness at all. Colibri itself never calls std::random_device. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>

uint32_t __wrap_arc4random(void);

uint32_t __wrap_arc4random(void) {
  uint32_t value = 0;
  for (;;) {
    const ssize_t got = getrandom(&value, sizeof value, 0);
    if (got == (ssize_t)sizeof value) return value;
    if (got < 0 && errno != EINTR) {
      fprintf(stderr, "arc4random: getrandom failed (errno %d)\n", errno);
      abort();
    }
  }
}
