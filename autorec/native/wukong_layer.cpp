// Wukong's layer on the CPU around its MLP, forward and backward: see autorec/native/wukong_layer.py
// (why by hand, and the layout: wukong_sample.h).
#include <cstdint>
#include <cstring>
#include <omp.h>
#include <vector>

#include "wukong_sample.h"

namespace {

// 0 where x's parts fit the shape (each part's rows at least its vectors apart), else -3.
int64_t check_parts(const In& x, const Shape& s) {
  if (x.n0 < 1 || x.n0 > s.F || x.s0 < x.n0 * s.D) return -3;
  return x.n0 == s.F || x.s1 >= (s.F - x.n0) * s.D ? 0 : -3;
}

}  // namespace

extern "C" {

// fm [B, F * k] (fp32, or bf16 with fm_bf16), base [B, f_out, D], stats [B, 2] from x in two
// parts (rows.h): x0 [B, n0 vectors] with rows s0 floats apart, x1 [B, F - n0 vectors] with rows
// s1 apart (n0 = F: x0 alone). Returns 0, or -1 / -3 (see check, check_parts), nothing written.
int64_t autorec_wukong_head_forward(const float* x0, int64_t s0, int64_t n0, const float* x1, int64_t s1, int64_t B,
                                    int64_t F, int64_t D, const float* wcat, int64_t C, int64_t k, int64_t n_fm,
                                    int64_t n_lcb, int proj, const float* gamma, const float* beta, float eps,
                                    void* fm, int fm_bf16, float* base, float* stats, int threads) {
  const Shape s{F, D, C, k, n_fm, n_lcb, n_fm + n_lcb, proj};
  const In x{x0, s0, n0, x1, s1};
  if (const int64_t bad = check(s)) return bad;
  if (const int64_t bad = check_parts(x, s)) return bad;
  static const HeadForward sample = AUTOREC_PICK(head_forward);
  static const auto to_bf16 = AUTOREC_PICK(bf16_from_floats);
  const int64_t n = F * k;
#pragma omp parallel num_threads(team(threads))
  {
    std::vector<float> pt(C * D), z(n), row(fm_bf16 ? n : 0);
#pragma omp for schedule(static)
    for (int64_t b = 0; b < B; ++b) {
      float* out = fm_bf16 ? row.data() : static_cast<float*>(fm) + b * n;
      sample(x.sample(b), wcat, gamma, beta, eps, s, pt.data(), z.data(), out, base + b * s.f_out * D,
             stats + 2 * b);
      if (fm_bf16) to_bf16(out, n, static_cast<uint16_t*>(fm) + b * n);
    }
  }
  return 0;
}

// dx in x's two parts (dx0 with rows t0 floats apart, dx1 with rows t1 apart), dwcat [F, C],
// dgamma and dbeta [F * k] (all overwritten) from dfm [B, F * k] (fp32, or bf16 with dfm_bf16)
// and dbase [B, f_out, D]; x in parts as the forward's.
int64_t autorec_wukong_head_backward(const float* x0, int64_t s0, int64_t n0, const float* x1, int64_t s1, int64_t B,
                                     int64_t F, int64_t D, const float* wcat, int64_t C, int64_t k, int64_t n_fm,
                                     int64_t n_lcb, int proj, const float* gamma, const float* stats, const void* dfm,
                                     int dfm_bf16, const float* dbase, float* dx0, int64_t t0, float* dx1, int64_t t1,
                                     float* dwcat, float* dgamma, float* dbeta, int threads) {
  const Shape s{F, D, C, k, n_fm, n_lcb, n_fm + n_lcb, proj};
  const In x{x0, s0, n0, x1, s1};
  const Out dx{dx0, t0, n0, dx1, t1};
  if (const int64_t bad = check(s)) return bad;
  if (const int64_t bad = check_parts(x, s)) return bad;
  if (const int64_t bad = check_parts(In{dx0, t0, n0, dx1, t1}, s)) return bad;
  static const HeadBackward sample = AUTOREC_PICK(head_backward);
  static const WeightGrads weight_sums = AUTOREC_PICK(weight_grads);
  static const auto from_bf16 = AUTOREC_PICK(floats_from_bf16);
  const int64_t n = F * k, parts = team(threads);
  constexpr int64_t kBlock = 8;  // samples whose dpt weight_grads takes at once
  // Each part of the batch (`parts` of them, fixed by the caller's thread count whatever team
  // OpenMP forms) sums dW [F * C] (over D), dgamma and dbeta on its own; the parts' sums are
  // added in order, so a run repeats bit for bit.
  std::vector<std::vector<float>> sums(parts);
#pragma omp parallel num_threads(parts)
  {
    std::vector<float> pt(k * D), z(n), dz(n), dpt(kBlock * C * D), row(dfm_bf16 ? n : 0), norm(2 * n);
    std::vector<float> dw(F * C * D);
    InRows xs[kBlock];
#pragma omp for schedule(static)
    for (int64_t part = 0; part < parts; ++part) {
      std::fill(dw.begin(), dw.end(), 0.0f);
      std::fill(norm.begin(), norm.end(), 0.0f);
      const int64_t lo = B * part / parts, hi = B * (part + 1) / parts;
      for (int64_t b0 = lo; b0 < hi; b0 += kBlock) {
        const int count = static_cast<int>(hi - b0 < kBlock ? hi - b0 : kBlock);
        for (int64_t b = b0; b < b0 + count; ++b) {
          xs[b - b0] = x.sample(b);
          const float* g = static_cast<const float*>(dfm) + b * n;
          if (dfm_bf16) {
            from_bf16(static_cast<const uint16_t*>(dfm) + b * n, n, row.data());
            g = row.data();
          }
          sample(xs[b - b0], wcat, gamma, stats + 2 * b, g, dbase + b * s.f_out * D, s, pt.data(), z.data(),
                 dz.data(), dpt.data() + (b - b0) * C * D, dx.sample(b), norm.data(), norm.data() + n);
        }
        weight_sums(xs, dpt.data(), count, s, dw.data());
      }
      std::vector<float>& mine = sums[part];
      mine.resize(F * C + 2 * n);
      lane_sums(dw.data(), F * C, D, mine.data());
      std::memcpy(mine.data() + F * C, norm.data(), sizeof(float) * 2 * n);
    }
  }
  add_parts(sums, {{dwcat, F * C}, {dgamma, n}, {dbeta, n}});
  return 0;
}

// y [B, f_out, D] (fp32, or bf16 with y_bf16: the last layer's, for the over-arch's linear) and
// stats [B, f_out, 2] from base and m [B, n_fm * D] (fp32, or bf16 with m_bf16).
int64_t autorec_wukong_tail_forward(const float* base, const void* m, int m_bf16, int64_t B, int64_t D, int64_t n_fm,
                                    int64_t f_out, const float* gamma, const float* beta, float eps, void* y,
                                    int y_bf16, float* stats, int threads) {
  const Shape s{f_out, D, 0, 0, n_fm, f_out - n_fm, f_out, 0};
  if (const int64_t bad = check_tail(D, n_fm, f_out)) return bad;
  static const TailForward sample = AUTOREC_PICK(tail_forward);
  static const auto from_bf16 = AUTOREC_PICK(floats_from_bf16);
  static const auto to_bf16 = AUTOREC_PICK(bf16_from_floats);
  const int64_t w = n_fm * D;
#pragma omp parallel num_threads(team(threads))
  {
    std::vector<float> row(m_bf16 ? w : 0), out(y_bf16 ? f_out * D : 0);
#pragma omp for schedule(static)
    for (int64_t b = 0; b < B; ++b) {
      const float* mb = static_cast<const float*>(m) + b * w;
      if (m_bf16) {
        from_bf16(static_cast<const uint16_t*>(m) + b * w, w, row.data());
        mb = row.data();
      }
      float* yb = y_bf16 ? out.data() : static_cast<float*>(y) + b * f_out * D;
      sample(base + b * f_out * D, mb, gamma, beta, eps, s, yb, stats + 2 * b * f_out);
      if (y_bf16) to_bf16(yb, f_out * D, static_cast<uint16_t*>(y) + b * f_out * D);
    }
  }
  return 0;
}

// dbase [B, f_out, D], dm [B, n_fm * D] (m's dtype: fp32, or bf16 with m_bf16), dgamma and dbeta
// [D] (overwritten; the batch's parts' sums added in order) from dy [B, f_out, D] (fp32, or bf16
// with dy_bf16).
int64_t autorec_wukong_tail_backward(const void* dy, int dy_bf16, const float* base, const void* m, int m_bf16, int64_t B,
                                     int64_t D, int64_t n_fm, int64_t f_out, const float* gamma, const float* stats,
                                     void* dm, float* dbase, float* dgamma, float* dbeta, int threads) {
  const Shape s{f_out, D, 0, 0, n_fm, f_out - n_fm, f_out, 0};
  if (const int64_t bad = check_tail(D, n_fm, f_out)) return bad;
  static const TailBackward sample = AUTOREC_PICK(tail_backward);
  static const auto from_bf16 = AUTOREC_PICK(floats_from_bf16);
  static const auto to_bf16 = AUTOREC_PICK(bf16_from_floats);
  const int64_t w = n_fm * D, parts = team(threads);
  std::vector<std::vector<float>> sums(parts);  // each part's dgamma and dbeta, added in order
#pragma omp parallel num_threads(parts)
  {
    std::vector<float> row(m_bf16 ? w : 0), grad(dy_bf16 ? f_out * D : 0);
#pragma omp for schedule(static)
    for (int64_t part = 0; part < parts; ++part) {
      std::vector<float>& norm = sums[part];
      norm.assign(2 * D, 0.0f);
      for (int64_t b = B * part / parts; b < B * (part + 1) / parts; ++b) {
        const float* mb = static_cast<const float*>(m) + b * w;
        if (m_bf16) {
          from_bf16(static_cast<const uint16_t*>(m) + b * w, w, row.data());
          mb = row.data();
        }
        const float* dyb = static_cast<const float*>(dy) + b * f_out * D;
        if (dy_bf16) {
          from_bf16(static_cast<const uint16_t*>(dy) + b * f_out * D, f_out * D, grad.data());
          dyb = grad.data();
        }
        float* db = dbase + b * f_out * D;
        sample(dyb, base + b * f_out * D, mb, gamma, stats + 2 * b * f_out, s, db, norm.data(), norm.data() + D);
        if (m_bf16)
          to_bf16(db, w, static_cast<uint16_t*>(dm) + b * w);
        else
          std::memcpy(static_cast<float*>(dm) + b * w, db, sizeof(float) * w);
      }
    }
  }
  add_parts(sums, {{dgamma, D}, {dbeta, D}});
  return 0;
}

}  // extern "C"
