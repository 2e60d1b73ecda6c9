// CPU feature detection (GCC's __builtin_cpu_supports, which also checks that the OS saves the vector
// state; on ARM64 the kernel's HWCAP bits) and the process-wide choice of kernel path: best supported, or
// PARALLM_ISA, or ForceIsa.
#include "kernels/cpu_features.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "util/check.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif
#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#if defined(__linux__) && defined(__aarch64__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

namespace parallm {
namespace {

constexpr int kUnset = -1;
std::atomic<int> g_forced{kUnset};

#if defined(__x86_64__) || defined(__i386__)
// AMX: the CPU has the tiles and int8 multiplies (CPUID.7.0:EDX bits 24, 25), the OS saves tile state
// (XCR0 bits 17, 18), and Linux grants this process the 8 KiB of tile data per thread (arch_prctl
// ARCH_REQ_XCOMP_PERM, Linux 5.16+; without it the first tile instruction faults).
bool DetectAmx() {
#if defined(__linux__) && defined(__x86_64__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  if (!(edx & (1u << 24)) || !(edx & (1u << 25))) return false;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !(ecx & (1u << 27))) return false;  // OSXSAVE
  unsigned xcr0_lo = 0, xcr0_hi = 0;
  __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  if ((xcr0_lo & (3u << 17)) != (3u << 17)) return false;
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}
#endif

bool Detect(IsaPath p) {
  switch (p) {
    case IsaPath::kScalar:
      return true;
#if defined(__x86_64__) || defined(__i386__)
    case IsaPath::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    case IsaPath::kAvxVnni:
      return Detect(IsaPath::kAvx2) && __builtin_cpu_supports("avxvnni");
    case IsaPath::kAvx512:
      return Detect(IsaPath::kAvx2) && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
    case IsaPath::kAmx:
      return Detect(IsaPath::kAvx512) && DetectAmx();
#endif
#if defined(__aarch64__) && defined(__linux__)
    case IsaPath::kNeon:
      return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;  // NEON is baseline; sdot is the dot-product extension
#endif
    default:
      return false;
  }
}

#if defined(__x86_64__) || defined(__i386__)
// AVX512-BF16 (CPUID.7.1:EAX bit 5) beside AVX-512 itself.
bool DetectAvx512Bf16() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) || !(eax & (1u << 5))) return false;
  return IsIsaSupported(IsaPath::kAvx512);
}

// AMX-BF16 tiles (CPUID.7.0:EDX bit 22) and AVX512-BF16 conversions, beside AMX itself.
bool DetectAmxBf16() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) || !(edx & (1u << 22))) return false;
  return DetectAvx512Bf16() && IsIsaSupported(IsaPath::kAmx);
}
#endif

IsaPath FromEnv() {
  const char* env = std::getenv("PARALLM_ISA");
  if (env == nullptr || *env == '\0') return BestSupportedIsa();
  std::string v(env);
  for (IsaPath p : {IsaPath::kScalar, IsaPath::kAvx2, IsaPath::kAvxVnni, IsaPath::kAvx512, IsaPath::kNeon,
                    IsaPath::kAmx}) {
    if (v == IsaName(p)) {
      if (IsIsaSupported(p)) return p;
      std::fprintf(stderr, "PARALLM_ISA=%s is not supported by this CPU; using %s\n", env,
                   std::string(IsaName(BestSupportedIsa())).c_str());
      return BestSupportedIsa();
    }
  }
  std::fprintf(stderr, "PARALLM_ISA=%s is unknown (scalar|avx2|avxvnni|avx512|amx|neon); using %s\n", env,
               std::string(IsaName(BestSupportedIsa())).c_str());
  return BestSupportedIsa();
}

}  // namespace

std::string_view IsaName(IsaPath p) {
  switch (p) {
    case IsaPath::kScalar:
      return "scalar";
    case IsaPath::kAvx2:
      return "avx2";
    case IsaPath::kAvxVnni:
      return "avxvnni";
    case IsaPath::kAvx512:
      return "avx512";
    case IsaPath::kNeon:
      return "neon";
    case IsaPath::kAmx:
      return "amx";
  }
  return "?";
}

bool IsIsaSupported(IsaPath p) {
  static const bool supported[6] = {Detect(IsaPath::kScalar), Detect(IsaPath::kAvx2), Detect(IsaPath::kAvxVnni),
                                    Detect(IsaPath::kAvx512), Detect(IsaPath::kNeon),   Detect(IsaPath::kAmx)};
  return supported[static_cast<int>(p)];
}

IsaPath BestSupportedIsa() {
  for (IsaPath p : {IsaPath::kAmx, IsaPath::kAvx512, IsaPath::kAvxVnni, IsaPath::kAvx2, IsaPath::kNeon})
    if (IsIsaSupported(p)) return p;
  return IsaPath::kScalar;
}

bool HasAmxBf16() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool has = DetectAmxBf16();
  return has;
#else
  return false;
#endif
}

bool HasAvx512Bf16() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool has = DetectAvx512Bf16();
  return has;
#else
  return false;
#endif
}

IsaPath ActiveIsa() {
  int forced = g_forced.load(std::memory_order_relaxed);
  if (forced != kUnset) return static_cast<IsaPath>(forced);
  static const IsaPath from_env = FromEnv();
  return from_env;
}

void ForceIsa(IsaPath p) {
  PARALLM_CHECK_MSG(IsIsaSupported(p), "ForceIsa: path not supported on this CPU");
  g_forced.store(static_cast<int>(p), std::memory_order_relaxed);
}

}  // namespace parallm
