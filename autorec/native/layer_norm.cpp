// LayerNorm over short rows (D <= 64) on the CPU, forward and backward: see
// autorec/native/layer_norm.py.
//
// Why by hand: torch's CPU LayerNorm works row by row with per-row setup that dominates rows of
// 16 floats: 0.97 ms forward and 0.56 ms backward for Wukong's [4096, 16, 16] on an Intel Xeon
// (BENCHMARKS.md). Here a row is one to four vector registers.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <omp.h>
#include <vector>

#include "simd.h"

namespace {

constexpr int64_t kMaxD = 64;

// A row of D floats in DC registers, zero past D. Where D is a multiple of 16 (kFull) the row
// is DC plain vector loads; otherwise it goes through a zeroed buffer, a copy of runtime length.
template <int DC, bool kFull>
AUTOREC_INLINE void load_row(const float* p, int64_t D, v16* out) {
  if constexpr (kFull) {
    for (int c = 0; c < DC; ++c) std::memcpy(&out[c], p + c * 16, sizeof(v16));
  } else {
    float row[DC * 16] = {};
    std::memcpy(row, p, sizeof(float) * D);
    for (int c = 0; c < DC; ++c) std::memcpy(&out[c], row + c * 16, sizeof(v16));
  }
}

template <int DC, bool kFull>
AUTOREC_INLINE void store_row(float* p, int64_t D, const v16* in) {
  if constexpr (kFull) {
    for (int c = 0; c < DC; ++c) std::memcpy(p + c * 16, &in[c], sizeof(v16));
  } else {
    float row[DC * 16];
    for (int c = 0; c < DC; ++c) std::memcpy(row + c * 16, &in[c], sizeof(v16));
    std::memcpy(p, row, sizeof(float) * D);
  }
}

// The sum of a row's lanes (simd.h's hsum of the row's chunks added).
template <int DC>
AUTOREC_INLINE float total(const v16* v) {
  v16 s = v[0];
  for (int c = 1; c < DC; ++c) s += v[c];
  return hsum(s);
}

// y = (x - mean) * rstd * w + b per row; mean and rstd kept for the backward.
template <int DC, bool kFull>
AUTOREC_INLINE void forward_rows(const float* x, const float* w, const float* b, int64_t lo, int64_t hi,
                         int64_t D, float eps, float* y, float* mean, float* rstd) {
  v16 wv[DC], bv[DC], mask[DC];
  load_row<DC, false>(w, D, wv);
  load_row<DC, false>(b, D, bv);
  float ones[DC * 16] = {};
  std::fill(ones, ones + D, 1.0f);
  for (int c = 0; c < DC; ++c) std::memcpy(&mask[c], ones + c * 16, sizeof(v16));
  for (int64_t r = lo; r < hi; ++r) {
    v16 v[DC];
    load_row<DC, kFull>(x + r * D, D, v);
    const float m = total<DC>(v) / static_cast<float>(D);
    v16 centred[DC];
    for (int c = 0; c < DC; ++c) centred[c] = (v[c] - m) * mask[c];
    v16 sq[DC];
    for (int c = 0; c < DC; ++c) sq[c] = centred[c] * centred[c];
    const float s = 1.0f / std::sqrt(total<DC>(sq) / static_cast<float>(D) + eps);
    v16 out[DC];
    for (int c = 0; c < DC; ++c) out[c] = centred[c] * s * wv[c] + bv[c];
    store_row<DC, kFull>(y + r * D, D, out);
    mean[r] = m;
    rstd[r] = s;
  }
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * w, xhat = (x - mean) * rstd;
// dw += dy * xhat and db += dy into this thread's partial sums.
template <int DC, bool kFull>
AUTOREC_INLINE void backward_rows(const float* dy, const float* x, const float* mean, const float* rstd,
                          const float* w, int64_t lo, int64_t hi, int64_t D, float* dx, float* dw,
                          float* db) {
  v16 wv[DC], dwv[DC] = {}, dbv[DC] = {};
  load_row<DC, false>(w, D, wv);
  for (int64_t r = lo; r < hi; ++r) {
    v16 xv[DC], gv[DC], xhat[DC], g[DC], gx[DC];
    load_row<DC, kFull>(x + r * D, D, xv);
    load_row<DC, kFull>(dy + r * D, D, gv);
    const float m = mean[r], s = rstd[r];
    for (int c = 0; c < DC; ++c) {
      xhat[c] = (xv[c] - m) * s;  // past D: (0 - m) * s, but g is zero there
      g[c] = gv[c] * wv[c];
      gx[c] = g[c] * xhat[c];
      dwv[c] += gv[c] * xhat[c];
      dbv[c] += gv[c];
    }
    const float mg = total<DC>(g) / static_cast<float>(D), mgx = total<DC>(gx) / static_cast<float>(D);
    v16 out[DC];
    for (int c = 0; c < DC; ++c) out[c] = (g[c] - mg - xhat[c] * mgx) * s;
    store_row<DC, kFull>(dx + r * D, D, out);
  }
  float a[DC * 16], bsum[DC * 16];
  for (int c = 0; c < DC; ++c) {
    std::memcpy(a + c * 16, &dwv[c], sizeof(v16));
    std::memcpy(bsum + c * 16, &dbv[c], sizeof(v16));
  }
  for (int64_t d = 0; d < D; ++d) {
    dw[d] += a[d];
    db[d] += bsum[d];
  }
}

// Rows of D <= 64 floats (DC = ceil(D / 16) chunks), plain vector loads where D is a multiple
// of 16, for each target of simd.h.
#define FORWARD(DC)                                                       \
  (full ? forward_rows<DC, true>(x, w, b, lo, hi, D, eps, y, mean, rstd) \
        : forward_rows<DC, false>(x, w, b, lo, hi, D, eps, y, mean, rstd))
#define BACKWARD(DC)                                                             \
  (full ? backward_rows<DC, true>(dy, x, mean, rstd, w, lo, hi, D, dx, dw, db)  \
        : backward_rows<DC, false>(dy, x, mean, rstd, w, lo, hi, D, dx, dw, db))
#define LN_KERNELS(SUFFIX, TARGET)                                                                  \
  TARGET void forward_##SUFFIX(const float* x, const float* w, const float* b, int64_t lo, int64_t hi, \
                               int64_t D, float eps, float* y, float* mean, float* rstd) {        \
    const bool full = D % 16 == 0;                                                                \
    AUTOREC_BY_CHUNKS(D, FORWARD)                                                                 \
  }                                                                                               \
  TARGET void backward_##SUFFIX(const float* dy, const float* x, const float* mean, const float* rstd, \
                                const float* w, int64_t lo, int64_t hi, int64_t D, float* dx,     \
                                float* dw, float* db) {                                           \
    const bool full = D % 16 == 0;                                                                \
    AUTOREC_BY_CHUNKS(D, BACKWARD)                                                                \
  }
