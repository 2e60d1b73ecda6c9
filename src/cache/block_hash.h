// BlockHash: the identity of a full KV block's content for prefix caching: a hash of the block's token ids
// chained with its parent block's hash (vLLM v1 style), so equal hashes mean equal whole prefixes.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>

namespace parallm {

struct BlockHash {
  uint64_t value = 0;
  bool operator==(const BlockHash&) const = default;
};

// xxHash64 (XXH3) of (parent hash or a fixed seed, the block's `block_size` token ids). `salt` (first block only;
// the chain carries it on) separates sequences whose K/V differ for the same tokens: the LoRA adapter they run
// with (0: the base model), so blocks are never shared across adapters. `mark` (any block; 0: none) separates a block
// whose K/V were computed in part by another formula than a prompt's (KVCacheManager's int8_from).
BlockHash HashBlockTokens(std::optional<BlockHash> parent, std::span<const int32_t> tokens, uint64_t salt = 0,
                          uint32_t mark = 0);

}  // namespace parallm

template <>
struct std::hash<parallm::BlockHash> {
  size_t operator()(const parallm::BlockHash& h) const noexcept { return static_cast<size_t>(h.value); }
};
