// The per-sample steps of Wukong's layer that wukong_layer.cpp (one layer's head and tail) and
// wukong_mid.cpp (one layer's tail with the next one's head) run over a batch: see
// autorec/native/wukong_layer.py.
//
// Why by hand: per sample a Wukong layer is a handful of tiny products ([F, D] x [F, C] maps
// over the feature axis, [F, D] x [D, k] for the FM) around a LayerNorm of F * k values, and
// after the MLP a concatenation, a residual and a LayerNorm over D. torch runs each as its own
// pass over the batch (transposes, casts, cat, add, split and their backward): about 29 ms of
// a 43 ms Wukong step under bf16 autocast (BENCHMARKS.md, step_profile's pieces). Here each
// sample's vectors stay in L1 between the steps, and only the MLP's products go through torch.
//
// Layout (all row-major, fp32 unless said): x [B, F, D] with D a multiple of 16 up to 64 (DC =
// D / 16 vectors a row); wcat [F, C] = [Y | W_L^T | W_R^T], C = k + n_lcb + (proj ? f_out : 0),
// f_out = n_fm + n_lcb (without proj the residual is x itself and f_out = F);
// fm [B, F * k] the FM block's normalised interactions (fp32 or bf16), the MLP's input;
// base [B, f_out, D] = [0; LCB(x)] + residual(x); m [B, n_fm * D] the MLP's output (fp32 or bf16);
// y [B, f_out, D] = LN_D(base + [m; 0]).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <vector>

#include "rows.h"
#include "simd.h"

namespace {

constexpr int64_t kMaxD = 64;

struct Shape {
  int64_t F, D, C, k, n_fm, n_lcb, f_out;
  int proj;
};

template <int DC>
AUTOREC_INLINE void load_row(const float* p, v16* v) {
  for (int q = 0; q < DC; ++q) v[q] = load16(p + q * 16);
}

template <int DC>
AUTOREC_INLINE void store_row(float* p, const v16* v) {
  for (int q = 0; q < DC; ++q) store16(p + q * 16, v[q]);
}

template <int DC>
AUTOREC_INLINE float total(const v16* v) {
  v16 s = v[0];
  for (int q = 1; q < DC; ++q) s += v[q];
  return hsum(s);
}

// The sum of p[0, n) and of (p[i] - m)^2, 16 lanes at a time (a scalar chain would wait on
// each add).
AUTOREC_INLINE float sum_of(const float* p, int64_t n) {
  v16 acc = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) acc += load16(p + i);
  float s = hsum(acc);
  for (; i < n; ++i) s += p[i];
  return s;
}

AUTOREC_INLINE float squares_about(const float* p, int64_t n, float m) {
  v16 acc = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const v16 c = load16(p + i) - m;
    acc += c * c;
  }
  float s = hsum(acc);
  for (; i < n; ++i) s += (p[i] - m) * (p[i] - m);
  return s;
}

AUTOREC_INLINE float dot_of(const float* a, const float* b, int64_t n) {
  v16 acc = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) acc += load16(a + i) * load16(b + i);
  float s = hsum(acc);
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

// How many rows a loop of vector FMAs updates at once: eight chains of DC vectors' FMAs in
// flight hide each FMA's latency (a single accumulator waits four cycles on every add).
template <int DC>
constexpr int kChains = DC == 1 ? 8 : DC == 2 ? 4 : 2;

using InRows = Rows<const float>;
using OutRows = Rows<float>;

