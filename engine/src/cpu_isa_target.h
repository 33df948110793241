// COLIBRI_TARGET_BEGIN("feature,...") / COLIBRI_TARGET_END: compile the
// functions in between for an instruction set, with GCC (#pragma GCC target)
// or clang (#pragma clang attribute). Functions defined elsewhere, the
// standard library's included, keep the baseline target, so nothing built
// for AVX-512 can be linked into code that runs on a CPU without it.
#pragma once

#define COLIBRI_PRAGMA(x) _Pragma(#x)
#if defined(__clang__)
#define COLIBRI_TARGET_BEGIN(features) \
  COLIBRI_PRAGMA(clang attribute push(__attribute__((target(features))), apply_to = function))
#define COLIBRI_TARGET_END COLIBRI_PRAGMA(clang attribute pop)
#else
#define COLIBRI_TARGET_BEGIN(features) COLIBRI_PRAGMA(GCC push_options) COLIBRI_PRAGMA(GCC target(features))
#define COLIBRI_TARGET_END COLIBRI_PRAGMA(GCC pop_options)
#endif
