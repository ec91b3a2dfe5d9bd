// The GPU kernels driven from host tensors, for the shared harness and the
// CLI: upload (converting to the kernel's dtype), poison the outputs, launch,
// check every CUDA call, download. `kernel` is "standard", "fa1_minimal", "fa2", "fa3" or "fa3_fp8" (the
// FP8 forward: q, k, v quantized here to e4m3 with per-tensor descales, fp8.hpp's quantize, O in bf16).
#pragma once
#include <string>

#include "flashlab/decode_tensors.hpp"
#include "flashlab/problem.hpp"
#include "flashlab/tensor.hpp"

namespace flashlab::gpu {

struct HostForward {
  Tensor o, lse;
};

// "" when `kernel` can run `p` here, else why not (starting "skipped: " when no device is present).
std::string unsupported(const std::string& kernel, const Problem& p);
// "" when the backward of `kernel` can run `p` here, else why not: unsupported(), then what the backward
// adds (fa2's takes all the forward does; fa3's the mask functions but a dense mask).
std::string backward_unsupported(const std::string& kernel, const Problem& p);
// The part of that which needs no device: a mask function the kernel cannot take. fa2 (forward and
// backward) and fa3 (forward) take every mask kind on fixed-length batches: the built-in ones as each
// row's interval of keys (params.hpp mask_lo / mask_hi), a dense mask as its bits and the block lists at
// the kernel's own tiles (DenseBits, BlockLists). standard and fa1_minimal take none.
inline std::string mask_unsupported(const std::string& kernel, const Problem& p) {
  if (p.mask.kind == MaskKind::none) return "";
  if (kernel == "fa3_fp8")
    return "unsupported: mask kind " + to_string(p.mask.kind) + " (the FP8 forward takes causal masks and windows)";
  if (kernel != "fa2" && kernel != "fa3")
    return "unsupported: mask kind " + to_string(p.mask.kind) + " (fa2 and fa3 take mask functions)";
  if (p.varlen())
    return "unsupported: mask kind " + to_string(p.mask.kind) + " with varlen (" + kernel +
           " takes masks on fixed-length batches)";
  return "";
}
struct HostBackward {
  Tensor dq, dk, dv;
};

// The forward of `kernel` (a unsupported() name, or launch.hpp's "fa3-pack-gqa" / "fa3-no-pack-gqa") on
// host tensors, outputs poisoned before the launch.
HostForward run_forward(const std::string& kernel, const Problem& p, const Tensor& q, const Tensor& k,
                        const Tensor& v);
// The backward of `kernel` ("fa2" or "fa3") from the forward's o and lse; `deterministic` computes dQ without atomics.
HostBackward run_backward(const std::string& kernel, const Problem& p, const Tensor& q, const Tensor& k,
                          const Tensor& v, const Tensor& o, const Tensor& lse, const Tensor& d_o, bool deterministic);

// KV-cache decoding (gpu/decode/): "" when the decode kernel can run `d` here, else why not ("skipped: ..."
// without a device); run_decode uploads the caches, runs rotary + append + split + combine with
// d.num_splits, and returns O, LSE and the caches as the append left them.
std::string decode_unsupported(const DecodeProblem& d);
DecodeOutputs<float> run_decode(const DecodeProblem& d, const DecodeTensors& in);

}  // namespace flashlab::gpu
