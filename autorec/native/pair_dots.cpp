// DLRM's pairwise dots on the CPU, forward and backward, one sample at a time in cache: see
// autorec/native/pair_dots.py.
//
// Why by hand: per sample the dots are a 27 x 16 x 27 product. torch runs them as batched
// matrix products around a gather of the pairs and, in the backward, a zero-filled fold with two
// scatters: 5.7 ms of a 27 ms DLRM step on an Intel Xeon, for 0.3 GFLOP (BENCHMARKS.md). Here
// each sample's vectors, products and fold stay in L1 and registers.
//
// Layout: x [B, F, D] contiguous; the output row is [x[:, :n] flattened, the P dots, pad zeros];
// pair p is (first[p], second[p]). The loops are compiled for AVX-512, AVX2 and plain x86-64 at
// once and the CPU's best is picked on the first call.
//
// Two ways through a batch. Pairs in torchrec's triu order with D a multiple of 16 (DLRM's case)
// go 16 samples at a time, each vector lane a sample ("across samples", below): every dot is 16
// FMAs of whole vectors, with no horizontal sums and no pair left idle, and the samples' rows go
// in and out by 16 x 16 transposes in registers. Other pairs or widths go one sample at a time,
// its Gram rows and fold in L1 (the kernels after those).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "rows.h"
#include "simd.h"

namespace {

constexpr int64_t kMaxF = 64, kMaxD = 64;  // the largest F (forward) and D (backward) handled

// gram [F, NC * 16]: row i holds <x_i, x_j> for j >= i (the upper triangle, all a pair needs:
// <x_i, x_j> = <x_j, x_i>), via x^T padded to NC * 16 columns (xt [D, NC * 16]): gram[i, :] =
// sum_d x[i, d] * xt[d, :]. Rows go R at a time, so that each xt load serves R rows, their
// accumulators held in vector registers; a row needs only the chunks from its own column on.
template <int NC>
AUTOREC_INLINE void gram_rows(const float* x, int64_t F, int64_t D, float* xt, float* gram) {
  constexpr int64_t W = NC * 16;
  constexpr int R = 4;
  for (int64_t i = 0; i < F; ++i)
    for (int64_t d = 0; d < D; ++d) xt[d * W + i] = x[i * D + d];
  for (int64_t i0 = 0; i0 < F; i0 += R) {
    const int rows = static_cast<int>(std::min<int64_t>(R, F - i0));
    const int start = static_cast<int>(i0 / 16);  // the chunk of the first row's own column
    v16 acc[R][NC] = {};
    for (int64_t d = 0; d < D; ++d) {
      v16 col[NC] = {};
      for (int c = 0; c < NC; ++c)
        if (c >= start) col[c] = load16(xt + d * W + c * 16);
      for (int r = 0; r < R; ++r) {
        const float v = r < rows ? x[(i0 + r) * D + d] : 0.0f;
        for (int c = 0; c < NC; ++c)
          if (c >= start) acc[r][c] += v * col[c];
      }
    }
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < NC; ++c)
        if (c >= start) store16(gram + (i0 + r) * W + c * 16, acc[r][c]);
  }
}

// dx[i, :D] += sum_j sym[i, j] xp[j, :], xp being x's rows padded to DC * 16 (zeros past D);
// R rows of dx at a time, so that each xp row loaded serves R of them.
template <int DC>
AUTOREC_INLINE void fold_rows(const float* sym, const float* xp, int64_t F, int64_t D, float* dx) {
  constexpr int64_t W = DC * 16;
  constexpr int R = 4;
  for (int64_t i0 = 0; i0 < F; i0 += R) {
    const int rows = static_cast<int>(std::min<int64_t>(R, F - i0));
    v16 acc[R][DC] = {};
    for (int64_t j = 0; j < F; ++j) {
      v16 v[DC];
      for (int c = 0; c < DC; ++c) v[c] = load16(xp + j * W + c * 16);
      for (int r = 0; r < R; ++r) {
        const float w = r < rows ? sym[(i0 + r) * F + j] : 0.0f;
        for (int c = 0; c < DC; ++c) acc[r][c] += w * v[c];
      }
    }
    for (int r = 0; r < rows; ++r) {
      float row[W];
      for (int c = 0; c < DC; ++c) store16(row + c * 16, acc[r][c]);
      for (int64_t d = 0; d < D; ++d) dx[(i0 + r) * D + d] += row[d];
    }
  }
}

