// The AMX tile configuration (palette 1: each of the 8 tile registers' rows and bytes per row) and loading it; shared
// by the AMX kernel (matmul_amx.cpp) and kernels_bench's AmxProbe.
#pragma once

#include <cstdint>

namespace parallm::amx {

struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};

  void Set(int tile, int n_rows, int bytes_per_row) {
    rows[tile] = static_cast<uint8_t>(n_rows);
    colsb[tile] = static_cast<uint16_t>(bytes_per_row);
  }
};

// ldtilecfg. Not _tile_loadconfig: GCC 12's version tells the compiler it reads only 8 bytes of the config, so the
// other stores may be dropped (seen: SIGILL on the first tile load). The operand here is the whole object.
inline void LoadTileConfig(const TileConfig& c) { __asm__ volatile("ldtilecfg %0" : : "m"(c)); }

}  // namespace parallm::amx
