// CHECK macros for internal invariants: a broken invariant aborts with a message naming the place.
#pragma once

#include <cstdio>
#include <cstdlib>

#define PARALLM_CHECK(cond)                                                                \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      std::fprintf(stderr, "%s:%d: invariant violated: %s\n", __FILE__, __LINE__, #cond);  \
      std::abort();                                                                        \
    }                                                                                      \
  } while (0)

#define PARALLM_CHECK_MSG(cond, msg)                                                                   \
  do {                                                                                                 \
    if (!(cond)) {                                                                                     \
      std::fprintf(stderr, "%s:%d: invariant violated: %s (%s)\n", __FILE__, __LINE__, #cond, (msg)); \
      std::abort();                                                                                    \
    }                                                                                                  \
  } while (0)

#ifdef NDEBUG
#define PARALLM_DCHECK(cond) \
  do {                       \
  } while (0)
#else
#define PARALLM_DCHECK(cond) PARALLM_CHECK(cond)
#endif