// dx[i, :] += sum_{j >= i + o} g_ij x_j and dx[j, :] += g_ij x_i for the pairs in
// torchrec's triu order (row i's pairs (i, i + o), ..., (i, F - 1) in turn, their gradients g
// contiguous; a diagonal pair's d<x, x>/dx = 2x): no [F, F] fold to clear and scatter into.
// acc [F, DC * 16] holds dx, xp x's rows padded to DC * 16 (zeros past D).
template <int DC>
AUTOREC_INLINE void fold_triu(const float* g, const float* xp, int64_t F, int o, float* acc) {
  constexpr int64_t W = DC * 16;
  std::memset(acc, 0, sizeof(float) * F * W);
  for (int64_t i = 0; i < F; ++i) {
    v16 xi[DC], mine[DC] = {};
    for (int c = 0; c < DC; ++c) xi[c] = load16(xp + i * W + c * 16);
    if (o == 0) {
      const float w = 2.0f * *g++;
      for (int c = 0; c < DC; ++c) mine[c] += w * xi[c];
    }
    for (int64_t j = i + 1; j < F; ++j) {
      const float w = *g++;
      for (int c = 0; c < DC; ++c) {
        mine[c] += w * load16(xp + j * W + c * 16);
        store16(acc + j * W + c * 16, load16(acc + j * W + c * 16) + w * xi[c]);
      }
    }
    for (int c = 0; c < DC; ++c) store16(acc + i * W + c * 16, load16(acc + i * W + c * 16) + mine[c]);
  }
}

// ---- Across samples: 16 samples at a time, lane s of every v16 being sample s of the block.

// One butterfly stage of a 16 x 16 transpose: rows a and a + H (a & H == 0) swap their H-wide
// blocks of lanes; the four stages H = 8, 4, 2, 1 transpose r[0..16) in place.
constexpr int swap_lo(int h, int c) { return (c & h) ? 16 + c - h : c; }
constexpr int swap_hi(int h, int c) { return (c & h) ? 16 + c : c + h; }
#define AUTOREC_LANES(F, h) F(h, 0), F(h, 1), F(h, 2), F(h, 3), F(h, 4), F(h, 5), F(h, 6), F(h, 7), \
    F(h, 8), F(h, 9), F(h, 10), F(h, 11), F(h, 12), F(h, 13), F(h, 14), F(h, 15)
template <int H>
AUTOREC_INLINE void butterfly(v16* r) {
  for (int a = 0; a < 16; ++a)
    if ((a & H) == 0) {
      const v16 lo = r[a], hi = r[a + H];
      r[a] = __builtin_shufflevector(lo, hi, AUTOREC_LANES(swap_lo, H));
      r[a + H] = __builtin_shufflevector(lo, hi, AUTOREC_LANES(swap_hi, H));
    }
}
AUTOREC_INLINE void transpose16(v16* r) {
  butterfly<8>(r);
  butterfly<4>(r);
  butterfly<2>(r);
  butterfly<1>(r);
}

// Copies the first m (<= 16) elements of `from` to `to`: a constant 16 is one vector move, where
// a partial copy goes by bytes through memory.
template <typename T>
AUTOREC_INLINE void copy_some(T* to, const T* from, int m) {
  if (m == 16)
    std::memcpy(to, from, sizeof(T) * 16);
  else
    std::memcpy(to, from, sizeof(T) * m);
}

// 16 values of a row, fp32 or bf16 (widened), the first m (<= 16) of them, zeros past m.
AUTOREC_INLINE v16 load_row(const void* src, int bf16, int64_t at, int m) {
  if (bf16) {
    v16h half = {};
    copy_some(reinterpret_cast<uint16_t*>(&half), static_cast<const uint16_t*>(src) + at, m);
    return widen_bf16(half);
  }
  v16 v = {};
  copy_some(reinterpret_cast<float*>(&v), static_cast<const float*>(src) + at, m);
  return v;
}