// out[r, :] = sum_i a[i * a_stride + r * a_step] * rows[i, :] (+ add[r, :]) for r in [r0, r0 + R),
// i in [0, m): R weighted sums of the m rows of `rows` at once, so that each row loaded serves
// all R. R is a constant, so the accumulators stay in registers. `add` may be null (its a).
template <int DC, int R>
AUTOREC_INLINE void weighted_block(const float* a, int64_t a_stride, int64_t a_step, const InRows& rows, int64_t m,
                                   int64_t r0, int64_t D, const InRows& add, const OutRows& out) {
  v16 acc[R][DC] = {};
  if (add.a != nullptr)
    for (int r = 0; r < R; ++r) load_row<DC>(add.at(r0 + r, D), acc[r]);
  for (int64_t i = 0; i < m; ++i) {
    v16 v[DC];
    load_row<DC>(rows.at(i, D), v);
    const float* w = a + i * a_stride + r0 * a_step;
    for (int r = 0; r < R; ++r)
      for (int q = 0; q < DC; ++q) acc[r][q] += w[r * a_step] * v[q];
  }
  for (int r = 0; r < R; ++r) store_row<DC>(out.at(r0 + r, D), acc[r]);
}

// weighted_block over r in [0, n): kChains<DC> rows at a time, the rest one by one.
template <int DC>
AUTOREC_INLINE void weighted_rows(const float* a, int64_t a_stride, int64_t a_step, const InRows& rows, int64_t m,
                                  int64_t n, int64_t D, const InRows& add, const OutRows& out) {
  constexpr int R = kChains<DC>;
  int64_t r0 = 0;
  for (; r0 + R <= n; r0 += R) weighted_block<DC, R>(a, a_stride, a_step, rows, m, r0, D, add, out);
  for (; r0 < n; ++r0) weighted_block<DC, 1>(a, a_stride, a_step, rows, m, r0, D, add, out);
}

constexpr InRows kNoRows{nullptr, 0, nullptr};

// pt[c, :] = sum_f wcat[f, c] x[f, :] for c in [0, c1): the maps over the feature axis.
template <int DC>
AUTOREC_INLINE void maps(const InRows& x, const float* wcat, const Shape& s, int64_t c1, float* pt) {
  weighted_rows<DC>(wcat, s.C, 1, x, s.F, c1, s.D, kNoRows, rows_at(pt));
}

