// exp for the CPU kernels, without libm for float.
//
// Why: glibc's expf picks an FMA or an SSE2 variant at run time, so its bits are not promised
// to match between machines, and as a library call it blocks vectorization (expf and tanhf were
// a fifth of a small-model step). det_expf() uses float multiplies and adds only (worker/ops
// builds with fp contraction off), so it returns the same bits on every IEEE-754 machine and
// at every SIMD width.
// Accuracy: range reduction x = k ln2 + r with a two-part ln2, |r| <= ln2/2, degree-7 Taylor
// polynomial (truncation < 5e-9 relative), so the error is float rounding: within 2 ulp of the
// true value (tested against double exp). x > 88 saturates at exp(88); x < -87 returns 0.
// The double instantiation (the golden reference in tests) keeps std::exp.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace flotilla::worker::ops {

inline float det_expf(float x) {
  const float clamped = x > 88.0f ? 88.0f : (x < -87.0f ? -87.0f : x);
  // Round-to-nearest of clamped/ln2 with the 1.5*2^23 trick (exact for |v| < 2^22).
  const float magic = 12582912.0f;
  const float k = (clamped * 1.44269504088896341f + magic) - magic;
  float r = clamped - k * 0.693145751953125f;  // ln2 high part: k * hi is exact
  r = r - k * 1.428606765330187e-06f;          // ln2 low part
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const std::int32_t bits = (static_cast<std::int32_t>(k) + 127) << 23;
  const float result = p * std::bit_cast<float>(bits);
  return x < -87.0f ? 0.0f : result;
}

template <class T>
inline T op_exp(T x) {
  if constexpr (sizeof(T) == sizeof(float)) {
    return det_expf(x);
  } else {
    return std::exp(x);
  }
}

}  // namespace flotilla::worker::ops