// The first m (<= 16) values of v to a row, fp32 or bf16 (rounded as bf16_from_floats rounds).
AUTOREC_INLINE void store_row(void* dst, int bf16, int64_t at, int m, v16 v) {
  if (bf16) {
    const v16h half = round_bf16(v);
    copy_some(static_cast<uint16_t*>(dst) + at, reinterpret_cast<const uint16_t*>(&half), m);
  } else {
    copy_some(static_cast<float*>(dst) + at, reinterpret_cast<const float*>(&v), m);
  }
}

// xs[f * D + d] = x[b0 + s, f, d] in lane s, for the block's `count` samples (zeros past them).
template <int DC>
AUTOREC_INLINE void gather_block(const In& x, int64_t b0, int count, int64_t F, v16* xs) {
  constexpr int64_t D = DC * 16;
  for (int64_t f = 0; f < F; ++f)
    for (int c = 0; c < DC; ++c) {
      v16 r[16];
      for (int s = 0; s < 16; ++s) {
        const float* row = x.row(b0 + s, f, D) + c * 16;
        __builtin_prefetch(row + 16 * x.stride(f));  // the next block's (past the batch: a no-op)
        r[s] = s < count ? load16(row) : v16{};
      }
      transpose16(r);
      for (int t = 0; t < 16; ++t) xs[f * D + c * 16 + t] = r[t];
    }
}

// The block's dots in torchrec's triu order (row i: (i, i + o), ..., (i, F - 1)) into ys[p],
// eight of a row at a time from xs (rows past F read as zeros: xs holds 8 more).
template <int DC>
AUTOREC_INLINE void dots_block(const v16* xs, int64_t F, int o, v16* ys) {
  constexpr int64_t D = DC * 16;
  int64_t p = 0;
  for (int64_t i = 0; i < F; ++i)
    for (int64_t j0 = i + o; j0 < F; j0 += 8) {
      v16 acc[8] = {};
      for (int64_t d = 0; d < D; ++d) {
        const v16 xi = xs[i * D + d];
        for (int t = 0; t < 8; ++t) acc[t] += xi * xs[(j0 + t) * D + d];
      }
      for (int t = 0; t < 8 && j0 + t < F; ++t) ys[p++] = acc[t];
    }
}

// Forward for the block: the passthrough rows, then the dots' columns 16 at a time transposed
// back to the samples' rows (the last chunk partial where P + pad is not a multiple of 16).
template <int DC>
AUTOREC_INLINE void forward_block(const In& x, int64_t b0, int count, int64_t F, int o, int64_t P,
                                  int64_t n, int64_t pad, void* out, int bf16, v16* xs, v16* ys) {
  constexpr int64_t D = DC * 16;
  const int64_t width = n * D + P + pad;
  gather_block<DC>(x, b0, count, F, xs);
  dots_block<DC>(xs, F, o, ys);
  for (int64_t p = P; p < P + pad; ++p) ys[p] = v16{};
  for (int s = 0; s < count; ++s)
    for (int64_t k = 0; k < n * DC; ++k)
      store_row(out, bf16, (b0 + s) * width + k * 16, 16, load16(x.row(b0 + s, k / DC, D) + k % DC * 16));
  for (int64_t c0 = 0; c0 < P + pad; c0 += 16) {
    v16 r[16];
    for (int t = 0; t < 16; ++t) r[t] = ys[c0 + t];
    transpose16(r);
    const int m = static_cast<int>(std::min<int64_t>(16, P + pad - c0));
    for (int s = 0; s < count; ++s) store_row(out, bf16, (b0 + s) * width + n * D + c0, m, r[s]);
  }
}

