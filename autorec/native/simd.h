// What the kernels beside this file share: 16-float vectors, the dispatch of a template over a
// row's count of 16-float chunks, and each kernel stamped out for three targets (AVX-512, AVX2
// with FMA, plain x86-64) with the CPU's best picked at run time (__builtin_cpu_supports).
//
// Why not GCC's target_clones: its "arch=" clones match CPU models, and on the Intel Xeon this
// project measures on it fell back to the plain build (BENCHMARKS.md).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#define AUTOREC_INLINE inline __attribute__((always_inline))

// 16 floats in one value: one AVX-512 register, two AVX2 or four SSE ones, per the target.
typedef float v16 __attribute__((vector_size(64)));

AUTOREC_INLINE v16 load16(const float* p) {
  v16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

AUTOREC_INLINE void store16(float* p, v16 v) { std::memcpy(p, &v, sizeof v); }

typedef float v8 __attribute__((vector_size(32)));
typedef float v4 __attribute__((vector_size(16)));

// The sum of v's 16 lanes, halving the vector at each step (a chain of 16 scalar adds would hold
// the loop that waits on it).
AUTOREC_INLINE float hsum(v16 s) {
  const v8 h = __builtin_shufflevector(s, s, 0, 1, 2, 3, 4, 5, 6, 7) +
               __builtin_shufflevector(s, s, 8, 9, 10, 11, 12, 13, 14, 15);
  const v4 q = __builtin_shufflevector(h, h, 0, 1, 2, 3) + __builtin_shufflevector(h, h, 4, 5, 6, 7);
  return (q[0] + q[2]) + (q[1] + q[3]);
}

// The statement CALL(C) with C = ceil(n / 16), a compile-time 1 to 4, for n <= 64 at run time.
#define AUTOREC_BY_CHUNKS(n, CALL) \
  switch (((n) + 15) / 16) {       \
    case 1: CALL(1); break;        \
    case 2: CALL(2); break;        \
    case 3: CALL(3); break;        \
    default: CALL(4); break;       \
  }

// KERNELS(suffix, target attribute) for each target: functions name_avx512, name_avx2 and
// name_plain, of which AUTOREC_PICK(name) is the one this CPU runs.
#define AUTOREC_FOR_EACH_TARGET(KERNELS)                                              \
  KERNELS(avx512, __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,avx2,fma")))) \
  KERNELS(avx2, __attribute__((target("avx2,fma"))))                                  \
  KERNELS(plain, )

// bf16 <-> fp32 over a row, 16 values at a time. To bf16: rounded to nearest, ties to even, a
// NaN made the quiet NaN 0x7FC0, as torch's c10::BFloat16 rounds; from bf16: exact (the bits
// moved up). For kernels that take or give autocast's bf16 where torch would cast around them.
typedef uint32_t v16u __attribute__((vector_size(64)));
typedef uint16_t v16h __attribute__((vector_size(32)));

AUTOREC_INLINE uint16_t bf16_of(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FC0;
  return static_cast<uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}

AUTOREC_INLINE float float_of(uint16_t value) {
  const uint32_t bits = static_cast<uint32_t>(value) << 16;
  float out;
  std::memcpy(&out, &bits, 4);
  return out;
}

// 16 values: fp32 rounded to bf16 as bf16_of rounds, and bf16 widened to fp32 exactly.
AUTOREC_INLINE v16h round_bf16(v16 v) {
  v16u bits;
  std::memcpy(&bits, &v, sizeof bits);
  const v16u nan = (v16u)((bits & 0x7FFFFFFFu) > 0x7F800000u);
  const v16u rounded = (bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16;
  return __builtin_convertvector((nan & 0x7FC0u) | (~nan & rounded), v16h);
}

AUTOREC_INLINE v16 widen_bf16(v16h half) {
  const v16u bits = __builtin_convertvector(half, v16u) << 16;
  v16 v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

#define AUTOREC_BF16_ROWS(SUFFIX, TARGET)                                                  \
  TARGET inline void bf16_from_floats_##SUFFIX(const float* src, int64_t n, uint16_t* dst) { \
    int64_t i = 0;                                                                         \
    for (; i + 16 <= n; i += 16) {                                                         \
      const v16h out = round_bf16(load16(src + i));                                        \
      std::memcpy(dst + i, &out, sizeof out);                                              \
    }                                                                                      \
    for (; i < n; ++i) dst[i] = bf16_of(src[i]);                                           \
  }                                                                                        \
  TARGET inline void floats_from_bf16_##SUFFIX(const uint16_t* src, int64_t n, float* dst) { \
    int64_t i = 0;                                                                         \
    for (; i + 16 <= n; i += 16) {                                                         \
      v16h half;                                                                           \
      std::memcpy(&half, src + i, sizeof half);                                            \
      store16(dst + i, widen_bf16(half));                                                  \
    }                                                                                      \
    for (; i < n; ++i) dst[i] = float_of(src[i]);                                          \
  }
AUTOREC_FOR_EACH_TARGET(AUTOREC_BF16_ROWS)

namespace autorec_simd {

// 2 where the CPU has AVX-512 (F, VL, DQ, BW), 1 where AVX2 with FMA, else 0; capped by
// $AUTOREC_NATIVE_ISA (avx2 or plain: the tests run the other targets' builds on one machine).
inline int cpu_level() {
  __builtin_cpu_init();
  int level = 0;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw"))
    level = 2;
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    level = 1;
  const char* cap = std::getenv("AUTOREC_NATIVE_ISA");
  if (cap != nullptr && std::strcmp(cap, "avx2") == 0) return std::min(level, 1);
  if (cap != nullptr && std::strcmp(cap, "plain") == 0) return 0;
  return level;
}

}  // namespace autorec_simd

#define AUTOREC_PICK(name)                                     \
  (autorec_simd::cpu_level() == 2   ? name##_avx512            \
   : autorec_simd::cpu_level() == 1 ? name##_avx2              \
                                    : name##_plain)
