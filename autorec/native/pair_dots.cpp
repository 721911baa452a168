// DLRM's pairwise dots on the CPU, forward and backward, one sample at a time in cache: see
// autorec/native/pair_dots.py.
//
// Why by hand: per sample the dots are a 27 x 16 x 27 product. torch runs them as batched
// matrix products around a gather of the pairs and, in the backward, a zero-filled fold with two
// scatters: 5.7 ms of a 27 ms DLRM step on an Intel Xeon, for 0.3 GFLOP (BENCHMARKS.md). Here
// each sample's vectors, products and fold stay in L1 and registers.
//
// Layout: x [B, F, D] contiguous; the output row is [x[:, :n] flattened, the P dots, pad zeros];
// pair p is (first[p], second[p]). The per-sample loops are compiled for AVX-512, AVX2 and plain
// x86-64 at once and the CPU's best is picked on the first call.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

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

}  // extern "C"
