// One Wukong layer's tail and the next layer's head in one pass over the batch, forward and
// backward: see autorec/native/wukong_layer.py (`mid`).
//
// Why: between two stacked layers the tail writes y = LN_D(base + [m; 0]) [B, F, D] and the next
// head reads it back, and in the backward the head writes dy and the tail reads it back (with y
// once more): four passes over the batch's [B, F, D] in fp32, 16 MB at the preset's sizes,
// where the processor's memory, not its arithmetic, sets the pace (BENCHMARKS.md). Here y and
// dy stay in L1, sample by sample; the backward recomputes y from base and m (the same values
// bit for bit), so that nothing of it is kept between the passes.
//
// Layout (wukong_sample.h): base1 [B, F, D] and m1 [B, n_fm1 * D] (fp32, or bf16 with m1_bf16)
// are the first layer's, normalised over D with gamma1, beta1 and eps1 (stats1 [B, F, 2]); the
// second layer's head takes y [B, F, D] with maps wcat [F, C], FM norm fm_gamma, fm_beta, eps,
// and gives fm [B, F * k] (fp32, or bf16), base [B, f_out, D] and stats [B, 2].
#include <cstdint>
#include <cstring>
#include <omp.h>
#include <vector>

#include "wukong_sample.h"

namespace {

// m's row b as fp32: in place, or widened from bf16 into buf.
const float* fp32_row(const void* m, int bf16, int64_t b, int64_t w, float* buf) {
  static const auto from_bf16 = AUTOREC_PICK(floats_from_bf16);
  if (!bf16) return static_cast<const float*>(m) + b * w;
  from_bf16(static_cast<const uint16_t*>(m) + b * w, w, buf);
  return buf;
}

// The first layer's tail: F vectors out, n_fm1 of them its MLP's rows.
Shape tail_shape(int64_t D, int64_t n_fm1, int64_t F) { return {F, D, 0, 0, n_fm1, F - n_fm1, F, 0}; }

// 0 where the head's shape s and the tail's t hold together (check, check_tail), else -1 or -3.
int64_t check_mid(const Shape& s, const Shape& t) {
  if (const int64_t bad = check(s)) return bad;
  return check_tail(t.D, t.n_fm, t.F);
}

}  // namespace

