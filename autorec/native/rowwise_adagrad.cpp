// Exact row-wise Adagrad for fbgemm's CPU tables in one pass: see autorec/train/native_update.py.
//
// Why by hand: fbgemm's CPU backward (split_embedding_backward_codegen_rowwise_adagrad_cpu)
// sorts each table's rows on its own and took 17 ms a step at the scale workload's shapes; the
// same update in torch's operators is about twenty passes over the looked-up rows (5-7 ms). No
// library offers a CPU kernel that groups the rows once for all tables and updates them in place.
//
// Plain C ABI (no torch headers: it compiles in half a second and is called through ctypes,
// which releases the GIL). Layout (fbgemm's, "aligned" case): every feature D wide, the
// gradient [B, T * D] sample-major (rows grad_stride floats apart: torchrec hands a slice of
// a wider gradient), weights row r at weights[r * D], its state at state[r].
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <omp.h>
#include <vector>

#include "simd.h"

namespace {

struct Args {
  const int64_t* indices;
  const int64_t* offsets;
  int64_t T, B;
  const float* grad;
  int64_t grad_stride;  // floats from one sample's gradient row to the next (>= T * D)
  int64_t D;
  float* weights;
  float* state;
  float neg_lr, eps;
  int mean;
};

// LSD radix sort of (row << 32 | occurrence's bag) by row, stable: bags keep their order. Each
// of the `parts` threads counts and places its own contiguous slice, so the order holds across
// threads too. Returns the buffer (items or scratch) that holds the sorted sequence.
uint64_t* radix_sort(uint64_t* items, uint64_t* scratch, int64_t n, int key_bits, int parts) {
  const int passes = key_bits <= 0 ? 0 : (key_bits + 11) / 12;
  const int digit = passes ? (key_bits + passes - 1) / passes : 0;
  const int64_t buckets = int64_t{1} << digit;
  const uint64_t mask = static_cast<uint64_t>(buckets - 1);
  std::vector<int64_t> count(static_cast<size_t>(buckets * parts));  // [part][bucket]
  for (int p = 0; p < passes; ++p) {
    const int shift = 32 + p * digit;
#pragma omp parallel num_threads(parts)
    {
      const int part = omp_get_thread_num(), team = omp_get_num_threads();
      const int64_t lo = n * part / team, hi = n * (part + 1) / team;
      int64_t* mine = count.data() + part * buckets;
      std::fill(mine, mine + buckets, 0);
      for (int64_t i = lo; i < hi; ++i) ++mine[(items[i] >> shift) & mask];
#pragma omp barrier
#pragma omp single
      {  // bucket-major, then slice order: slice 0's items of a bucket come first
        int64_t total = 0;
        for (int64_t b = 0; b < buckets; ++b)
          for (int q = 0; q < team; ++q) {
            const int64_t k = count[q * buckets + b];
            count[q * buckets + b] = total;
            total += k;
          }
      }
      for (int64_t i = lo; i < hi; ++i) scratch[mine[(items[i] >> shift) & mask]++] = items[i];
    }
    std::swap(items, scratch);
  }
  return items;
}

// Sum each row's gradient over the occurrences [lo, hi) of the sorted items (runs whole), then
// state += mean(g^2) and w += g * (-lr / (sqrt(state) + eps)). DC = D / 16 (D a multiple of 16,
// at most 64) keeps the row's gradient in vector registers; DC = 0 is any D, in loops over it.
template <int DC>
AUTOREC_INLINE void update_runs(const Args& a, const uint64_t* items, int64_t lo, int64_t hi) {
  std::vector<float> any(DC > 0 ? 0 : a.D);
  for (int64_t i = lo; i < hi;) {
    const uint64_t row = items[i] >> 32;
    v16 g[DC > 0 ? DC : 1] = {};
    std::fill(any.begin(), any.end(), 0.0f);
    for (; i < hi && (items[i] >> 32) == row; ++i) {
      const int64_t bag = static_cast<int64_t>(items[i] & 0xffffffffu);
      const int64_t t = bag / a.B, s = bag - t * a.B;
      const float* src = a.grad + s * a.grad_stride + t * a.D;
      const float scale = a.mean ? 1.0f / static_cast<float>(a.offsets[bag + 1] - a.offsets[bag]) : 1.0f;
      if constexpr (DC > 0) {
        for (int c = 0; c < DC; ++c) g[c] += a.mean ? scale * load16(src + c * 16) : load16(src + c * 16);
      } else {
        for (int64_t d = 0; d < a.D; ++d) any[d] += a.mean ? scale * src[d] : src[d];
      }
    }
    float square = 0.0f;
    if constexpr (DC > 0) {
      v16 sq = g[0] * g[0];
      for (int c = 1; c < DC; ++c) sq += g[c] * g[c];
      square = hsum(sq);
    } else {
      for (int64_t d = 0; d < a.D; ++d) square += any[d] * any[d];
    }
    const float s = a.state[row] + square / static_cast<float>(a.D);
    a.state[row] = s;
    const float step = (1.0f / (std::sqrt(s) + a.eps)) * a.neg_lr;
    float* w = a.weights + static_cast<int64_t>(row) * a.D;
    if constexpr (DC > 0) {
      for (int c = 0; c < DC; ++c) store16(w + c * 16, load16(w + c * 16) + g[c] * step);
    } else {
      for (int64_t d = 0; d < a.D; ++d) w[d] += any[d] * step;
    }
  }
}

#define UPDATE(DC) update_runs<DC>(a, items, lo, hi)
#define UPDATE_KERNELS(SUFFIX, TARGET)                                                       \
  TARGET void update_##SUFFIX(const Args& a, const uint64_t* items, int64_t lo, int64_t hi) { \
    if (a.D % 16 != 0 || a.D > 64) {                                                         \
      update_runs<0>(a, items, lo, hi);                                                      \
      return;                                                                                \
    }                                                                                        \
    AUTOREC_BY_CHUNKS(a.D, UPDATE)                                                           \
  }
