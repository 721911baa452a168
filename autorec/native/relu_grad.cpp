// A ReLU layer's gradient before its products, in one pass: see autorec/native/relu_linear.py.
//
// Why by hand: after torch's ReLU, autograd runs threshold_backward (a pass writing the masked
// gradient) and then, in addmm's backward, a column sum for the bias (another pass over it);
// in bf16 torch's threshold kernel converts every value on AVX2. Here one pass masks the
// gradient and sums its columns, 16 columns a vector.
//
// Plain C ABI, called through ctypes (which releases the GIL). Layout: a (the ReLU's output) and
// g (its gradient) [B, N], N a multiple of 16, contiguous, both fp32 or both bf16 (bits as
// uint16); dh [B, N] in the same dtype; db [N] fp32, the column sums of dh: each thread sums its
// rows, the threads' sums added in their order (a run repeats bit for bit at a thread count).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "simd.h"

namespace {

typedef int32_t v16i __attribute__((vector_size(64)));

AUTOREC_INLINE v16 load_values(const void* p, int bf16, int64_t at) {
  if (!bf16) return load16(static_cast<const float*>(p) + at);
  v16h half;
  std::memcpy(&half, static_cast<const uint16_t*>(p) + at, sizeof half);
  return widen_bf16(half);
}

// Rows [lo, hi): dh = 0 where a <= 0, else g (a NaN in a keeps g, as threshold_backward does);
// sums[n] += dh[., n] (sums: N floats, in L1).
AUTOREC_INLINE void mask_rows(const void* a, const void* g, void* dh, int bf16, int64_t N, int64_t lo,
                              int64_t hi, float* sums) {
  for (int64_t b = lo; b < hi; ++b)
    for (int64_t c = 0; c < N; c += 16) {
      const v16 x = load_values(a, bf16, b * N + c), y = load_values(g, bf16, b * N + c);
      const v16i keep = ~(x <= 0.0f);  // all ones where kept: the AND keeps y's bits or clears them
      v16i bits;
      std::memcpy(&bits, &y, sizeof bits);
      bits &= keep;
      v16 out;
      std::memcpy(&out, &bits, sizeof out);
      if (bf16) {
        const v16h half = round_bf16(out);  // exact: out holds bf16 values or zeros
        std::memcpy(static_cast<uint16_t*>(dh) + b * N + c, &half, sizeof half);
      } else {
        store16(static_cast<float*>(dh) + b * N + c, out);
      }
      store16(sums + c, load16(sums + c) + out);
    }
}

#define MASK_KERNELS(SUFFIX, TARGET)                                                                      \
  TARGET void mask_rows_##SUFFIX(const void* a, const void* g, void* dh, int bf16, int64_t N, int64_t lo, \
                                 int64_t hi, float* sums) {                                               \
    mask_rows(a, g, dh, bf16, N, lo, hi, sums);                                                           \
  }
AUTOREC_FOR_EACH_TARGET(MASK_KERNELS)

using MaskRows = void (*)(const void*, const void*, void*, int, int64_t, int64_t, int64_t, float*);

}  // namespace

extern "C" {

// Returns 0, or -1 (N not a multiple of 16: nothing written).
int64_t autorec_relu_grad_bias(const void* a, const void* g, int bf16, int64_t B, int64_t N, void* dh,
                               float* db, int threads) {
  if (N % 16 != 0) return -1;
  static const MaskRows mask = AUTOREC_PICK(mask_rows);
  const int parts = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads < 1 ? 1 : threads, B)));
  std::vector<float> sums(static_cast<size_t>(parts * N), 0.0f);
  // torch's own OpenMP team (see rowwise_adagrad.cpp)
#pragma omp parallel for num_threads(parts) schedule(static, 1)
  for (int p = 0; p < parts; ++p) mask(a, g, dh, bf16, N, B * p / parts, B * (p + 1) / parts, sums.data() + p * N);
  for (int64_t n = 0; n < N; ++n) {
    float s = 0.0f;
    for (int p = 0; p < parts; ++p) s += sums[p * N + n];
    db[n] = s;
  }
  return 0;
}

}  // extern "C"