// Backward for the block: gs[p] the dots' gradients across samples, then each row's dx_i =
// sum_j g_ij x_j over all j (pair[i * F + j] the pair of (i, j) or -1; a diagonal pair twice:
// d<x, x>/dx = 2x), transposed back to the samples' rows, plus the passthrough's gradient.
template <int DC>
AUTOREC_INLINE void backward_block(const void* grad, int bf16, int64_t stride, const In& x, int64_t b0,
                                   int count, int64_t F, const int32_t* pair, int64_t P, int64_t n,
                                   const Out& dx, v16* xs, v16* gs) {
  constexpr int64_t D = DC * 16;
  gather_block<DC>(x, b0, count, F, xs);
  for (int64_t c0 = 0; c0 < P; c0 += 16) {
    const int m = static_cast<int>(std::min<int64_t>(16, P - c0));
    v16 r[16];
    for (int s = 0; s < 16; ++s) {
      const int64_t at = (b0 + s) * stride + n * D + c0;
      __builtin_prefetch(static_cast<const char*>(grad) + (at + 16 * stride) * (bf16 ? 2 : 4));  // the next block's
      r[s] = s < count ? load_row(grad, bf16, at, m) : v16{};
    }
    transpose16(r);
    for (int t = 0; t < 16; ++t) gs[c0 + t] = r[t];
  }
  for (int64_t i = 0; i < F; ++i)
    for (int c = 0; c < DC; ++c) {
      v16 acc[16] = {};
      for (int64_t j = 0; j < F; ++j) {
        const int32_t p = pair[i * F + j];
        if (p < 0) continue;
        const v16 g = i == j ? gs[p] + gs[p] : gs[p];
        for (int t = 0; t < 16; ++t) acc[t] += g * xs[j * D + c * 16 + t];
      }
      transpose16(acc);
      for (int s = 0; s < count; ++s) {
        v16 row = acc[s];
        if (i < n) row += load_row(grad, bf16, (b0 + s) * stride + i * D + c * 16, 16);
        store16(dx.row(b0 + s, i, D) + c * 16, row);
      }
    }
}

// ---- One sample at a time.

// One sample's products (F <= 64: NC = ceil(F / 16) chunks) and one sample's dx += sym x
// (D <= 64: DC = ceil(D / 16)), for each target of simd.h.
#define GRAM(NC) gram_rows<NC>(x, F, D, xt, gram)
#define FOLD(DC) fold_rows<DC>(sym, xp, F, D, dx)
#define FOLD_TRIU(DC) fold_triu<DC>(g, xp, F, o, acc)
#define SAMPLE_KERNELS(SUFFIX, TARGET)                                                             \
  TARGET void gram_sample_##SUFFIX(const float* x, int64_t F, int64_t D, float* xt, float* gram) {  \
    AUTOREC_BY_CHUNKS(F, GRAM)                                                                      \
  }                                                                                                 \
  TARGET void fold_sample_##SUFFIX(const float* sym, const float* xp, int64_t F, int64_t D, float* dx) { \
    AUTOREC_BY_CHUNKS(D, FOLD)                                                                      \
  }                                                                                                 \
  TARGET void fold_triu_##SUFFIX(const float* g, const float* xp, int64_t F, int64_t D, int o, float* acc) { \
    AUTOREC_BY_CHUNKS(D, FOLD_TRIU)                                                                 \
  }
AUTOREC_FOR_EACH_TARGET(SAMPLE_KERNELS)

// A block of 16 samples across samples (D a multiple of 16, at most 64), for each target.
#define FORWARD_BLOCK(DC) forward_block<DC>(x, b0, count, F, o, P, n, pad, out, bf16, xs, ys)
#define BACKWARD_BLOCK(DC) backward_block<DC>(grad, bf16, stride, x, b0, count, F, pair, P, n, dx, xs, gs)
#define BLOCK_KERNELS(SUFFIX, TARGET)                                                                      \
  TARGET void forward_block_##SUFFIX(const In& x, int64_t b0, int count, int64_t F, int64_t D, int o,     \
                                     int64_t P, int64_t n, int64_t pad, void* out, int bf16, v16* xs,      \
                                     v16* ys) {                                                            \
    AUTOREC_BY_CHUNKS(D, FORWARD_BLOCK)                                                                    \
  }                                                                                                        \
  TARGET void backward_block_##SUFFIX(const void* grad, int bf16, int64_t stride, const In& x,           \
                                      int64_t b0, int count, int64_t F, int64_t D, const int32_t* pair,    \
                                      int64_t P, int64_t n, const Out& dx, v16* xs, v16* gs) {             \
    AUTOREC_BY_CHUNKS(D, BACKWARD_BLOCK)                                                                   \
  }
