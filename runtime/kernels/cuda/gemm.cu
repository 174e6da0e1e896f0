// The matrix products through cuBLASLt, and CublasLtHandle's plan cache.
//
// cuBLASLt is column-major. A row-major [r, c] matrix is the column-major
// [c, r] matrix with the same bytes, so each row-major product is issued as
// its transpose: out = lhs rhs becomes out^T = rhs^T lhs^T, i.e. A = rhs,
// B = lhs, with transposition flags where the row-major op transposes.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "runtime/kernels/cuda/cuda_kernels.h"

namespace loom::runtime::cuda {

namespace {

template <typename T>
constexpr cudaDataType_t dataType();
template <>
constexpr cudaDataType_t dataType<float>() {
  return CUDA_R_32F;
}
template <>
constexpr cudaDataType_t dataType<bf16>() {
  return CUDA_R_16BF;
}

// The largest power of two (up to 256, cuBLASLt's default requirement) that
// divides the address: algorithms are chosen for the alignment the buffers
// really have.
uint32_t alignmentOf(const void* p) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  uint32_t alignment = 256;
  while (alignment > 1 && address % alignment != 0) alignment /= 2;
  return alignment;
}

// Everything a plan depends on: ops, sizes, leading dims, dtypes, epilogue
// and the buffers' alignment.
using PlanKey = std::array<int64_t, 14>;

struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr;
  cublasLtMatrixLayout_t b = nullptr;
  cublasLtMatrixLayout_t d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  // False when the bias was requested but no algorithm offers the bias
  // epilogue for this shape; the bias is then added by biasAdd.
  bool bias_in_epilogue = false;

  void destroy() {
    if (d != nullptr) cublasLtMatrixLayoutDestroy(d);
    if (b != nullptr) cublasLtMatrixLayoutDestroy(b);
    if (a != nullptr) cublasLtMatrixLayoutDestroy(a);
    if (desc != nullptr) cublasLtMatmulDescDestroy(desc);
  }
};

// One column-major product D[m, n] = op(A)[m, k] op(B)[k, n].
struct GemmCall {
  const char* op;
  cublasOperation_t op_a;
  cublasOperation_t op_b;
  int64_t m;
  int64_t n;
  int64_t k;
  const void* a;
  int64_t lda;
  const void* b;
  int64_t ldb;
  void* d;
  cudaDataType_t in_type;
  cudaDataType_t out_type;
  const void* bias;  // length m, or null
};

}  // namespace

struct CublasLtHandle::Impl {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  std::map<PlanKey, Plan> plans;

  ~Impl() {
    for (auto& [key, plan] : plans) plan.destroy();
    if (workspace != nullptr) cudaFree(workspace);
    if (handle != nullptr) cublasLtDestroy(handle);
  }
};

