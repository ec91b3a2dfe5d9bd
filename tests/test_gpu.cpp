// What only the GPU kernels promise beyond the shared harness's rule: the
// deterministic backward is bit-reproducible, and the atomic one agrees with it.
// Without a CUDA device every case reports itself skipped.
#include <doctest/doctest.h>

#include <cstring>

#include "check.hpp"
#include "device.hpp"
#include "host.hpp"

using namespace flashlab;
using namespace flashlab::harness;

namespace {
bool skip_without_gpu() {
  const gpu::DeviceInfo dev = gpu::probe_device();
  if (!dev.available) MESSAGE("skipped: " << dev.reason << " (GPU kernel test not run)");
  return !dev.available;
}
bool bit_equal(const Tensor& a, const Tensor& b) {
  return a.data.size() == b.data.size() && std::memcmp(a.ptr(), b.ptr(), a.data.size() * sizeof(float)) == 0;
}
}  // namespace

TEST_CASE("GPU fa2: the deterministic backward gives the same bits every run; the atomic one agrees with it") {
  if (skip_without_gpu()) return;
  Problem p;
  p.batch = 2;
  p.heads_q = 4;
  p.heads_kv = 2;
  p.seqlen_q = 700;
  p.seqlen_k = 900;
  p.head_dim = 128;
  p.causal = true;
  p.dtype = DType::bf16;
  const Inputs in = random_inputs(p, 42);
  const gpu::HostForward f = gpu::run_forward("fa2", p, in.q, in.k, in.v);
  const gpu::HostBackward det1 = gpu::run_backward("fa2", p, in.q, in.k, in.v, f.o, f.lse, in.d_o, true);
  const gpu::HostBackward det2 = gpu::run_backward("fa2", p, in.q, in.k, in.v, f.o, f.lse, in.d_o, true);
  CHECK(bit_equal(det1.dq, det2.dq));
  CHECK(bit_equal(det1.dk, det2.dk));
  CHECK(bit_equal(det1.dv, det2.dv));
  const gpu::HostBackward atomic = gpu::run_backward("fa2", p, in.q, in.k, in.v, f.o, f.lse, in.d_o, false);
  CHECK(bit_equal(atomic.dk, det1.dk));  // the same kernel computes dK and dV either way
  CHECK(bit_equal(atomic.dv, det1.dv));
  double worst = 0, scale = 0;
  for (size_t i = 0; i < det1.dq.data.size(); ++i) {
    worst = std::max(worst, double(std::abs(atomic.dq.data[i] - det1.dq.data[i])));
    scale = std::max(scale, double(std::abs(det1.dq.data[i])));
  }
  CHECK(worst <= 0.02 * scale);  // summation order and one bf16 rounding apart
}
