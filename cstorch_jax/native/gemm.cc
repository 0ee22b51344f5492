// cstorch_sgemm: float32 GEMM as an XLA FFI custom call, computed by a BLAS `sgemm`.
//
//   C[b] = op(A[b]) . op(B[b])            (+ bias broadcast over the rows of C[b])
//
// for every batch index b, row-major buffers, op(X) = X or X^T by the attributes
// `trans_a` / `trans_b` (so a transposed operand is read in place, never copied).
// A is [batch..., M, K] (trans_a: [batch..., K, M]), B is [batch..., K, N] (trans_b:
// [batch..., N, K]), C is [batch..., M, N]; the optional bias is [N].
//
// The BLAS is not linked: Python hands over the address of a Fortran `sgemm` (torch's
// MKL) and of MKL's thread-local thread-count setter at run time
// (`cstorch_gemm_bind_blas`). The work is split over XLA's own intra-op thread pool
// (the FFI ThreadPool context): whole batch items when there are enough of them,
// otherwise row blocks of C; each block is one single-threaded sgemm call, so BLAS
// threads never compete with XLA's. The handler is asynchronous: it returns a Future
// that completes when the last block is done, so no pool thread ever blocks waiting.

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

using Sgemm32 = void (*)(const char*, const char*, const int32_t*, const int32_t*, const int32_t*, const float*,
                         const float*, const int32_t*, const float*, const int32_t*, const float*, float*,
                         const int32_t*);
using Sgemm64 = void (*)(const char*, const char*, const int64_t*, const int64_t*, const int64_t*, const float*,
                         const float*, const int64_t*, const float*, const int64_t*, const float*, float*,
                         const int64_t*);
using SetThreadsLocal = int (*)(int);

void* g_sgemm = nullptr;
bool g_ilp64 = false;
SetThreadsLocal g_set_threads_local = nullptr;

// Smallest row block worth a task of its own.
constexpr int64_t kMinRows = 16;

struct Gemm {
  const float* a;
  const float* b;
  const float* bias;
  float* c;
  int64_t batch, m, n, k;
  bool trans_a, trans_b;

  // C[item][m0:m1, :] on the calling thread, with one single-threaded sgemm.
  void Rows(int64_t item, int64_t m0, int64_t m1) const {
    if (m1 <= m0 || n == 0) return;
    const float* A = a + item * m * k;
    const float* B = b + item * k * n;
    float* C = c + item * m * n + m0 * n;
    float beta = 0.0f;
    if (bias != nullptr) {
      for (int64_t r = m0; r < m1; ++r) std::memcpy(C + (r - m0) * n, bias, sizeof(float) * n);
      beta = 1.0f;
    }
    // Column-major view: C^T (n x rows) = op(B)^T (n x k) . op(A)^T (k x rows).
    const char* tb = trans_b ? "T" : "N";
    const char* ta = trans_a ? "T" : "N";
    const float* Ablock = trans_a ? A + m0 : A + m0 * k;
    const float alpha = 1.0f;
    // BLAS wants every leading dimension >= 1, also for empty operands.
    int64_t rows = m1 - m0, lda = std::max<int64_t>(1, trans_a ? m : k), ldb = std::max<int64_t>(1, trans_b ? k : n),
            ldc = std::max<int64_t>(1, n);
    int previous = g_set_threads_local != nullptr ? g_set_threads_local(1) : 0;
    if (g_ilp64) {
      reinterpret_cast<Sgemm64>(g_sgemm)(tb, ta, &n, &rows, &k, &alpha, B, &ldb, Ablock, &lda, &beta, C, &ldc);
    } else {
      int32_t n32 = n, rows32 = rows, k32 = k, lda32 = lda, ldb32 = ldb, ldc32 = ldc;
      reinterpret_cast<Sgemm32>(g_sgemm)(tb, ta, &n32, &rows32, &k32, &alpha, B, &ldb32, Ablock, &lda32, &beta, C,
                                         &ldc32);
    }
    if (g_set_threads_local != nullptr) g_set_threads_local(previous);
  }

