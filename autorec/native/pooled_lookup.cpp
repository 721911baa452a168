// The CPU tables' pooled lookup (each bag's rows summed, or averaged) in one pass: see
// autorec/train/native_lookup.py.
//
// Why by hand: fbgemm's CPU forward (split_embedding_codegen_forward_cpu) was 2.3 ms of a 28.8
// ms DLRM step at the scale workload's shapes (26 features, batch 4096, one row of 16 floats a
// bag: 6.8 MB of rows; `python -m benchmarks.step_profile`'s top operators). The rows are spread
// over 356 MB of tables, so each is a cache miss: here the samples are split over torch's OpenMP
// team, and the first row of a bag a few samples ahead is prefetched while this one is summed.
// No library offers that lookup for fbgemm's layout other than fbgemm's own.
//
// Layout (fbgemm's, "aligned" case, as autorec/native/rowwise_adagrad.cpp): every feature D wide,
// bag t * B + b = indices[offsets[tB + b] : offsets[tB + b + 1]], its rows feature_base[t] + index
// of weights viewed as rows of D; out [B, T * D] sample-major, feature t at columns t * D.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "simd.h"

namespace {

constexpr int64_t kBlock = 64;  // samples whose bags are summed feature by feature
constexpr int64_t kAhead = 8;   // how many samples ahead a bag's first row is prefetched

struct Args {
  const int64_t* indices;
  const int64_t* offsets;
  int64_t T, B;
  const int64_t* feature_base;
  const int64_t* feature_rows;
  const float* weights;
  int64_t D;
  int mean;
  float* out;
};

// Bag (t, b) into out: the sum of its rows (times 1 / its length where mean), zeros where empty;
// returns the first position of an index outside [0, its table's rows), or -1. DC = D / 16 (D a
// multiple of 16, at most 64) keeps the sum in registers; DC = 0 is any D, in a loop over it.
template <int DC>
AUTOREC_INLINE int64_t pool_bag(const Args& a, int64_t t, int64_t b) {
  const int64_t bag = t * a.B + b, k0 = a.offsets[bag], k1 = a.offsets[bag + 1];
  const int64_t base = a.feature_base[t], rows = a.feature_rows[t];
  float* dst = a.out + b * a.T * a.D + t * a.D;
  const float scale = a.mean && k1 > k0 ? 1.0f / static_cast<float>(k1 - k0) : 1.0f;
  if constexpr (DC > 0) {
    v16 acc[DC] = {};
    for (int64_t k = k0; k < k1; ++k) {
      const int64_t index = a.indices[k];
      if (index < 0 || index >= rows) return k;
      const int64_t row = base + index;
      for (int c = 0; c < DC; ++c) acc[c] += load16(a.weights + row * a.D + c * 16);
    }
    for (int c = 0; c < DC; ++c) store16(dst + c * 16, a.mean ? acc[c] * scale : acc[c]);
  } else {
    std::fill(dst, dst + a.D, 0.0f);
    for (int64_t k = k0; k < k1; ++k) {
      const int64_t index = a.indices[k];
      if (index < 0 || index >= rows) return k;
      const float* src = a.weights + (base + index) * a.D;
      for (int64_t d = 0; d < a.D; ++d) dst[d] += src[d];
    }
    if (a.mean)
      for (int64_t d = 0; d < a.D; ++d) dst[d] *= scale;
  }
  return -1;
}

// The first row of bag (t, b), if any and in range, towards the cache.
AUTOREC_INLINE void prefetch_bag(const Args& a, int64_t t, int64_t b) {
  const int64_t bag = t * a.B + b;
  if (a.offsets[bag] == a.offsets[bag + 1]) return;
  const int64_t index = a.indices[a.offsets[bag]];
  if (index < 0 || index >= a.feature_rows[t]) return;
  const char* p = reinterpret_cast<const char*>(a.weights + (a.feature_base[t] + index) * a.D);
  for (int64_t byte = 0; byte < a.D * 4; byte += 64) __builtin_prefetch(p + byte);
}

// Samples [lo, hi) in blocks of kBlock, feature by feature within a block (each feature's
// offsets and indices read in order); returns the first bad position, or -1.
template <int DC>
AUTOREC_INLINE int64_t pool_samples(const Args& a, int64_t lo, int64_t hi) {
  for (int64_t b0 = lo; b0 < hi; b0 += kBlock) {
    const int64_t b1 = std::min(hi, b0 + kBlock);
    for (int64_t t = 0; t < a.T; ++t)
      for (int64_t b = b0; b < b1; ++b) {
        if (b + kAhead < b1) prefetch_bag(a, t, b + kAhead);
        const int64_t bad = pool_bag<DC>(a, t, b);
        if (bad >= 0) return bad;
      }
  }
  return -1;
}

#define POOL(DC) return pool_samples<DC>(a, lo, hi)
#define POOL_KERNELS(SUFFIX, TARGET)                                                         \
  TARGET int64_t pool_##SUFFIX(const Args& a, int64_t lo, int64_t hi) {                      \
    if (a.D % 16 != 0 || a.D > 64) return pool_samples<0>(a, lo, hi);                         \
    AUTOREC_BY_CHUNKS(a.D, POOL)                                                             \
  }
AUTOREC_FOR_EACH_TARGET(POOL_KERNELS)

using Pool = int64_t (*)(const Args&, int64_t, int64_t);

}  // namespace

extern "C" {

// out [B, T * D] written. Returns 0, or 1 + the first position whose index falls outside
// [0, feature_rows[t]) (then out is partly written and the caller raises).
int64_t autorec_pooled_lookup(const int64_t* indices, const int64_t* offsets, int64_t T, int64_t B,
                              const int64_t* feature_base, const int64_t* feature_rows, const float* weights,
                              int64_t D, int mean, float* out, int threads) {
  static const Pool pool = AUTOREC_PICK(pool);
  const Args a{indices, offsets, T, B, feature_base, feature_rows, weights, D, mean, out};
  const int parts = threads < 1 ? 1 : threads;
  int64_t bad = INT64_MAX;
#pragma omp parallel for num_threads(parts) schedule(static, 1) reduction(min : bad)
  for (int p = 0; p < parts; ++p) {
    const int64_t got = pool(a, B * p / parts, B * (p + 1) / parts);
    if (got >= 0) bad = std::min(bad, got);
  }
  return bad == INT64_MAX ? 0 : bad + 1;
}

}  // extern "C"
