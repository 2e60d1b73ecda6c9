// BlockHash: XXH3 of a full block's token ids, seeded with the parent block's hash to chain whole prefixes.
#include "cache/block_hash.h"

#include <xxhash.h>

namespace parallm {

namespace {
// Seed of the first block of every sequence (it has no parent); any fixed value works, it only has to be stable.
constexpr uint64_t kRootSeed = 0x70617261'6c6c6d31ULL;  // "parallm1"
}  // namespace

BlockHash HashBlockTokens(std::optional<BlockHash> parent, std::span<const int32_t> tokens, uint64_t salt,
                          uint32_t mark) {
  uint64_t seed = parent ? parent->value : kRootSeed;
  if (!parent && salt != 0) seed = XXH3_64bits_withSeed(&salt, sizeof(salt), kRootSeed);
  if (mark != 0) seed = XXH3_64bits_withSeed(&mark, sizeof(mark), seed);
  return BlockHash{XXH3_64bits_withSeed(tokens.data(), tokens.size_bytes(), seed)};
}

}  // namespace parallm
