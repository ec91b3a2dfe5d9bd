// The kernel families of shapes.hpp by name, for `flashlab shapes` and programs that take an
// algorithm's name: which kernels a pass launches, and whether the problem and device suit them.
#include "shapes.hpp"

namespace flashlab::gpu {
namespace {

bool fail(std::string* error, const std::string& what) {
  if (error) *error = what;
  return false;
}

// Appends the kernels `algo` launches for the pass; false (with *error) when it cannot run it.
bool add_rows(const std::string& algo, bool backward, int head_dim, const std::string& dtype, int smem_per_block,
              std::vector<KernelShapeRow>& rows, std::string* error) {
  const std::string pass = backward ? "bwd" : "fwd";
  std::vector<TileShape> shapes;
  if (algo == "standard") {
    if (backward) return fail(error, "standard has no backward kernel (gpu/standard.cu is forward only); use --pass fwd");
    shapes = {standard_softmax_shape(head_dim)};
  } else if (algo == "fa1-minimal") {
    if (backward) return fail(error, "fa1-minimal has no backward kernel (gpu/fa1_minimal.cu is Algorithm 1 only); use --pass fwd");
    shapes = {fa1_minimal_shape(head_dim)};
  } else if (algo == "decode") {
    if (backward) return fail(error, "decode has no backward kernel (gpu/decode/ is inference); use --pass fwd");
    if (dtype != "bf16" && dtype != "fp16") return fail(error, "decode runs bf16 and fp16; use --dtype bf16 or fp16");
    shapes = {decode_split_shape(head_dim)};
  } else if (dtype == "fp8") {  // the FP8 forward is fa3's only
    if (algo != "fa3" || backward)
      return fail(error, "fp8 is fa3's forward only (gpu/fa3/fa3_fwd.cu fa3_fp8_forward); use --algo fa3 --pass fwd");
    shapes = {fa3_fp8_forward_shape(head_dim)};
  } else if (algo == "fa2" || algo == "fa3") {
    if (dtype == "fp32")
      return fail(error, algo + " runs bf16 and fp16, not fp32 (fa1-minimal runs fp32); use --dtype bf16 or fp16");
    if (algo == "fa3") {
      shapes = {backward ? fa3_backward_shape(head_dim) : fa3_forward_shape(head_dim)};
    } else if (backward) {
      shapes = {fa2_backward_shape(head_dim, smem_per_block), fa2_backward_dq_shape(head_dim)};
    } else {
      shapes = {fa2_forward_shape(head_dim)};
    }
  } else {
    std::string names;
    for (const std::string& n : shape_algos()) names += n + ", ";
    return fail(error, "unknown algorithm '" + algo + "' (expected one of " + names + "or all)");
  }
  for (const TileShape& s : shapes) {
    if (!s.supported())
      return fail(error, algo + ": head dim " + std::to_string(head_dim) + " is not supported: " + s.why);
    if (s.smem_bytes > smem_per_block)
      return fail(error, algo + " " + pass + ": " + s.kernel + " at head dim " + std::to_string(s.head_dim) + " needs " +
                             std::to_string(s.smem_bytes) + " bytes of shared memory per block, more than the " +
                             std::to_string(smem_per_block) + " this device allows; it cannot run there");
    rows.push_back({algo, pass, s});
  }
  return true;
}

}  // namespace

const std::vector<std::string>& shape_algos() {
  static const std::vector<std::string> names = {"standard", "fa1-minimal", "fa2", "fa3", "decode"};
  return names;
}

std::vector<KernelShapeRow> kernel_shapes(const std::string& algo, bool backward, int head_dim, const std::string& dtype,
                                          int smem_per_block, std::string* error) {
  std::vector<KernelShapeRow> rows;
  if (dtype != "bf16" && dtype != "fp16" && dtype != "fp32" && dtype != "fp8") {
    fail(error, "unknown dtype '" + dtype + "' (expected bf16, fp16, fp32, or fp8 for fa3's forward)");
    return {};
  }
  if (smem_per_block <= 0) {
    fail(error, "shared memory per block must be positive, not " + std::to_string(smem_per_block));
    return {};
  }
  if (algo != "all") {
    if (!add_rows(algo, backward, head_dim, dtype, smem_per_block, rows, error)) return {};
    return rows;
  }
  // all: the algorithms with this pass and dtype; a head dim or a shared-memory size one of them
  // cannot take is still an error.
  for (const std::string& name : shape_algos()) {
    if (dtype == "fp8" && name != "fa3") continue;  // FP8: fa3's forward only
    if (backward && name != "fa2" && name != "fa3") continue;
    // fa3's backward is a Hopper kernel (227 KiB of shared memory at d = 256): `all` lists it where it runs.
    if (backward && name == "fa3" &&
        (!fa3_backward_shape(head_dim).supported() || fa3_backward_shape(head_dim).smem_bytes > smem_per_block))
      continue;
    if (dtype == "fp32" && (name == "fa2" || name == "fa3" || name == "decode")) continue;
    if (!add_rows(name, backward, head_dim, dtype, smem_per_block, rows, error)) return {};
  }
  if (rows.empty())  // the backward in fp32: fa2's and fa3's backward kernels take bf16 / fp16
    fail(error, std::string("no algorithm has a ") + (backward ? "backward" : "forward") + " kernel for " + dtype +
                    " (fa2's and fa3's backward take bf16 and fp16)");
  return rows;
}

}  // namespace flashlab::gpu