// The sums of a, b, c and d's 16 lanes, as [sum a, sum b, sum c, sum d]: halving pairs of
// vectors at each step, 5 adds for four sums where simd.h's hsum takes 4 for one.
AUTOREC_INLINE v4 hsum4(v16 a, v16 b, v16 c, v16 d) {
  const v16 ab = __builtin_shufflevector(a, b, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23) +
                 __builtin_shufflevector(a, b, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
  const v16 cd = __builtin_shufflevector(c, d, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23) +
                 __builtin_shufflevector(c, d, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
  const v16 u = __builtin_shufflevector(ab, cd, 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27) +
                __builtin_shufflevector(ab, cd, 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31);
  const v8 h = __builtin_shufflevector(u, u, 0, 1, 4, 5, 8, 9, 12, 13) +
               __builtin_shufflevector(u, u, 2, 3, 6, 7, 10, 11, 14, 15);
  return __builtin_shufflevector(h, h, 0, 2, 4, 6) + __builtin_shufflevector(h, h, 1, 3, 5, 7);
}

// z[f * k + j] = <x[f, :], pt[j, :]>: X (X^T Y), flattened as the FM block flattens it; the
// dots four at a time (hsum4).
template <int DC>
AUTOREC_INLINE void fm_products(const InRows& x, const float* pt, const Shape& s, float* z) {
  for (int64_t f = 0; f < s.F; ++f) {
    v16 xv[DC];
    load_row<DC>(x.at(f, s.D), xv);
    float* zf = z + f * s.k;
    int64_t j = 0;
    for (; j + 4 <= s.k; j += 4) {
      v16 p[4];
      for (int r = 0; r < 4; ++r) {
        p[r] = xv[0] * load16(pt + (j + r) * s.D);
        for (int q = 1; q < DC; ++q) p[r] += xv[q] * load16(pt + (j + r) * s.D + q * 16);
      }
      const v4 sums = hsum4(p[0], p[1], p[2], p[3]);
      std::memcpy(zf + j, &sums, sizeof sums);
    }
    for (; j < s.k; ++j) {
      v16 p = xv[0] * load16(pt + j * s.D);
      for (int q = 1; q < DC; ++q) p += xv[q] * load16(pt + j * s.D + q * 16);
      zf[j] = hsum(p);
    }
  }
}

// One sample's FM interactions normalised (fm, fp32), its base rows and the norm's mean and rstd.
template <int DC>
AUTOREC_INLINE void head_forward(const InRows& x, const float* wcat, const float* gamma, const float* beta,
                                 float eps, const Shape& s, float* pt, float* z, float* fm, float* base,
                                 float* stats) {
  maps<DC>(x, wcat, s, s.C, pt);
  fm_products<DC>(x, pt, s, z);
  const int64_t n = s.F * s.k;
  const float mean = sum_of(z, n) / static_cast<float>(n);
  const float rstd = 1.0f / std::sqrt(squares_about(z, n, mean) / static_cast<float>(n) + eps);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) store16(fm + i, (load16(z + i) - mean) * rstd * load16(gamma + i) + load16(beta + i));
  for (; i < n; ++i) fm[i] = (z[i] - mean) * rstd * gamma[i] + beta[i];
  stats[0] = mean;
  stats[1] = rstd;
  for (i = 0; i < s.f_out; ++i) {
    v16 row[DC] = {}, add[DC];
    if (i >= s.n_fm) load_row<DC>(pt + (s.k + i - s.n_fm) * s.D, row);
    load_row<DC>(s.proj ? pt + (s.k + s.n_lcb + i) * s.D : x.at(i, s.D), add);
    for (int q = 0; q < DC; ++q) row[q] += add[q];
    store_row<DC>(base + i * s.D, row);
  }
}

// One sample's dx and the maps' output gradient dpt [C, D], given the gradients of its fm (dfm,
// fp32) and base rows; the norm's gradients added into this thread's sums.
template <int DC>
AUTOREC_INLINE void head_backward(const InRows& x, const float* wcat, const float* gamma, const float* stats,
                                  const float* dfm, const float* dbase, const Shape& s, float* pt, float* z,
                                  float* dz, float* dpt, const OutRows& dx, float* dgamma, float* dbeta) {
  maps<DC>(x, wcat, s, s.k, pt);  // only Y's columns: the FM's products are recomputed
  fm_products<DC>(x, pt, s, z);
  const int64_t n = s.F * s.k;
  const float mean = stats[0], rstd = stats[1];
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {  // (the compiler would not vectorise four stores that may alias)
    const v16 g = load16(dfm + i), xhat = (load16(z + i) - mean) * rstd;
    store16(dgamma + i, load16(dgamma + i) + g * xhat);
    store16(dbeta + i, load16(dbeta + i) + g);
    store16(z + i, xhat);
    store16(dz + i, g * load16(gamma + i));
  }
  for (; i < n; ++i) {
    const float xhat = (z[i] - mean) * rstd;
    dgamma[i] += dfm[i] * xhat;
    dbeta[i] += dfm[i];
    z[i] = xhat;
    dz[i] = dfm[i] * gamma[i];
  }
  const float mg = sum_of(dz, n) / static_cast<float>(n), mgx = dot_of(dz, z, n) / static_cast<float>(n);
  for (i = 0; i + 16 <= n; i += 16) store16(dz + i, (load16(dz + i) - mg - load16(z + i) * mgx) * rstd);
  for (; i < n; ++i) dz[i] = (dz[i] - mg - z[i] * mgx) * rstd;
  weighted_rows<DC>(dz, s.k, 1, x, s.F, s.k, s.D, kNoRows, rows_at(dpt));  // d(X^T Y)[:, j] = sum_f dz[f, j] x[f, :]
  std::memcpy(dpt + s.k * s.D, dbase + s.n_fm * s.D, sizeof(float) * s.n_lcb * s.D);
  if (s.proj) std::memcpy(dpt + (s.k + s.n_lcb) * s.D, dbase, sizeof(float) * s.f_out * s.D);
  // dx[f, :] = sum_j dz[f, j] pt[j, :] + sum_c wcat[f, c] dpt[c, :] (+ dbase[f, :], the identity residual)
  weighted_rows<DC>(dz, 1, s.k, rows_at<const float>(pt), s.k, s.F, s.D,
                    s.proj ? kNoRows : rows_at(dbase), dx);
  const InRows dx_in{dx.a, dx.n0, dx.b};
  weighted_rows<DC>(wcat, 1, s.C, rows_at<const float>(dpt), s.C, s.F, s.D, dx_in, dx);
}

// dw[f, c, :] += x_b[f, :] * dpt_b[c, :] over the `count` samples b of a block (xs[b] their
// rows, dpt their [C, D] gradients one after another): the maps' weight gradient, summed over D
// at the end. R samples' rows of x are held in registers, so that each pass over dw (F * C * D
// floats, past L1 at the preset's sizes) serves R samples.
template <int DC, int S, int CB>
AUTOREC_INLINE void weight_block(const InRows* xs, const float* dpt, int64_t b0, int64_t f, int64_t c0,
                                 const Shape& s, float* dw) {
  v16 acc[CB][DC];
  float* dwf = dw + (f * s.C + c0) * s.D;
  for (int c = 0; c < CB; ++c) load_row<DC>(dwf + c * s.D, acc[c]);
  for (int r = 0; r < S; ++r) {
    v16 xv[DC];
    load_row<DC>(xs[b0 + r].at(f, s.D), xv);
    const float* d = dpt + ((b0 + r) * s.C + c0) * s.D;
    for (int c = 0; c < CB; ++c)
      for (int q = 0; q < DC; ++q) acc[c][q] += xv[q] * load16(d + c * s.D + q * 16);
  }
  for (int c = 0; c < CB; ++c) store_row<DC>(dwf + c * s.D, acc[c]);
}

template <int DC, int S>
AUTOREC_INLINE void weight_samples(const InRows* xs, const float* dpt, int64_t b0, const Shape& s, float* dw) {
  constexpr int CB = kChains<DC>;  // columns updated at once: independent chains of FMAs
  for (int64_t f = 0; f < s.F; ++f) {
    int64_t c0 = 0;
    for (; c0 + CB <= s.C; c0 += CB) weight_block<DC, S, CB>(xs, dpt, b0, f, c0, s, dw);
    for (; c0 < s.C; ++c0) weight_block<DC, S, 1>(xs, dpt, b0, f, c0, s, dw);
  }
}

template <int DC>
AUTOREC_INLINE void weight_grads(const InRows* xs, const float* dpt, int count, const Shape& s, float* dw) {
  if (count == 8)
    weight_samples<DC, 8>(xs, dpt, 0, s, dw);
  else
    for (int b = 0; b < count; ++b) weight_samples<DC, 1>(xs, dpt, b, s, dw);
}

// One sample's y = LN_D(base + [m; 0]) (m fp32 here), each row's mean and rstd kept.
template <int DC>
AUTOREC_INLINE void tail_forward(const float* base, const float* m, const float* gamma, const float* beta,
                                 float eps, const Shape& s, float* y, float* stats) {
  v16 g[DC], b[DC];
  load_row<DC>(gamma, g);
  load_row<DC>(beta, b);
  const float inv = 1.0f / static_cast<float>(s.D);
  for (int64_t i = 0; i < s.f_out; ++i) {
    v16 v[DC];
    load_row<DC>(base + i * s.D, v);
    if (i < s.n_fm)
      for (int q = 0; q < DC; ++q) v[q] += load16(m + i * s.D + q * 16);
    const float mean = total<DC>(v) * inv;
    v16 sq[DC];
    for (int q = 0; q < DC; ++q) {
      v[q] -= mean;
      sq[q] = v[q] * v[q];
    }
    const float rstd = 1.0f / std::sqrt(total<DC>(sq) * inv + eps);
    for (int q = 0; q < DC; ++q) v[q] = v[q] * rstd * g[q] + b[q];
    store_row<DC>(y + i * s.D, v);
    stats[2 * i] = mean;
    stats[2 * i + 1] = rstd;
  }
}

// One sample's d(base + [m; 0]) (dbase; its first n_fm rows are also dm's), the norm's gradients
// added into this thread's sums.
template <int DC>
AUTOREC_INLINE void tail_backward(const float* dy, const float* base, const float* m, const float* gamma,
                                  const float* stats, const Shape& s, float* dbase, float* dgamma, float* dbeta) {
  v16 g[DC], dg[DC], db[DC];
  load_row<DC>(gamma, g);
  load_row<DC>(dgamma, dg);
  load_row<DC>(dbeta, db);
  const float inv = 1.0f / static_cast<float>(s.D);
  for (int64_t i = 0; i < s.f_out; ++i) {
    v16 v[DC], d[DC], gv[DC], gx[DC];
    load_row<DC>(base + i * s.D, v);
    if (i < s.n_fm)
      for (int q = 0; q < DC; ++q) v[q] += load16(m + i * s.D + q * 16);
    load_row<DC>(dy + i * s.D, d);
    const float mean = stats[2 * i], rstd = stats[2 * i + 1];
    for (int q = 0; q < DC; ++q) {
      v[q] = (v[q] - mean) * rstd;  // xhat
      dg[q] += d[q] * v[q];
      db[q] += d[q];
      gv[q] = d[q] * g[q];
      gx[q] = gv[q] * v[q];
    }
    const float mg = total<DC>(gv) * inv, mgx = total<DC>(gx) * inv;
    for (int q = 0; q < DC; ++q) gv[q] = (gv[q] - mg - v[q] * mgx) * rstd;
    store_row<DC>(dbase + i * s.D, gv);
  }
  store_row<DC>(dgamma, dg);
  store_row<DC>(dbeta, db);
}

#define HEAD_FORWARD(DC) head_forward<DC>(x, wcat, gamma, beta, eps, s, pt, z, fm, base, stats)
#define HEAD_BACKWARD(DC) head_backward<DC>(x, wcat, gamma, stats, dfm, dbase, s, pt, z, dz, dpt, dx, dgamma, dbeta)
#define WEIGHT_GRADS(DC) weight_grads<DC>(xs, dpt, count, s, dw)
#define TAIL_FORWARD(DC) tail_forward<DC>(base, m, gamma, beta, eps, s, y, stats)
#define TAIL_BACKWARD(DC) tail_backward<DC>(dy, base, m, gamma, stats, s, dbase, dgamma, dbeta)
#define SAMPLE_KERNELS(SUFFIX, TARGET)                                                                      \
  TARGET void head_forward_##SUFFIX(const InRows& x, const float* wcat, const float* gamma, const float* beta, \
                                    float eps, const Shape& s, float* pt, float* z, float* fm, float* base,  \
                                    float* stats) {                                                          \
    AUTOREC_BY_CHUNKS(s.D, HEAD_FORWARD)                                                                     \
  }                                                                                                          \
  TARGET void head_backward_##SUFFIX(const InRows& x, const float* wcat, const float* gamma, const float* stats, \
                                     const float* dfm, const float* dbase, const Shape& s, float* pt, float* z, \
                                     float* dz, float* dpt, const OutRows& dx, float* dgamma, float* dbeta) { \
    AUTOREC_BY_CHUNKS(s.D, HEAD_BACKWARD)                                                                    \
  }                                                                                                          \
  TARGET void weight_grads_##SUFFIX(const InRows* xs, const float* dpt, int count, const Shape& s, float* dw) { \
    AUTOREC_BY_CHUNKS(s.D, WEIGHT_GRADS)                                                                     \
  }                                                                                                          \
  TARGET void tail_forward_##SUFFIX(const float* base, const float* m, const float* gamma, const float* beta, \
                                    float eps, const Shape& s, float* y, float* stats) {                     \
    AUTOREC_BY_CHUNKS(s.D, TAIL_FORWARD)                                                                     \
  }                                                                                                          \
  TARGET void tail_backward_##SUFFIX(const float* dy, const float* base, const float* m, const float* gamma,  \
                                     const float* stats, const Shape& s, float* dbase, float* dgamma,        \
                                     float* dbeta) {                                                         \
    AUTOREC_BY_CHUNKS(s.D, TAIL_BACKWARD)                                                                    \
  }