CublasLtHandle::CublasLtHandle(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CublasLtHandle::~CublasLtHandle() = default;

size_t CublasLtHandle::cachedPlans() const { return impl_->plans.size(); }

Status CublasLtHandle::create(std::unique_ptr<CublasLtHandle>* handle, size_t workspace_bytes) {
  auto impl = std::make_unique<Impl>();
  if (Status s = Status::fromCublas(cublasLtCreate(&impl->handle), "cublasLtCreate"); !s.ok()) {
    impl->handle = nullptr;
    return s;
  }
  if (workspace_bytes > 0) {
    if (Status s = Status::fromCuda(
            cudaMalloc(&impl->workspace, workspace_bytes),
            "cuBLASLt workspace: cudaMalloc of " + std::to_string(workspace_bytes) + " bytes");
        !s.ok()) {
      impl->workspace = nullptr;
      return s;
    }
  }
  impl->workspace_bytes = workspace_bytes;
  handle->reset(new CublasLtHandle(std::move(impl)));
  return Status();
}

namespace {

Status makePlan(CublasLtHandle::Impl& impl, const GemmCall& call, bool with_bias, uint32_t align_a,
                uint32_t align_b, uint32_t align_d, Plan* plan) {
  const std::string what = std::string(call.op) + ": ";
  auto check = [&](cublasStatus_t s, const char* step) {
    return Status::fromCublas(s, what + step);
  };
  if (Status s = check(cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
                       "cublasLtMatmulDescCreate");
      !s.ok()) {
    return s;
  }
  if (Status s = check(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                                      &call.op_a, sizeof(call.op_a)),
                       "set TRANSA");
      !s.ok()) {
    return s;
  }
  if (Status s = check(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                                      &call.op_b, sizeof(call.op_b)),
                       "set TRANSB");
      !s.ok()) {
    return s;
  }
  if (with_bias) {
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    if (Status s = check(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                                        &epilogue, sizeof(epilogue)),
                         "set EPILOGUE");
        !s.ok()) {
      return s;
    }
  }
  // Layouts describe the stored matrices, before op_a / op_b.
  const bool a_plain = call.op_a == CUBLAS_OP_N;
  const bool b_plain = call.op_b == CUBLAS_OP_N;
  if (Status s = check(cublasLtMatrixLayoutCreate(&plan->a, call.in_type, a_plain ? call.m : call.k,
                                                  a_plain ? call.k : call.m, call.lda),
                       "layout A");
      !s.ok()) {
    return s;
  }
  if (Status s = check(cublasLtMatrixLayoutCreate(&plan->b, call.in_type, b_plain ? call.k : call.n,
                                                  b_plain ? call.n : call.k, call.ldb),
                       "layout B");
      !s.ok()) {
    return s;
  }
  if (Status s = check(cublasLtMatrixLayoutCreate(&plan->d, call.out_type, call.m, call.n, call.m),
                       "layout D");
      !s.ok()) {
    return s;
  }
  cublasLtMatmulPreference_t preference = nullptr;
  if (Status s = check(cublasLtMatmulPreferenceCreate(&preference), "preference"); !s.ok()) {
    return s;
  }
  const uint64_t workspace_bytes = impl.workspace_bytes;
  cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                       &workspace_bytes, sizeof(workspace_bytes));
  cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                       &align_a, sizeof(align_a));
  cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                       &align_b, sizeof(align_b));
  cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                       &align_d, sizeof(align_d));
  cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                       &align_d, sizeof(align_d));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t heuristic = cublasLtMatmulAlgoGetHeuristic(
      impl.handle, plan->desc, plan->a, plan->b, plan->d, plan->d, preference, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(preference);
  if (heuristic != CUBLAS_STATUS_SUCCESS && heuristic != CUBLAS_STATUS_NOT_SUPPORTED) {
    return check(heuristic, "cublasLtMatmulAlgoGetHeuristic");
  }
  if (found == 0) {
    return Status::fromCublas(CUBLAS_STATUS_NOT_SUPPORTED,
                              what + "no cuBLASLt algorithm for m=" + std::to_string(call.m) +
                                  " n=" + std::to_string(call.n) + " k=" + std::to_string(call.k) +
                                  (with_bias ? " with the bias epilogue" : ""));
  }
  plan->algo = result.algo;
  plan->bias_in_epilogue = with_bias;
  return Status();
}

// The cached plan for `call`, made on first use. With a bias it first tries
// the bias epilogue and falls back to a plain plan.
Status planFor(CublasLtHandle::Impl& impl, const GemmCall& call, const Plan** out) {
  const uint32_t align_a = alignmentOf(call.a);
  const uint32_t align_b = alignmentOf(call.b);
  const uint32_t align_d = alignmentOf(call.d);
  // The epilogue reads the bias with vector loads; a bias that is not
  // 16-byte aligned (a view into a larger buffer) goes through biasAdd.
  const bool epilogue_bias = call.bias != nullptr && alignmentOf(call.bias) >= 16;
  const PlanKey key = {call.op_a,     call.op_b, call.m,       call.n,        call.k,
                       call.lda,      call.ldb,  call.in_type, call.out_type, call.bias != nullptr,
                       epilogue_bias, align_a,   align_b,      align_d};
  if (auto it = impl.plans.find(key); it != impl.plans.end()) {
    *out = &it->second;
    return Status();
  }
  Plan plan;
  if (Status s = makePlan(impl, call, epilogue_bias, align_a, align_b, align_d, &plan); !s.ok()) {
    plan.destroy();
    if (!epilogue_bias || s.cublasStatus() != CUBLAS_STATUS_NOT_SUPPORTED) return s;
    plan = Plan();
    if (Status plain = makePlan(impl, call, false, align_a, align_b, align_d, &plan); !plain.ok()) {
      plan.destroy();
      return plain;
    }
  }
  *out = &impl.plans.emplace(key, plan).first->second;
  return Status();
}

