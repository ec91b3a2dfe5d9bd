#include "implementations.hpp"

#include "attention_reference.hpp"
#include "device.hpp"
#include "executor.hpp"
#include "host.hpp"

#include <tuple>
#include "flashlab/error.hpp"
#include "flashlab/fp8.hpp"

namespace flashlab::harness {
namespace {

std::vector<Implementation> build() {
  std::vector<Implementation> list;

  list.push_back({
      "reference",
      "naive attention in the input precision: S and P materialized (the baseline the tolerance is set by)",
      true,
      false,
      [](const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v) {
        auto r = reference::forward_lowp(p, q, k, v);
        return ForwardOut{std::move(r.o), std::move(r.lse)};
      },
      [](const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor&, const Tensor&,
         const Tensor& d_o) {
        auto r = reference::backward_lowp(p, q, k, v, d_o);
        return BackwardOut{std::move(r.dq), std::move(r.dk), std::move(r.dv)};
      },
      [](const Problem& p) {
        try {
          reference::check_memory(p, reference::Precision::input, true, {});
          return std::string();
        } catch (const Error& e) {
          return std::string("skipped: ") + e.what();
        }
      },
  });

  struct TiledEntry {
    const char* name;
    const char* what;
    tiled::Order forward, backward;
  };
  for (const TiledEntry& e : {
           TiledEntry{"tiled-fa1",
                      "tiled online softmax, FA1 order (Algorithms 1 and 4): K/V blocks outer, O/l/m and dQ round trips",
                      tiled::Order::fa1, tiled::Order::fa1_backward},
           TiledEntry{"tiled-fa2",
                      "tiled online softmax, FA2 order: Q blocks outer, normalization deferred, LSE stored; FA2 backward",
                      tiled::Order::fa2, tiled::Order::backward},
           TiledEntry{"tiled-fa2-deterministic",
                      "tiled-fa2 with the deterministic backward: a dK/dV pass without dQ, then a Q-outer dQ pass",
                      tiled::Order::fa2, tiled::Order::dkdv},
       }) {
    const tiled::Order order = e.forward, bwd = e.backward;
    list.push_back({
        e.name,
        e.what,
        true,
        false,
        [order](const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v) {
          auto r = tiled::forward(p, q, k, v, tiled::kCpuDefault, order);
          return ForwardOut{std::move(r.o), std::move(r.lse)};
        },
        [bwd](const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
              const Tensor& lse, const Tensor& d_o) {
          auto r = tiled::backward(p, q, k, v, o, lse, d_o, tiled::kCpuDefault, nullptr, bwd);
          return BackwardOut{std::move(r.dq), std::move(r.dk), std::move(r.dv)};
        },
        [](const Problem&) { return std::string(); },
    });
  }

  // GPU implementations (gpu/): each reports "skipped: no CUDA device" where there is none.
  struct GpuEntry {
    const char* name;
    const char* kernel;
    const char* what;
    bool backward, deterministic;
    bool fp8 = false;
  };
  for (const GpuEntry& e : {
           GpuEntry{"gpu-standard", "standard", "cuBLAS QK^T, a softmax kernel, cuBLAS PV: S and P in HBM (forward)",
                    false, false},
           GpuEntry{"gpu-fa1-minimal", "fa1_minimal", "Algorithm 1 in plain CUDA, fp32 scalar (forward)", false,
                    false},
           GpuEntry{"gpu-fa2", "fa2",
                    "FlashAttention-2 on tensor cores (mma.sync, ldmatrix, cp.async); backward with fp32 dQ atomics",
                    true, false},
           GpuEntry{"gpu-fa2-deterministic", "fa2",
                    "gpu-fa2 with the deterministic backward: dQ from its own Q-outer kernel, no atomics", true,
                    true},
           GpuEntry{"gpu-fa3", "fa3",
                    "FlashAttention-3-style Hopper kernels (TMA, wgmma, warp-specialized; sm_90): persistent forward, "
                    "backward with dQ by bulk reductions",
                    true, false},
           GpuEntry{"gpu-fa3-deterministic", "fa3",
                    "gpu-fa3 with the deterministic backward: dQ's reductions in a fixed order of the K/V blocks",
                    true, true},
           GpuEntry{"gpu-fa3-fp8", "fa3_fp8",
                    "fa3's forward on FP8: Q, K, V in e4m3 with a descale a tensor, P in e4m3, O in bf16 "
                    "(judged on the dequantized inputs, against a baseline with P in e4m3)",
                    false, false, true},
       }) {
    const std::string k = e.kernel;
    const bool det = e.deterministic;
    Implementation impl{
        e.name,
        e.what,
        e.backward,
        true,
        [k](const Problem& p, const Tensor& q, const Tensor& kk, const Tensor& v) {
          auto r = gpu::run_forward(k, p, q, kk, v);
          return ForwardOut{std::move(r.o), std::move(r.lse)};
        },
        nullptr,
        [k](const Problem& p) {
          // A mask function a kernel cannot take is refused before the device is asked, so the reason
          // shows with or without a GPU (gpu/host.hpp mask_unsupported).
          if (const std::string why = gpu::mask_unsupported(k, p); !why.empty()) return why;
          return gpu::unsupported(k, p);
        },
    };
    if (e.fp8)
      impl.quantized = [](const Tensor& t) {
        const fp8::Quantized x = fp8::quantize(t.data);
        Tensor values = t;
        for (size_t i = 0; i < values.data.size(); ++i) values.data[i] = x.value(i);
        return values;
      };
    if (e.backward) {
      impl.backward_unsupported = [k](const Problem& p) {
        if (const std::string why = gpu::mask_unsupported(k, p); !why.empty()) return why;
        return gpu::backward_unsupported(k, p);
      };
      impl.backward = [k, det](const Problem& p, const Tensor& q, const Tensor& kk, const Tensor& v, const Tensor& o,
                               const Tensor& lse, const Tensor& d_o) {
        auto r = gpu::run_backward(k, p, q, kk, v, o, lse, d_o, det);
        return BackwardOut{std::move(r.dq), std::move(r.dk), std::move(r.dv)};
      };
    }
    list.push_back(std::move(impl));
  }
  return list;
}

}  // namespace

const std::vector<Implementation>& implementations() {
  static const std::vector<Implementation> list = build();
  return list;
}

std::string implementation_names() {
  std::string names;
  for (const auto& impl : implementations()) names += (names.empty() ? "" : ", ") + impl.name;
  return names;
}

const Implementation& find_implementation(const std::string& name) {
  for (const auto& impl : implementations())
    if (impl.name == name) return impl;
  throw Error("unknown implementation '" + name + "': expected one of " + implementation_names());
}

}  // namespace flashlab::harness
