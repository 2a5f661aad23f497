// Symbol visibility: the library builds with hidden visibility; only what is
// marked CHORUS_EXPORT (the public C++ API) and the C ABI are exported.
#pragma once

#if defined(__GNUC__)
#define CHORUS_EXPORT __attribute__((visibility("default")))
#else
#define CHORUS_EXPORT
#endif