AUTOREC_FOR_EACH_TARGET(BLOCK_KERNELS)

using ForwardBlock = void (*)(const In&, int64_t, int, int64_t, int64_t, int, int64_t, int64_t, int64_t, void*,
                              int, v16*, v16*);
using BackwardBlock = void (*)(const void*, int, int64_t, const In&, int64_t, int, int64_t, int64_t,
                               const int32_t*, int64_t, int64_t, const Out&, v16*, v16*);

// The batch across samples (callers check across_samples): see autorec_pair_dots_forward.
int64_t forward_across(const In& x, int64_t B, int64_t F, int64_t D, int o, int64_t P, int64_t n, int64_t pad,
                       void* out, int out_bf16, int threads) {
  static const ForwardBlock forward_block = AUTOREC_PICK(forward_block);
#pragma omp parallel num_threads(threads < 1 ? 1 : threads)
  {
    // xs' 8 rows past F stay zero (not std::vector<v16>: a template argument drops v16's alignment)
    const std::unique_ptr<v16[]> xs(new v16[(F + 8) * D]()), ys(new v16[P + pad + 16]);
#pragma omp for schedule(static)
    for (int64_t b0 = 0; b0 < B; b0 += 16)
      forward_block(x, b0, static_cast<int>(std::min<int64_t>(16, B - b0)), F, D, o, P, n, pad, out, out_bf16,
                    xs.get(), ys.get());
  }
  return 0;
}

// The batch's backward across samples: see autorec_pair_dots_backward.
int64_t backward_across(const void* grad, int grad_bf16, int64_t grad_stride, const In& x, int64_t B, int64_t F,
                        int64_t D, int o, int64_t P, int64_t n, const Out& dx, int threads) {
  static const BackwardBlock backward_block = AUTOREC_PICK(backward_block);
  std::vector<int32_t> pair(F * F, -1);  // (i, j) -> its pair, both ways
  for (int64_t i = 0, p = 0; i < F; ++i)
    for (int64_t j = i + o; j < F; ++j, ++p) pair[i * F + j] = pair[j * F + i] = static_cast<int32_t>(p);
#pragma omp parallel num_threads(threads < 1 ? 1 : threads)
  {
    const std::unique_ptr<v16[]> xs(new v16[(F + 8) * D]()), gs(new v16[P + 16]);
#pragma omp for schedule(static)
    for (int64_t b0 = 0; b0 < B; b0 += 16)
      backward_block(grad, grad_bf16, grad_stride, x, b0, static_cast<int>(std::min<int64_t>(16, B - b0)), F, D,
                     pair.data(), P, n, dx, xs.get(), gs.get());
  }
  return 0;
}

// Whether a batch goes across samples: pairs in torchrec's order, D a multiple of 16.
bool across_samples(int o, int64_t D) { return o >= 0 && D % 16 == 0; }

using GramSample = void (*)(const float*, int64_t, int64_t, float*, float*);
using FoldSample = void (*)(const float*, const float*, int64_t, int64_t, float*);
using FoldTriu = void (*)(const float*, const float*, int64_t, int64_t, int, float*);

// Whether every pair's two indices fall in [0, F) (checked here, not by the caller: in Python
// the check was two tensor reductions and two host reads per call).
bool pairs_in_range(const int64_t* first, const int64_t* second, int64_t P, int64_t F) {
  for (int64_t p = 0; p < P; ++p)
    if (first[p] < 0 || first[p] >= F || second[p] < 0 || second[p] >= F) return false;
  return true;
}