AUTOREC_FOR_EACH_TARGET(SAMPLE_KERNELS)

using HeadForward = void (*)(const InRows&, const float*, const float*, const float*, float, const Shape&, float*,
                             float*, float*, float*, float*);
using HeadBackward = void (*)(const InRows&, const float*, const float*, const float*, const float*, const float*,
                              const Shape&, float*, float*, float*, float*, const OutRows&, float*, float*);
using WeightGrads = void (*)(const InRows*, const float*, int, const Shape&, float*);
using TailForward = void (*)(const float*, const float*, const float*, const float*, float, const Shape&, float*,
                             float*);
using TailBackward = void (*)(const float*, const float*, const float*, const float*, const float*, const Shape&,
                              float*, float*, float*);

// 0 where the shape holds together, else -1 (D not a multiple of 16 up to 64) or -3.
int64_t check(const Shape& s) {
  if (s.D < 16 || s.D > kMaxD || s.D % 16 != 0) return -1;
  if (s.F < 1 || s.k < 1 || s.n_fm < 1 || s.n_lcb < 0 || s.f_out != s.n_fm + s.n_lcb) return -3;
  if (s.C != s.k + s.n_lcb + (s.proj ? s.f_out : 0) || (!s.proj && s.f_out != s.F)) return -3;
  return 0;
}