template <typename TOut>
Status runGemm(CublasLtHandle& handle, const GemmCall& call, cudaStream_t stream) {
  CublasLtHandle::Impl& impl = handle.impl();
  const Plan* plan = nullptr;
  if (Status s = planFor(impl, call, &plan); !s.ok()) return s;
  if (plan->bias_in_epilogue) {
    // The descriptor is cached; only the bias pointer changes per call.
    if (Status s = Status::fromCublas(
            cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                           &call.bias, sizeof(call.bias)),
            std::string(call.op) + ": set BIAS_POINTER");
        !s.ok()) {
      return s;
    }
  }
  const float alpha = 1.0f;
  const float beta = 0.0f;
  if (Status s = Status::fromCublas(
          cublasLtMatmul(impl.handle, plan->desc, &alpha, call.a, plan->a, call.b, plan->b, &beta,
                         call.d, plan->d, call.d, plan->d, &plan->algo, impl.workspace,
                         impl.workspace_bytes, stream),
          std::string(call.op) + ": cublasLtMatmul");
      !s.ok()) {
    return s;
  }
  if (call.bias != nullptr && !plan->bias_in_epilogue) {
    // Column-major D[m, n] is the row-major [n rows, m features] output.
    auto* d = static_cast<TOut*>(call.d);
    return biasAdd(d, static_cast<const TOut*>(call.bias), d, call.n, call.m, stream);
  }
  return Status();
}

}  // namespace

template <typename TIn, typename TOut>
Status linear(CublasLtHandle& handle, const TIn* x, const TIn* w, const TOut* bias, TOut* y,
              int64_t rows, int64_t in, int64_t out, cudaStream_t stream) {
  // y^T[out, rows] = w^T[out, in] x^T[in, rows] in column-major terms.
  return runGemm<TOut>(handle,
                       GemmCall{"linear", CUBLAS_OP_N, CUBLAS_OP_N, out, rows, in, w, out, x, in, y,
                                dataType<TIn>(), dataType<TOut>(), bias},
                       stream);
}

template <typename TIn, typename TOut>
Status matmul(CublasLtHandle& handle, const TIn* lhs, const TIn* rhs, TOut* out, int64_t rows,
              int64_t k, int64_t n, cudaStream_t stream) {
  return runGemm<TOut>(handle,
                       GemmCall{"matmul", CUBLAS_OP_N, CUBLAS_OP_N, n, rows, k, rhs, n, lhs, k, out,
                                dataType<TIn>(), dataType<TOut>(), nullptr},
                       stream);
}

template <typename TIn, typename TOut>
Status matmulTransposeRhs(CublasLtHandle& handle, const TIn* lhs, const TIn* rhs, TOut* out,
                          int64_t rows, int64_t k, int64_t n, cudaStream_t stream) {
  // rhs[n, k] row-major is column-major [k, n]; transposed it is [n, k].
  return runGemm<TOut>(handle,
                       GemmCall{"matmulTransposeRhs", CUBLAS_OP_T, CUBLAS_OP_N, n, rows, k, rhs, k,
                                lhs, k, out, dataType<TIn>(), dataType<TOut>(), nullptr},
                       stream);
}

template <typename TIn, typename TOut>
Status matmulTransposeLhs(CublasLtHandle& handle, const TIn* lhs, const TIn* rhs, TOut* out,
                          int64_t rows, int64_t m, int64_t n, cudaStream_t stream) {
  // out^T[n, m] = rhs^T[n, rows] (lhs^T[m, rows])^T, summing over rows.
  return runGemm<TOut>(handle,
                       GemmCall{"matmulTransposeLhs", CUBLAS_OP_N, CUBLAS_OP_T, n, m, rows, rhs, n,
                                lhs, m, out, dataType<TIn>(), dataType<TOut>(), nullptr},
                       stream);
}

#define LOOM_INSTANTIATE_GEMM(TIn, TOut)                                                         \
  template Status linear<TIn, TOut>(CublasLtHandle&, const TIn*, const TIn*, const TOut*, TOut*, \
                                    int64_t, int64_t, int64_t, cudaStream_t);                    \
  template Status matmul<TIn, TOut>(CublasLtHandle&, const TIn*, const TIn*, TOut*, int64_t,     \
                                    int64_t, int64_t, cudaStream_t);                             \
  template Status matmulTransposeRhs<TIn, TOut>(CublasLtHandle&, const TIn*, const TIn*, TOut*,  \
                                                int64_t, int64_t, int64_t, cudaStream_t);        \
  template Status matmulTransposeLhs<TIn, TOut>(CublasLtHandle&, const TIn*, const TIn*, TOut*,  \
                                                int64_t, int64_t, int64_t, cudaStream_t);

LOOM_INSTANTIATE_GEMM(float, float)
LOOM_INSTANTIATE_GEMM(bf16, bf16)
LOOM_INSTANTIATE_GEMM(bf16, float)

#undef LOOM_INSTANTIATE_GEMM

}  // namespace loom::runtime::cuda