extern "C" {

// fm, base and stats (the second layer's head) and stats1 (the first layer's tail) from base1
// and m1. Returns 0, or -1 / -3 (see check, check_tail), nothing written.
int64_t autorec_wukong_mid_forward(const float* base1, const void* m1, int m1_bf16, int64_t B, int64_t D,
                                   int64_t n_fm1, int64_t F, const float* gamma1, const float* beta1, float eps1,
                                   float* stats1, const float* wcat, int64_t C, int64_t k, int64_t n_fm,
                                   int64_t n_lcb, int proj, const float* fm_gamma, const float* fm_beta, float eps,
                                   void* fm, int fm_bf16, float* base, float* stats, int threads) {
  const Shape s{F, D, C, k, n_fm, n_lcb, n_fm + n_lcb, proj}, t = tail_shape(D, n_fm1, F);
  if (const int64_t bad = check_mid(s, t)) return bad;
  static const TailForward tail = AUTOREC_PICK(tail_forward);
  static const HeadForward head = AUTOREC_PICK(head_forward);
  static const auto to_bf16 = AUTOREC_PICK(bf16_from_floats);
  const int64_t n = F * k, w = n_fm1 * D;
#pragma omp parallel num_threads(team(threads))
  {
    std::vector<float> pt(C * D), z(n), row(fm_bf16 ? n : 0), m_row(m1_bf16 ? w : 0), y(F * D);
#pragma omp for schedule(static)
    for (int64_t b = 0; b < B; ++b) {
      tail(base1 + b * F * D, fp32_row(m1, m1_bf16, b, w, m_row.data()), gamma1, beta1, eps1, t, y.data(),
           stats1 + 2 * b * F);
      float* out = fm_bf16 ? row.data() : static_cast<float*>(fm) + b * n;
      head(rows_at<const float>(y.data()), wcat, fm_gamma, fm_beta, eps, s, pt.data(), z.data(), out,
           base + b * s.f_out * D, stats + 2 * b);
      if (fm_bf16) to_bf16(out, n, static_cast<uint16_t*>(fm) + b * n);
    }
  }
  return 0;
}

// dbase1 [B, F, D], dm1 [B, n_fm1 * D] (m1's dtype), dgamma1 and dbeta1 [D], dwcat [F, C],
// dfm_gamma and dfm_beta [F * k] (all overwritten; weight and norm gradients summed in the
// batch's parts, added in order, as wukong_layer.cpp's head and tail backward sum them) from dfm
// [B, F * k] (fp32, or bf16 with dfm_bf16) and dbase [B, f_out, D].
int64_t autorec_wukong_mid_backward(const float* base1, const void* m1, int m1_bf16, int64_t B, int64_t D,
                                    int64_t n_fm1, int64_t F, const float* gamma1, const float* beta1, float eps1,
                                    const float* stats1, const float* wcat, int64_t C, int64_t k, int64_t n_fm,
                                    int64_t n_lcb, int proj, const float* fm_gamma, const float* stats,
                                    const void* dfm, int dfm_bf16, const float* dbase, float* dbase1, void* dm1,
                                    float* dgamma1, float* dbeta1, float* dwcat, float* dfm_gamma, float* dfm_beta,
                                    int threads) {
  const Shape s{F, D, C, k, n_fm, n_lcb, n_fm + n_lcb, proj}, t = tail_shape(D, n_fm1, F);
  if (const int64_t bad = check_mid(s, t)) return bad;
  static const TailForward tail = AUTOREC_PICK(tail_forward);
  static const HeadBackward head = AUTOREC_PICK(head_backward);
  static const TailBackward tail_back = AUTOREC_PICK(tail_backward);
  static const WeightGrads weight_sums = AUTOREC_PICK(weight_grads);
  static const auto from_bf16 = AUTOREC_PICK(floats_from_bf16);
  static const auto to_bf16 = AUTOREC_PICK(bf16_from_floats);
  const int64_t n = F * k, w = n_fm1 * D, parts = team(threads);
  constexpr int64_t kBlock = 8;  // samples whose dpt weight_grads takes at once (as the head's)
  std::vector<std::vector<float>> sums(parts);  // each part's dW, FM norm and tail norm sums
#pragma omp parallel num_threads(parts)
  {
    std::vector<float> pt(k * D), z(n), dz(n), dpt(kBlock * C * D), row(dfm_bf16 ? n : 0), norm(2 * n);
    std::vector<float> dw(F * C * D), ys(kBlock * F * D), dy(F * D), m_row(m1_bf16 ? w : 0), y_stats(2 * F);
    std::vector<float> tail_norm(2 * D);
    InRows xs[kBlock];
#pragma omp for schedule(static)
    for (int64_t part = 0; part < parts; ++part) {
      std::fill(dw.begin(), dw.end(), 0.0f);
      std::fill(norm.begin(), norm.end(), 0.0f);
      std::fill(tail_norm.begin(), tail_norm.end(), 0.0f);
      const int64_t lo = B * part / parts, hi = B * (part + 1) / parts;
      for (int64_t b0 = lo; b0 < hi; b0 += kBlock) {
        const int count = static_cast<int>(hi - b0 < kBlock ? hi - b0 : kBlock);
        for (int64_t b = b0; b < b0 + count; ++b) {
          const float* mb = fp32_row(m1, m1_bf16, b, w, m_row.data());
          float* y = ys.data() + (b - b0) * F * D;
          tail(base1 + b * F * D, mb, gamma1, beta1, eps1, t, y, y_stats.data());  // y again, bit for bit
          xs[b - b0] = rows_at<const float>(y);
          const float* g = static_cast<const float*>(dfm) + b * n;
          if (dfm_bf16) {
            from_bf16(static_cast<const uint16_t*>(dfm) + b * n, n, row.data());
            g = row.data();
          }
          head(xs[b - b0], wcat, fm_gamma, stats + 2 * b, g, dbase + b * s.f_out * D, s, pt.data(), z.data(),
               dz.data(), dpt.data() + (b - b0) * C * D, rows_at(dy.data()), norm.data(), norm.data() + n);
          float* db = dbase1 + b * F * D;
          tail_back(dy.data(), base1 + b * F * D, mb, gamma1, stats1 + 2 * b * F, t, db, tail_norm.data(),
                    tail_norm.data() + D);
          if (m1_bf16)
            to_bf16(db, w, static_cast<uint16_t*>(dm1) + b * w);
          else
            std::memcpy(static_cast<float*>(dm1) + b * w, db, sizeof(float) * w);
        }
        weight_sums(xs, dpt.data(), count, s, dw.data());
      }
      std::vector<float>& mine = sums[part];
      mine.resize(F * C + 2 * n + 2 * D);
      lane_sums(dw.data(), F * C, D, mine.data());
      std::memcpy(mine.data() + F * C, norm.data(), sizeof(float) * 2 * n);
      std::memcpy(mine.data() + F * C + 2 * n, tail_norm.data(), sizeof(float) * 2 * D);
    }
  }
  add_parts(sums, {{dwcat, F * C}, {dfm_gamma, n}, {dfm_beta, n}, {dgamma1, D}, {dbeta1, D}});
  return 0;
}

}  // extern "C"
