// CPU feature detection and forcing a kernel path.
#include "kernels/cpu_features.h"

#include <gtest/gtest.h>

#if defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

namespace parallm {
namespace {

TEST(CpuFeaturesTest, BestPathIsSupportedAndNamed) {
  IsaPath best = BestSupportedIsa();
  EXPECT_TRUE(IsIsaSupported(best));
  EXPECT_TRUE(IsIsaSupported(IsaPath::kScalar));
  EXPECT_EQ(IsaName(IsaPath::kScalar), "scalar");
  EXPECT_EQ(IsaName(IsaPath::kAvx512), "avx512");
  EXPECT_EQ(IsaName(IsaPath::kAvxVnni), "avxvnni");
  EXPECT_EQ(IsaName(IsaPath::kAvx2), "avx2");
  EXPECT_EQ(IsaName(IsaPath::kAmx), "amx");
  // The paths form a ladder: AMX kernels assume AVX-512; AVX-512 and AVX-VNNI kernels assume AVX2.
  if (IsIsaSupported(IsaPath::kAmx)) {
    EXPECT_TRUE(IsIsaSupported(IsaPath::kAvx512));
  }
  if (IsIsaSupported(IsaPath::kAvx512) || IsIsaSupported(IsaPath::kAvxVnni)) {
    EXPECT_TRUE(IsIsaSupported(IsaPath::kAvx2));
  }
  EXPECT_EQ(IsaName(IsaPath::kNeon), "neon");
#if defined(__x86_64__)
  EXPECT_FALSE(IsIsaSupported(IsaPath::kNeon));
#endif
#if defined(__aarch64__) && defined(__linux__)
  // ARM64 with the dot-product extension (the cross tests run on qemu's `-cpu max`, which has it) runs NEON.
  EXPECT_EQ(IsIsaSupported(IsaPath::kNeon), (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0);
  if (IsIsaSupported(IsaPath::kNeon)) {
    EXPECT_EQ(best, IsaPath::kNeon);
  }
#endif
}

TEST(CpuFeaturesTest, ForceIsaSwitchesActivePath) {
  for (IsaPath p : {IsaPath::kScalar, IsaPath::kAvx2, IsaPath::kAvxVnni, IsaPath::kAvx512, IsaPath::kAmx,
                    IsaPath::kNeon}) {
    if (!IsIsaSupported(p)) continue;
    ForceIsa(p);
    EXPECT_EQ(ActiveIsa(), p);
  }
  ForceIsa(BestSupportedIsa());
  EXPECT_EQ(ActiveIsa(), BestSupportedIsa());
}

TEST(CpuFeaturesDeathTest, ForcingAnUnsupportedPathAborts) {
  for (IsaPath p : {IsaPath::kAvx2, IsaPath::kAvxVnni, IsaPath::kAvx512, IsaPath::kNeon, IsaPath::kAmx}) {
    if (IsIsaSupported(p)) continue;
    EXPECT_DEATH(ForceIsa(p), "not supported");
  }
}

}  // namespace
}  // namespace parallm
