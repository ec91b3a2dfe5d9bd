// Harness implementations on the caller's host memory: the caller's fp32 arrays are copied into
// flashlab Tensors (inputs rounded to the problem's dtype, as a GPU would read them), the
// implementation runs exactly as `flashlab check` runs it, and its outputs are copied back.
#include <algorithm>
#include <cstring>

#include "api.hpp"
#include "flashlab/error.hpp"
#include "implementations.hpp"

namespace flashlab::capi {
namespace {

const float* need(const void* ptr, const char* name, const char* pass) {
  if (!ptr)
    throw Error(std::string("tensors->") + name + " is NULL: the " + pass + " needs host arrays for " +
                (std::string(pass) == "forward" ? "q, k, v, o and lse" : "q, k, v, o, lse, d_o, dq, dk and dv"));
  return static_cast<const float*>(ptr);
}

// A caller's array of `shape`, rounded to the dtype (rounding is the identity on values already in it).
Tensor input(const void* ptr, const char* name, const char* pass, std::vector<int64_t> shape, DType dtype) {
  const float* src = need(ptr, name, pass);
  Tensor t(std::move(shape));
  std::transform(src, src + t.numel(), t.data.begin(), [dtype](float x) { return round_to(dtype, x); });
  return t;
}

void output(void* dst, const char* name, const char* pass, const Tensor& t, const std::vector<int64_t>& shape) {
  float* out = const_cast<float*>(need(dst, name, pass));
  if (t.numel() != Tensor::count(shape))
    throw Error(std::string("internal: ") + name + " came back " + shape_string(t.shape) + ", expected " +
                shape_string(shape));
  std::memcpy(out, t.ptr(), size_t(t.numel()) * sizeof(float));
}

const harness::Implementation& runnable(const std::string& name, const Problem& p) {
  const harness::Implementation& impl = harness::find_implementation(name);
  const std::string why = impl.unsupported ? impl.unsupported(p) : std::string();
  if (!why.empty()) throw Error(name + " cannot run this problem here: " + why);
  return impl;
}

}  // namespace

bool is_host_implementation(const std::string& impl) {
  for (const auto& i : harness::implementations())
    if (i.name == impl) return true;
  return false;
}

void host_forward(const std::string& name, const Problem& p, const flashlab_tensors& t) {
  const harness::Implementation& impl = runnable(name, p);
  const Tensor q = input(t.q, "q", "forward", p.q_shape(), p.dtype);
  const Tensor k = input(t.k, "k", "forward", p.k_shape(), p.dtype);
  const Tensor v = input(t.v, "v", "forward", p.v_shape(), p.dtype);
  need(t.o, "o", "forward");
  need(t.lse, "lse", "forward");
  const harness::ForwardOut out = impl.forward(p, q, k, v);
  output(t.o, "o", "forward", out.o, p.o_shape());
  output(t.lse, "lse", "forward", out.lse, p.lse_shape());
}

void host_backward(const std::string& name, const Problem& p, const flashlab_tensors& t) {
  const harness::Implementation& impl = runnable(name, p);
  if (!impl.has_backward || !impl.backward)
    throw Error(name + " has no backward: use reference, tiled-fa1 or tiled-fa2 (or gpu-fa2 with a GPU)");
  const Tensor q = input(t.q, "q", "backward", p.q_shape(), p.dtype);
  const Tensor k = input(t.k, "k", "backward", p.k_shape(), p.dtype);
  const Tensor v = input(t.v, "v", "backward", p.v_shape(), p.dtype);
  const Tensor o = input(t.o, "o", "backward", p.o_shape(), p.dtype);
  const Tensor lse = input(t.lse, "lse", "backward", p.lse_shape(), DType::fp32);
  const Tensor d_o = input(t.d_o, "d_o", "backward", p.o_shape(), p.dtype);
  need(t.dq, "dq", "backward");
  need(t.dk, "dk", "backward");
  need(t.dv, "dv", "backward");
  const harness::BackwardOut out = impl.backward(p, q, k, v, o, lse, d_o);
  output(t.dq, "dq", "backward", out.dq, p.q_shape());
  output(t.dk, "dk", "backward", out.dk, p.k_shape());
  output(t.dv, "dv", "backward", out.dv, p.v_shape());
}

}  // namespace flashlab::capi
