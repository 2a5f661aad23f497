// Run-time choice of the reduction kernel: what the CPU and OS support, and
// the CHORUS_REDUCE_ISA override.
#include "core/env.hpp"
#include "core/reduce_kernels.hpp"

#include <chorus/error.hpp>

#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace chorus {
namespace {

#if defined(__x86_64__) || defined(__i386__)
constexpr bool kX86 = true;
#else
constexpr bool kX86 = false;
#endif

// __builtin_cpu_supports reads libgcc's CPUID table, which also checks that the
// OS saves the YMM/ZMM state (XGETBV), so a "yes" means the instructions run.
bool cpu_has_avx2() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  // F16C from CPUID leaf 1 (clang 14's __builtin_cpu_supports does not know "f16c").
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __get_cpuid(1, &eax, &ebx, &ecx, &edx) &&
         (ecx & bit_F16C) != 0;
#else
  return false;
#endif
}

bool cpu_has_avx512() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  return cpu_has_avx2() && __builtin_cpu_supports("avx512f") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vl");
#else
  return false;
#endif
}

ReduceIsa best_supported_isa() noexcept {
  if (reduce_isa_supported(ReduceIsa::Avx512)) return ReduceIsa::Avx512;
  if (reduce_isa_supported(ReduceIsa::Avx2)) return ReduceIsa::Avx2;
  return ReduceIsa::Generic;
}

ReduceIsa resolve_isa() {
  std::string forced = env_or("CHORUS_REDUCE_ISA", "");
  if (forced.empty()) return best_supported_isa();
  ReduceIsa isa;
  if (!parse_reduce_isa(forced, &isa)) {
    throw Error(Status::InvalidArgument,
                "CHORUS_REDUCE_ISA must be generic, avx2 or avx512, got '" + forced + "'");
  }
  if (!reduce_isa_supported(isa)) {
    throw Error(Status::InvalidArgument,
                "CHORUS_REDUCE_ISA=" + forced + " but this CPU or OS does not support it");
  }
  return isa;
}

}  // namespace

std::string_view to_string(ReduceIsa isa) noexcept {
  switch (isa) {
    case ReduceIsa::Generic:
      return "generic";
    case ReduceIsa::Avx2:
      return "avx2";
    case ReduceIsa::Avx512:
      return "avx512";
  }
  return "unknown";
}

bool parse_reduce_isa(std::string_view name, ReduceIsa* out) noexcept {
  for (ReduceIsa isa : kReduceIsas) {
    if (name == to_string(isa)) {
      *out = isa;
      return true;
    }
  }
  return false;
}

bool reduce_isa_supported(ReduceIsa isa) noexcept {
  switch (isa) {
    case ReduceIsa::Generic:
      return true;
    case ReduceIsa::Avx2:
      return kX86 && cpu_has_avx2();
    case ReduceIsa::Avx512:
      return kX86 && cpu_has_avx512();
  }
  return false;
}

namespace {

/// The kernel of `isa` among one per ISA; `what` ("reduction", "conversion") names it in the
/// error when the ISA is not supported here.
template <typename Kernel>
Kernel kernel_for(ReduceIsa isa, const char* what, Kernel generic, Kernel avx2, Kernel avx512) {
  if (!reduce_isa_supported(isa)) {
    throw Error(Status::InvalidArgument, "the " + std::string(to_string(isa)) + " " + what +
                                             " kernel is not supported here");
  }
  switch (isa) {
    case ReduceIsa::Avx2:
      return avx2;
    case ReduceIsa::Avx512:
      return avx512;
    case ReduceIsa::Generic:
      break;
  }
  return generic;
}

}  // namespace

ReduceKernel reduce_kernel(ReduceIsa isa) {
  return kernel_for<ReduceKernel>(isa, "reduction", reduce_into_generic, reduce_into_avx2,
                                  reduce_into_avx512);
}

ConvertKernel convert_half_kernel(ReduceIsa isa) {
  return kernel_for<ConvertKernel>(isa, "conversion", convert_half_generic, convert_half_avx2,
                                   convert_half_avx512);
}

ReduceHalvesKernel reduce_halves_kernel(ReduceIsa isa) {
  return kernel_for<ReduceHalvesKernel>(isa, "half-type reduction", reduce_halves_generic,
                                        reduce_halves_avx2, reduce_halves_avx512);
}

ReduceIsa active_reduce_isa() {
  static const ReduceIsa isa = resolve_isa();
  return isa;
}

}  // namespace chorus