AUTOREC_FOR_EACH_TARGET(LN_KERNELS)

using Forward = void (*)(const float*, const float*, const float*, int64_t, int64_t, int64_t, float, float*,
                         float*, float*);
using Backward = void (*)(const float*, const float*, const float*, const float*, const float*, int64_t,
                          int64_t, int64_t, float*, float*, float*);

}  // namespace

extern "C" {

// x, y [R, D] contiguous; mean, rstd [R]. Returns 0, or -1 (nothing written) where D > 64.
int64_t autorec_layer_norm_forward(const float* x, const float* w, const float* b, int64_t R, int64_t D,
                                   float eps, float* y, float* mean, float* rstd, int threads) {
  if (D > kMaxD || D < 1) return -1;
  static const Forward run = AUTOREC_PICK(forward);
  const int parts = threads < 1 ? 1 : threads;
#pragma omp parallel num_threads(parts)
  {
    const int part = omp_get_thread_num(), team = omp_get_num_threads();
    run(x, w, b, R * part / team, R * (part + 1) / team, D, eps, y, mean, rstd);
  }
  return 0;
}

// dx [R, D]; dw, db [D] written (not accumulated). Returns 0, or -1 where D > 64.
int64_t autorec_layer_norm_backward(const float* dy, const float* x, const float* mean, const float* rstd,
                                    const float* w, int64_t R, int64_t D, float* dx, float* dw, float* db,
                                    int threads) {
  if (D > kMaxD || D < 1) return -1;
  static const Backward run = AUTOREC_PICK(backward);
  const int parts = threads < 1 ? 1 : threads;
  std::vector<float> partial(static_cast<size_t>(2 * parts * D), 0.0f);  // [part][dw | db]
#pragma omp parallel num_threads(parts)
  {
    const int part = omp_get_thread_num(), team = omp_get_num_threads();
    float* mine = partial.data() + 2 * part * D;
    run(dy, x, mean, rstd, w, R * part / team, R * (part + 1) / team, D, dx, mine, mine + D);
  }
  std::fill(dw, dw + D, 0.0f);
  std::fill(db, db + D, 0.0f);
  for (int p = 0; p < parts; ++p)
    for (int64_t d = 0; d < D; ++d) {
      dw[d] += partial[2 * p * D + d];
      db[d] += partial[2 * p * D + D + d];
    }
  return 0;
}

}  // extern "C"