AUTOREC_FOR_EACH_TARGET(UPDATE_KERNELS)

using Update = void (*)(const Args&, const uint64_t*, int64_t, int64_t);

}  // namespace

extern "C" {

// Rows and bags (T * B) each below 2^32 (the caller checks). Returns 0, or 1 + the first
// occurrence whose row falls outside [0, rows); then nothing was updated.
int64_t autorec_rowwise_adagrad(const int64_t* indices, const int64_t* offsets, int64_t T, int64_t B,
                                const int64_t* feature_base, const float* grad, int64_t grad_stride,
                                int64_t D, float* weights, float* state, int64_t rows, float lr,
                                float eps, int mean, int threads) {
  const int64_t n = offsets[T * B];
  if (n == 0) return 0;
  const int parts = threads < 1 ? 1 : threads;
  std::unique_ptr<uint64_t[]> items_buf(new uint64_t[n]), scratch_buf(new uint64_t[n]);
  uint64_t* items = items_buf.get();
  int64_t bad = n;  // the first occurrence out of bounds, n for none
#pragma omp parallel for num_threads(parts) schedule(static) reduction(min : bad)
  for (int64_t bag = 0; bag < T * B; ++bag) {
    const int64_t base = feature_base[bag / B];
    for (int64_t k = offsets[bag]; k < offsets[bag + 1]; ++k) {
      const int64_t row = base + indices[k];
      if (row < 0 || row >= rows) bad = std::min(bad, k);
      items[k] = (static_cast<uint64_t>(row) << 32) | static_cast<uint64_t>(bag);
    }
  }
  if (bad < n) return bad + 1;
  int key_bits = 0;
  while (key_bits < 32 && (uint64_t{1} << key_bits) < static_cast<uint64_t>(rows)) ++key_bits;
  items = radix_sort(items, scratch_buf.get(), n, key_bits, parts);
  static const Update update = AUTOREC_PICK(update);
  const Args a{indices, offsets, T, B, grad, grad_stride, D, weights, state, -lr, eps, mean};
  // Split the occurrences into runs-whole chunks, one per thread.
  std::vector<int64_t> cut(parts + 1, n);
  cut[0] = 0;
  for (int p = 1; p < parts; ++p) {
    int64_t at = std::max(cut[p - 1], n * p / parts);
    while (at > 0 && at < n && (items[at] >> 32) == (items[at - 1] >> 32)) ++at;
    cut[p] = at;
  }
  // torch's own OpenMP team (the process has torch's libgomp loaded; this library links the
  // same soname): its threads are awake after the step's other parallel regions, where threads
  // of our own would compete with them for the cores while they spin.
#pragma omp parallel for num_threads(parts) schedule(static, 1)
  for (int p = 0; p < parts; ++p) update(a, items, cut[p], cut[p + 1]);
  return 0;
}

}  // extern "C"