  // Task t of `tasks`: a contiguous range of the batch * row_blocks work units.
  void Task(int64_t t, int64_t tasks, int64_t row_blocks) const {
    int64_t units = batch * row_blocks;
    int64_t u0 = units * t / tasks, u1 = units * (t + 1) / tasks;
    for (int64_t u = u0; u < u1; ++u) {
      int64_t item = u / row_blocks, blk = u % row_blocks;
      Rows(item, m * blk / row_blocks, m * (blk + 1) / row_blocks);
    }
  }
};

ffi::Future Completed() {
  ffi::Promise promise;
  ffi::Future future(promise);
  promise.SetAvailable();
  return future;
}

ffi::Future Run(ffi::ThreadPool pool, const Gemm& g) {
  int64_t threads = std::max<int64_t>(1, pool.num_threads());
  int64_t row_blocks = 1;
  if (g.batch < threads) {
    row_blocks = std::max<int64_t>(1, std::min<int64_t>((threads + g.batch - 1) / g.batch, g.m / kMinRows));
  }
  int64_t tasks = std::min<int64_t>(threads, g.batch * row_blocks);
  if (tasks <= 1) {
    g.Task(0, 1, row_blocks);
    return Completed();
  }
  ffi::CountDownPromise done(tasks);
  ffi::Future future(done);
  for (int64_t t = 1; t < tasks; ++t) {
    pool.Schedule([g, t, tasks, row_blocks, done]() mutable {
      g.Task(t, tasks, row_blocks);
      done.CountDown();
    });
  }
  g.Task(0, tasks, row_blocks);
  done.CountDown();
  return future;
}

// Leading dims of `dims` (all but the last two) multiplied.
int64_t BatchOf(ffi::Span<const int64_t> dims) {
  int64_t batch = 1;
  for (size_t i = 0; i + 2 < dims.size(); ++i) batch *= dims[i];
  return batch;
}

Gemm Describe(const ffi::Buffer<ffi::F32>& a, const ffi::Buffer<ffi::F32>& b, ffi::Buffer<ffi::F32>* c,
              const float* bias, bool trans_a, bool trans_b) {
  auto ad = a.dimensions(), bd = b.dimensions();
  size_t ra = ad.size(), rb = bd.size();
  Gemm g;
  g.a = a.typed_data();
  g.b = b.typed_data();
  g.c = c->typed_data();
  g.bias = bias;
  g.batch = BatchOf(ad);
  g.m = trans_a ? ad[ra - 1] : ad[ra - 2];
  g.k = trans_a ? ad[ra - 2] : ad[ra - 1];
  g.n = trans_b ? bd[rb - 2] : bd[rb - 1];
  g.trans_a = trans_a;
  g.trans_b = trans_b;
  return g;
}

ffi::Future GemmImpl(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> a, ffi::Buffer<ffi::F32> b,
                     ffi::ResultBuffer<ffi::F32> c, bool trans_a, bool trans_b) {
  return Run(pool, Describe(a, b, &(*c), nullptr, trans_a, trans_b));
}

ffi::Future GemmBiasImpl(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> a, ffi::Buffer<ffi::F32> b,
                         ffi::Buffer<ffi::F32> bias, ffi::ResultBuffer<ffi::F32> c, bool trans_a, bool trans_b) {
  return Run(pool, Describe(a, b, &(*c), bias.typed_data(), trans_a, trans_b));
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(CstorchSgemm, GemmImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Attr<bool>("trans_a")
                                  .Attr<bool>("trans_b"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(CstorchSgemmBias, GemmBiasImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Attr<bool>("trans_a")
                                  .Attr<bool>("trans_b"));

// Binds the BLAS: `sgemm` is a Fortran sgemm (ILP64 when `ilp64` is non-zero),
// `set_threads_local` MKL's `MKL_Set_Num_Threads_Local` or null. Returns 0.
extern "C" __attribute__((visibility("default"))) int cstorch_gemm_bind_blas(void* sgemm, int ilp64,
                                                                             void* set_threads_local) {
  g_sgemm = sgemm;
  g_ilp64 = ilp64 != 0;
  g_set_threads_local = reinterpret_cast<SetThreadsLocal>(set_threads_local);
  return 0;
}
