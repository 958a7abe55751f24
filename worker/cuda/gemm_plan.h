// The cuBLAS calls of the CUDA backend, as plain data, so a CPU test can execute them with a
// reference column-major GEMM and check them against the CPU ops without a GPU.
//
// cuBLAS is column-major: C(m x n) = alpha * op(A)(m x k) * op(B)(k x n) + beta * C, batched
// with element strides. A row-major [rows, cols] buffer is the column-major cols x rows
// transpose, which is how every plan below reads the row-major tensors of the model.
// Header-only, C++17, no CUDA includes.
#pragma once

namespace flotilla::worker::cuda {

struct GemmCall {
  bool trans_a = false, trans_b = false;
  int m = 0, n = 0, k = 0;
  float alpha = 1.f, beta = 0.f;
  int lda = 0, ldb = 0, ldc = 0;
  long long stride_a = 0, stride_b = 0, stride_c = 0;
  int batch = 1;
};

// Dense layer, weights [IN, OUT] row-major.
// out[N,OUT] = inp @ W (+ C's existing bias rows when beta = 1): A = weight, B = inp, C = out.
inline GemmCall matmul_forward_gemm(int N, int IN, int OUT, bool accumulate_into_out) {
  GemmCall g;
  g.m = OUT; g.n = N; g.k = IN;
  g.lda = OUT; g.ldb = IN; g.ldc = OUT;
  g.beta = accumulate_into_out ? 1.f : 0.f;
  return g;
}
// dinp[N,IN] += dout @ W^T: A = weight, B = dout, C = dinp.
inline GemmCall matmul_dinp_gemm(int N, int IN, int OUT) {
  GemmCall g;
  g.trans_a = true;
  g.m = IN; g.n = N; g.k = OUT;
  g.lda = OUT; g.ldb = OUT; g.ldc = IN;
  g.beta = 1.f;
  return g;
}
// dW[IN,OUT] += inp^T @ dout: A = dout, B = inp, C = dweight.
inline GemmCall matmul_dweight_gemm(int N, int IN, int OUT) {
  GemmCall g;
  g.trans_b = true;
  g.m = OUT; g.n = IN; g.k = N;
  g.lda = OUT; g.ldb = IN; g.ldc = OUT;
  g.beta = 1.f;
  return g;
}

// Attention, per head (batch = B*NH); q, k, v, y and their grads are [B,NH,T,HS], att [B,NH,T,T].
inline GemmCall attention_gemm_base(int B, int NH) {
  GemmCall g;
  g.batch = B * NH;
  return g;
}
// att = scale * q k^T: A = k, B = q, C = att.
inline GemmCall attention_scores_gemm(int B, int T, int NH, int HS, float scale) {
  GemmCall g = attention_gemm_base(B, NH);
  g.trans_a = true;
  g.m = T; g.n = T; g.k = HS;
  g.alpha = scale;
  g.lda = HS; g.ldb = HS; g.ldc = T;
  g.stride_a = 1LL * T * HS; g.stride_b = 1LL * T * HS; g.stride_c = 1LL * T * T;
  return g;
}
// y = att v: A = v, B = att, C = y.
inline GemmCall attention_values_gemm(int B, int T, int NH, int HS) {
  GemmCall g = attention_gemm_base(B, NH);
  g.m = HS; g.n = T; g.k = T;
  g.lda = HS; g.ldb = T; g.ldc = HS;
  g.stride_a = 1LL * T * HS; g.stride_b = 1LL * T * T; g.stride_c = 1LL * T * HS;
  return g;
}
// datt = dy v^T: A = v, B = dy, C = datt; the scores' shape and strides, unscaled.
inline GemmCall attention_datt_gemm(int B, int T, int NH, int HS) {
  return attention_scores_gemm(B, T, NH, HS, 1.f);
}
// dv = att^T dy: A = dy, B = att, C = dv; the values' shape and strides, with att transposed.
inline GemmCall attention_dv_gemm(int B, int T, int NH, int HS) {
  GemmCall g = attention_values_gemm(B, T, NH, HS);
  g.trans_b = true;
  return g;
}
// dq = dpre k (scale already folded into dpre): A = k, B = dpre, C = dq.
inline GemmCall attention_dq_gemm(int B, int T, int NH, int HS) {
  return attention_values_gemm(B, T, NH, HS);
}
// dk = dpre^T q: A = q, B = dpre, C = dk.
inline GemmCall attention_dk_gemm(int B, int T, int NH, int HS) {
  return attention_dv_gemm(B, T, NH, HS);
}

}  // namespace flotilla::worker::cuda