// 0 for the tail's sizes (check's rules for D, n_fm and f_out), else -1 or -3.
int64_t check_tail(int64_t D, int64_t n_fm, int64_t f_out) {
  if (D < 16 || D > kMaxD || D % 16 != 0) return -1;
  return n_fm < 1 || f_out < n_fm ? -3 : 0;
}

int team(int threads) { return threads < 1 ? 1 : threads; }

// out[i] = the sum of the D lanes of dw's row i, for rows [0, rows): a part's weight gradient
// (summed over D at the end, see weight_grads) into its share of the parts' sums.
void lane_sums(const float* dw, int64_t rows, int64_t D, float* out) {
  for (int64_t i = 0; i < rows; ++i) {
    v16 t = load16(dw + i * D);
    for (int64_t q = 16; q < D; q += 16) t += load16(dw + i * D + q);
    out[i] = hsum(t);
  }
}

// A backward's outputs, each `size` floats, summed over the batch's parts.
struct Sum {
  float* out;
  int64_t size;
};

// Every output of `outs` (overwritten) = its segment of each part's sums, added in the parts'
// order, so a run repeats bit for bit at the same thread count; a part's sums are its outputs'
// segments one after another (an empty part, one no thread took, is skipped).
void add_parts(const std::vector<std::vector<float>>& parts, std::initializer_list<Sum> outs) {
  for (const Sum& o : outs) std::fill(o.out, o.out + o.size, 0.0f);
  for (const std::vector<float>& part : parts) {
    if (part.empty()) continue;
    const float* p = part.data();
    for (const Sum& o : outs) {
      for (int64_t i = 0; i < o.size; ++i) o.out[i] += p[i];
      p += o.size;
    }
  }
}

}  // namespace
