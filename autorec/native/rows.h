// A batch's vectors as the kernels beside this file read and write them: in two parts, so that a
// model's dense vector and its pooled embeddings are read where they lie, with no concatenation.
#pragma once
#include <cstdint>
#include <cstring>

#include "simd.h"

// One sample's vectors: vector f (D floats) at a + f * D for f < n0, else at b + (f - n0) * D.
template <typename T>
struct Rows {
  T* a;
  int64_t n0;
  T* b;
  AUTOREC_INLINE T* at(int64_t f, int64_t D) const { return f < n0 ? a + f * D : b + (f - n0) * D; }
};

// Rows one after another from p.
template <typename T>
AUTOREC_INLINE Rows<T> rows_at(T* p) {
  return {p, INT64_MAX, p};
}

// Sample b's vector f (D floats) at p0 + b * s0 + f * D for f < n0, else at
// p1 + b * s1 + (f - n0) * D; strides in floats. One tensor [B, F, D] is the parts with n0 = F
// (p1 then unread).
template <typename T>
struct Parts {
  T* p0;
  int64_t s0, n0;
  T* p1;
  int64_t s1;
  AUTOREC_INLINE T* row(int64_t b, int64_t f, int64_t D) const {
    return f < n0 ? p0 + b * s0 + f * D : p1 + b * s1 + (f - n0) * D;
  }
  AUTOREC_INLINE int64_t stride(int64_t f) const { return f < n0 ? s0 : s1; }
  AUTOREC_INLINE Rows<T> sample(int64_t b) const { return {p0 + b * s0, n0, p1 + b * s1}; }
};
using In = Parts<const float>;
using Out = Parts<float>;
