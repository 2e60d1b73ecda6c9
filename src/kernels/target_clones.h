// PARALLM_CLONES: a function compiled once per x86 instruction set (AVX-512, AVX2, baseline), picked by the loader
// for the running CPU. The vectorizer keeps each loop's order of operations, so every clone gives the same bits.
// Not under AddressSanitizer, whose runtime is not yet set up when the loader runs the clones' resolvers.
#pragma once

#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
#define PARALLM_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define PARALLM_CLONES
#endif
