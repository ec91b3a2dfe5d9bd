// The toolkit beside attention, as text a caller parses: the implementations, the simulator's records
// (the JSON `flashlab estimate --format json` prints), the tiled walk's events (the JSON lines
// `flashlab trace` prints, through the same TraceWriter) and the harness's check.
#include <nlohmann/json.hpp>
#include <sstream>

#include "api.hpp"
#include "check.hpp"
#include "executor.hpp"
#include "flashlab/error.hpp"
#include "gpu_spec.hpp"
#include "report.hpp"
#include "trace_writer.hpp"

namespace flashlab::capi {

std::string implementations_json() {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& impl : harness::implementations())
    list.push_back({{"name", impl.name}, {"description", impl.description}, {"memory", "host"},
                    {"has_backward", impl.has_backward}, {"needs_gpu", impl.needs_gpu}});
  const char* what[][2] = {{"fa2", "gpu/fa2: FlashAttention-2 forward and backward (mma.sync), bf16/fp16"},
                           {"fa3", "gpu/fa3: the Hopper forward and backward (TMA, wgmma, warp-specialized), bf16/fp16, sm_90"},
                           {"fa3-fp8", "gpu/fa3: the Hopper FP8 forward, e4m3 q, k, v with a descale each, bf16 o, sm_90"},
                           {"standard", "gpu/standard.cu: cuBLAS QK^T, softmax, cuBLAS PV (forward)"}};
  if (built_with_cuda())
    for (const auto& [name, description] : what) {
      const bool backward = std::string(name) == "fa2" || std::string(name) == "fa3";
      list.push_back({{"name", name}, {"description", description}, {"memory", "device"},
                      {"has_backward", backward}, {"needs_gpu", true}});
    }
  return list.dump();
}

std::string estimate_json(const Problem& p, const std::string& gpu_name, const std::string& algo,
                          const std::string& pass, const std::string& impl) {
  const sim::GpuSpec gpu = sim::load_gpu(gpu_name);
  auto algos = sim::parse_algos(algo, &gpu);
  sim::Options options;
  options.impl = sim::parse_impl(impl);
  const Pass parsed = parse_pass(pass);
  sim::leave_out_unbuilt(algos, algo, options.impl, parsed != Pass::fwd, p.head_dim, nullptr);
  return sim::to_json(sim::estimate_all(p, gpu, algos, parsed, options));
}

std::string walk_jsonl(const Problem& p, const std::string& order_name, int64_t br, int64_t bc,
                       const flashlab_tensors* inputs) {
  if (br <= 0 || bc <= 0)
    throw Error("walk: the tile Br x Bc must be positive, got " + std::to_string(br) + " x " + std::to_string(bc));
  const tiled::Order order = tiled::parse_order(order_name);
  harness::Inputs in = harness::random_inputs(p, p.seed);  // what `flashlab trace` walks
  if (inputs) {
    const flashlab_tensors t = checked_tensors(inputs);
    const auto copy = [&](const void* src, const char* name, Tensor& dst) {
      if (!src) throw Error(std::string("walk: tensors->") + name + " is NULL (pass no tensors at all for random inputs)");
      const float* f = static_cast<const float*>(src);
      for (float& x : dst.data) x = round_to(p.dtype, *f++);
    };
    copy(t.q, "q", in.q);
    copy(t.k, "k", in.k);
    copy(t.v, "v", in.v);
    if (tiled::is_backward(order)) copy(t.d_o, "d_o", in.d_o);
  }
  std::ostringstream out;
  tiled::TraceWriter writer(out, tiled::TraceWriter::Format::jsonl);
  tiled::run_order(p, in.q, in.k, in.v, in.d_o, {br, bc}, order, &writer);
  return out.str();
}

std::string check_json(const std::string& impl_name, const Problem& p, const std::string& pass_name) {
  const harness::Implementation& impl = harness::find_implementation(impl_name);
  const Pass pass = parse_pass(pass_name);
  const harness::Inputs in = harness::random_inputs(p, p.seed);
  const harness::Baseline base = harness::compute_baseline(p, in, pass);
  const harness::CheckResult r = harness::check(impl, p, in, base, pass);
  nlohmann::json fields = nlohmann::json::array();
  for (const auto& f : r.fields)
    fields.push_back({{"field", f.field}, {"error", f.error}, {"tolerance", f.tolerance}, {"pass", f.pass}});
  return nlohmann::json{{"impl", r.impl},           {"problem", p.describe()},      {"skipped", r.skipped},
                        {"pass", r.pass()},         {"fields", fields},             {"fwd_seconds", r.fwd_seconds},
                        {"bwd_seconds", r.bwd_seconds}}
      .dump();
}

}  // namespace flashlab::capi