// o (0 or 1) where the pairs are torchrec's triu_indices(F, F, o) in its order (row by row:
// (0, o), (0, o + 1), ..., (1, 1 + o), ...), so that row i's pairs are one run; else -1.
int triu_offset(const int64_t* first, const int64_t* second, int64_t P, int64_t F) {
  for (int o = 0; o <= 1; ++o) {
    if (P != F * (F + 1 - 2 * o) / 2) continue;
    int64_t p = 0;
    bool same = true;
    for (int64_t i = 0; i < F && same; ++i)
      for (int64_t j = i + o; j < F && same; ++j, ++p) same = first[p] == i && second[p] == j;
    if (same) return o;
  }
  return -1;
}

}  // namespace

extern "C" {

// out [B, n * D + P + pad], fp32, or bf16 with out_bf16 (each row built in fp32, then rounded:
// what autocast's cast of the fp32 output would give, in one pass fewer). Returns 0; nothing is
// written where it returns -1 (F > kMaxF) or -2 (a pair's index outside [0, F)).
int64_t autorec_pair_dots_forward(const float* x, int64_t B, int64_t F, int64_t D, const int64_t* first,
                                  const int64_t* second, int64_t P, int64_t n, int64_t pad, void* out,
                                  int out_bf16, int threads) {
  const int64_t width = n * D + P + pad, W = (F + 15) / 16 * 16;
  if (F > kMaxF) return -1;
  if (!pairs_in_range(first, second, P, F)) return -2;
  static const GramSample gram_sample = AUTOREC_PICK(gram_sample);
  static const auto to_bf16 = AUTOREC_PICK(bf16_from_floats);
  const int o = triu_offset(first, second, P, F);
  if (across_samples(o, D)) return forward_across(In{x, F * D, F, x, 0}, B, F, D, o, P, n, pad, out, out_bf16, threads);
#pragma omp parallel num_threads(threads < 1 ? 1 : threads)
  {
    // xt's columns past F stay zero; a bf16 row is built in `built` first
    std::vector<float> xt(D * W, 0.0f), gram(F * W), built(out_bf16 ? width : 0);
#pragma omp for schedule(static)
    for (int64_t b = 0; b < B; ++b) {
      const float* xb = x + b * F * D;
      float* row = out_bf16 ? built.data() : static_cast<float*>(out) + b * width;
      std::memcpy(row, xb, sizeof(float) * n * D);
      gram_sample(xb, F, D, xt.data(), gram.data());
      float* dots = row + n * D;
      if (o >= 0) {  // torchrec's order: row i's pairs are its gram row from column i + o on
        for (int64_t i = 0, p = 0; i < F; p += F - i - o, ++i)
          std::memcpy(dots + p, gram.data() + i * W + i + o, sizeof(float) * (F - i - o));
      } else {
        for (int64_t p = 0; p < P; ++p) {
          const int64_t a = first[p], c = second[p];
          dots[p] = a <= c ? gram[a * W + c] : gram[c * W + a];
        }
      }
      std::fill(dots + P, dots + P + pad, 0.0f);
      if (out_bf16) to_bf16(row, width, static_cast<uint16_t*>(out) + b * width);
    }
  }
  return 0;
}

// grad [B, grad_stride >= n * D + P (+ pad)], fp32 or (grad_bf16) bf16, -> dx [B, F, D]: each
// pair's gradient folded into a
// symmetric [F, F] (a diagonal pair twice: d<x, x>/dx = 2x), times x, plus the passthrough's;
// pairs in torchrec's triu order go through fold_triu instead.
// Returns 0, or -1 (D > kMaxD) or -2 (a pair outside [0, F)), nothing written.
int64_t autorec_pair_dots_backward(const void* grad, int grad_bf16, int64_t grad_stride, const float* x, int64_t B,
                                   int64_t F, int64_t D, const int64_t* first, const int64_t* second,
                                   int64_t P, int64_t n, float* dx, int threads) {
  const int64_t W = (D + 15) / 16 * 16;
  if (D > kMaxD) return -1;
  if (!pairs_in_range(first, second, P, F)) return -2;
  static const FoldSample fold_sample = AUTOREC_PICK(fold_sample);
  static const FoldTriu fold_triu = AUTOREC_PICK(fold_triu);
  static const auto from_bf16 = AUTOREC_PICK(floats_from_bf16);
  const int o = triu_offset(first, second, P, F);
  if (across_samples(o, D))
    return backward_across(grad, grad_bf16, grad_stride, In{x, F * D, F, x, 0}, B, F, D, o, P, n,
                           Out{dx, F * D, F, dx, 0}, threads);
#pragma omp parallel num_threads(threads < 1 ? 1 : threads)
  {
    // xp's columns past D stay zero; acc is fold_triu's dx
    // (a bf16 gradient's row is widened into `widened` first)
    std::vector<float> sym(F * F), xp(F * W, 0.0f), acc(o >= 0 ? F * W : 0);
    std::vector<float> widened(grad_bf16 ? n * D + P : 0);
#pragma omp for schedule(static)
    for (int64_t b = 0; b < B; ++b) {
      const float* g = static_cast<const float*>(grad) + b * grad_stride;
      if (grad_bf16) {
        from_bf16(static_cast<const uint16_t*>(grad) + b * grad_stride, n * D + P, widened.data());
        g = widened.data();
      }
      const float* xb = x + b * F * D;
      float* out = dx + b * F * D;
      if (o >= 0) {  // torchrec's order: each pair's gradient read in turn, no fold to scatter into
        for (int64_t j = 0; j < F; ++j) std::memcpy(xp.data() + j * W, xb + j * D, sizeof(float) * D);
        fold_triu(g + n * D, xp.data(), F, D, o, acc.data());
        for (int64_t i = 0; i < F; ++i)
          for (int64_t d = 0; d < D; ++d) out[i * D + d] = acc[i * W + d] + (i < n ? g[i * D + d] : 0.0f);
        continue;
      }
      std::fill(sym.begin(), sym.end(), 0.0f);
      for (int64_t p = 0; p < P; ++p) {
        const float v = g[n * D + p];
        sym[first[p] * F + second[p]] += v;
        sym[second[p] * F + first[p]] += v;
      }
      for (int64_t j = 0; j < F; ++j) std::memcpy(xp.data() + j * W, xb + j * D, sizeof(float) * D);
      std::memcpy(out, g, sizeof(float) * n * D);
      std::fill(out + n * D, out + F * D, 0.0f);
      fold_sample(sym.data(), xp.data(), F, D, out);
    }
  }
  return 0;
}

// The same as autorec_pair_dots_forward for x in two parts (see Parts): x0 [B, n0 vectors]
// with rows s0 floats apart, x1 [B, F - n0 vectors] with rows s1 apart. Only across samples:
// returns -3 (nothing written) for pairs not in torchrec's order or D not a multiple of 16.
int64_t autorec_pair_dots_forward_parts(const float* x0, int64_t s0, int64_t n0, const float* x1, int64_t s1,
                                        int64_t B, int64_t F, int64_t D, const int64_t* first,
                                        const int64_t* second, int64_t P, int64_t n, int64_t pad, void* out,
                                        int out_bf16, int threads) {
  if (F > kMaxF) return -1;
  if (!pairs_in_range(first, second, P, F)) return -2;
  const int o = triu_offset(first, second, P, F);
  if (!across_samples(o, D)) return -3;
  return forward_across(In{x0, s0, n0, x1, s1}, B, F, D, o, P, n, pad, out, out_bf16, threads);
}

// Its backward: dx0 (rows t0 floats apart) and dx1 (rows t1 apart) laid out as x0 and x1.
int64_t autorec_pair_dots_backward_parts(const void* grad, int grad_bf16, int64_t grad_stride, const float* x0,
                                         int64_t s0, int64_t n0, const float* x1, int64_t s1, int64_t B, int64_t F,
                                         int64_t D, const int64_t* first, const int64_t* second, int64_t P,
                                         int64_t n, float* dx0, int64_t t0, float* dx1, int64_t t1, int threads) {
  if (D > kMaxD) return -1;
  if (!pairs_in_range(first, second, P, F)) return -2;
  const int o = triu_offset(first, second, P, F);
  if (!across_samples(o, D)) return -3;
  return backward_across(grad, grad_bf16, grad_stride, In{x0, s0, n0, x1, s1}, B, F, D, o, P, n,
                         Out{dx0, t0, n0, dx1, t1}, threads);
}

}  // extern "C"
