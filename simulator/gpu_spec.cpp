#include "gpu_spec.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "flashlab/error.hpp"

namespace flashlab::sim {
namespace {

using nlohmann::json;

// The object at a dotted path such as tensor_flops_per_s.bf16, or nullptr when a step is missing.
template <typename Json>
Json* walk(Json& j, const std::string& path) {
  Json* at = &j;
  for (size_t start = 0;;) {
    const size_t dot = path.find('.', start);
    const std::string key = path.substr(start, dot - start);
    if (!at->is_object() || !at->contains(key)) return nullptr;
    at = &(*at)[key];
    if (dot == std::string::npos) return at;
    start = dot + 1;
  }
}

// The value at a dotted path, which must be a {"value": number, "source": text} object.
double number(const json& j, const std::string& path, const std::string& file) {
  const json* at = walk(j, path);
  if (!at) throw Error("GPU preset '" + file + "': missing field '" + path + "'");
  if (!at->is_object() || !at->contains("value") || !(*at)["value"].is_number())
    throw Error("GPU preset '" + file + "': field '" + path + "' must be {\"value\": number, \"source\": text}");
  if (!at->contains("source") || !(*at)["source"].is_string() || (*at)["source"].get<std::string>().empty())
    throw Error("GPU preset '" + file + "': field '" + path + "' has no source");
  const double v = (*at)["value"].get<double>();
  if (!(v >= 0)) throw Error("GPU preset '" + file + "': field '" + path + "' must be >= 0");
  return v;
}

std::string text(const json& j, const char* key, const std::string& file) {
  if (!j.contains(key) || !j[key].is_string())
    throw Error("GPU preset '" + file + "': missing text field '" + key + "'");
  return j[key].get<std::string>();
}

void apply_override(json& j, const std::string& assignment) {
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw Error("--set takes field=value (e.g. hbm_bandwidth_bytes_per_s=3e12), got '" + assignment + "'");
  const std::string path = assignment.substr(0, eq), raw = assignment.substr(eq + 1);
  double value;
  try {
    size_t used = 0;
    value = std::stod(raw, &used);
    if (used != raw.size()) throw std::invalid_argument("junk");
  } catch (const std::exception&) {
    throw Error("--set " + path + ": '" + raw + "' is not a number");
  }
  // The optional single numbers a preset may lack (parse() reads them if present) can be given here.
  static const char* const kOptional[] = {"dram_latency_s",          "l2_latency_s",
                                          "l2_reduce_bytes_per_s",   "l2_reduce_stream_bytes_per_s",
                                          "barrier_round_trip_s",    "sm_l2_read_bytes_per_s",
                                          "sm_dram_read_bytes_per_s", "fp8_convert_pairs_per_s",
                                          "hbm_copy_fraction",       "hbm_stream_start_s",
                                          "dependent_launch_s"};
  json* at = walk(j, path);
  if (!at && std::find(std::begin(kOptional), std::end(kOptional), path) != std::end(kOptional)) {
    j[path] = json{{"value", value}, {"source", "override: --set " + assignment}};
    return;
  }
  if (!at) throw Error("--set: the preset has no field '" + path + "'");
  if (!at->is_object() || !at->contains("value")) throw Error("--set: '" + path + "' is not a numeric field");
  (*at)["value"] = value;
  (*at)["source"] = "override: --set " + assignment;
}

GpuSpec parse(const json& j, const std::string& file) {
  if (!j.is_object()) throw Error("GPU preset '" + file + "': the top level must be a JSON object");
  GpuSpec g;
  g.name = text(j, "name", file);
  g.display_name = text(j, "display_name", file);
  g.architecture = text(j, "architecture", file);
  g.sm_count = number(j, "sm_count", file);
  g.clock_ghz = number(j, "clock_ghz", file);
  g.smem_per_sm_bytes = number(j, "smem_per_sm_bytes", file);
  g.smem_per_block_bytes = number(j, "smem_per_block_bytes", file);
  g.sram_per_sm_bytes = number(j, "sram_per_sm_bytes", file);
  g.registers_per_sm = number(j, "registers_per_sm", file);
  g.max_threads_per_sm = number(j, "max_threads_per_sm", file);
  g.max_blocks_per_sm = number(j, "max_blocks_per_sm", file);
  g.l2_bytes = number(j, "l2_bytes", file);
  g.l2_partitions = number(j, "l2_partitions", file);
  g.max_registers_per_thread = number(j, "max_registers_per_thread", file);
  g.l2_bandwidth = number(j, "l2_bandwidth_bytes_per_s", file);
  g.smem_bandwidth = number(j, "smem_bandwidth_bytes_per_s", file);
  g.hbm_bytes = number(j, "hbm_bytes", file);
  g.hbm_bandwidth = number(j, "hbm_bandwidth_bytes_per_s", file);
  g.hbm_achievable_fraction = number(j, "hbm_achievable_fraction", file);
  g.tensor_fp16 = number(j, "tensor_flops_per_s.fp16", file);
  g.tensor_bf16 = number(j, "tensor_flops_per_s.bf16", file);
  g.tensor_fp32 = number(j, "tensor_flops_per_s.fp32", file);
  g.tensor_fp8 = number(j, "tensor_flops_per_s.fp8", file);
  g.mma_sync_fraction = number(j, "tensor_paths.mma_sync.fraction", file);
  g.wgmma_fraction = number(j, "tensor_paths.wgmma.fraction", file);
  g.fp32_flops = number(j, "fp32_flops_per_s", file);
  g.exp_per_s = number(j, "exp_per_s", file);
  g.kernel_launch_s = number(j, "kernel_launch_s", file);
  // Optional: measured on few GPUs (simulator/validation/microbench.cu); without it no per-CTA latency.
  if (j.contains("dram_latency_s")) g.dram_latency_s = number(j, "dram_latency_s", file);
  // Optional: measured on the H100 (microbench.cu); without it a deterministic backward's turns (flashlab's
  // fa3) cannot be modelled, and estimate() says so.
  if (j.contains("l2_latency_s")) g.l2_latency_s = number(j, "l2_latency_s", file);
  // Optional: measured on the H100 (l2_reduce.cu); the same mode needs it too (a turn's dQ rows landing).
  if (j.contains("l2_reduce_bytes_per_s")) g.l2_reduce_bytes_per_s = number(j, "l2_reduce_bytes_per_s", file);
  if (j.contains("l2_reduce_stream_bytes_per_s"))
    g.l2_reduce_stream_bytes_per_s = number(j, "l2_reduce_stream_bytes_per_s", file);
  // Optional: measured on the H100 (microbench.cu); without it exchanges between warps cost nothing.
  if (j.contains("barrier_round_trip_s")) g.barrier_round_trip_s = number(j, "barrier_round_trip_s", file);
  // Optional: measured on the H100 and H200 (cold_read.cu); without it a decode call's stream starts at once.
  if (j.contains("hbm_stream_start_s")) g.hbm_stream_start_s = number(j, "hbm_stream_start_s", file);
  // Optional: measured on the H200 (dependent_launch.cu); without it a decode call's combine starts as soon as
  // its split kernel ends.
  if (j.contains("dependent_launch_s")) g.dependent_launch_s = number(j, "dependent_launch_s", file);
  // Optional: measured on the H100 (sm_read.cu); without them a starting CTA waits only the round trip.
  if (j.contains("sm_l2_read_bytes_per_s")) g.sm_l2_read_bytes_per_s = number(j, "sm_l2_read_bytes_per_s", file);
  if (j.contains("sm_dram_read_bytes_per_s"))
    g.sm_dram_read_bytes_per_s = number(j, "sm_dram_read_bytes_per_s", file);
  // Optional: measured on the H100 (cvt_e4m3.cu); without it the FP8 forward's conversion of P~ is free.
  if (j.contains("fp8_convert_pairs_per_s")) g.fp8_convert_pairs_per_s = number(j, "fp8_convert_pairs_per_s", file);
  // Optional: measured on the H100 (microbench.cu); without them phase boundaries cost nothing.
  if (j.contains("latency_s")) {
    g.latency = {number(j, "latency_s.mma_sync", file), number(j, "latency_s.ldmatrix", file),
                 number(j, "latency_s.ex2", file), number(j, "latency_s.fp32", file), number(j, "latency_s.shfl", file)};
  }
  // Optional: a measured read + write copy rate; without it elementwise kernels use the read fraction.
  g.hbm_copy_fraction = j.contains("hbm_copy_fraction") ? number(j, "hbm_copy_fraction", file) : g.hbm_achievable_fraction;
  for (auto [v, name] : {std::pair{g.sm_count, "sm_count"}, {g.clock_ghz, "clock_ghz"}, {g.l2_bytes, "l2_bytes"},
                         {g.hbm_bandwidth, "hbm_bandwidth_bytes_per_s"}, {g.fp32_flops, "fp32_flops_per_s"},
                         {g.exp_per_s, "exp_per_s"}, {g.smem_per_block_bytes, "smem_per_block_bytes"},
                         {g.l2_bandwidth, "l2_bandwidth_bytes_per_s"}, {g.l2_partitions, "l2_partitions"},
                         {g.max_registers_per_thread, "max_registers_per_thread"},
                         {g.smem_bandwidth, "smem_bandwidth_bytes_per_s"}}) {
    if (v <= 0) throw Error("GPU preset '" + file + "': field '" + name + "' must be positive");
  }
  if (g.hbm_achievable_fraction > 1 || g.hbm_achievable_fraction <= 0)
    throw Error("GPU preset '" + file + "': hbm_achievable_fraction must be in (0, 1]");
  if (g.hbm_copy_fraction > 1 || g.hbm_copy_fraction <= 0)
    throw Error("GPU preset '" + file + "': hbm_copy_fraction must be in (0, 1]");
  return g;
}

}  // namespace

double GpuSpec::tensor_peak(DType dtype) const {
  switch (dtype) {
    case DType::fp16: return tensor_fp16;
    case DType::bf16: return tensor_bf16;
    case DType::fp32: return tensor_fp32;
  }
  return 0;
}

std::string preset_dir() {
  if (const char* env = std::getenv("FLASHLAB_PRESETS")) return env;
  return FLASHLAB_PRESET_DIR;
}

std::vector<std::string> list_presets() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(preset_dir(), ec))
    if (e.path().extension() == ".json") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

GpuSpec load_gpu(const std::string& name_or_path, bool from_file, const std::vector<std::string>& overrides) {
  const std::string path = from_file ? name_or_path : preset_dir() + "/" + name_or_path + ".json";
  std::ifstream in(path);
  if (!in) {
    if (from_file) throw Error("cannot open GPU file '" + path + "'");
    std::string names;
    for (const auto& n : list_presets()) names += (names.empty() ? "" : ", ") + n;
    throw Error("unknown GPU '" + name_or_path + "': expected one of " + names + " (or --gpu-file F.json)");
  }
  json j;
  try {
    j = json::parse(in);
  } catch (const json::parse_error& e) {
    throw Error("GPU preset '" + path + "' is not valid JSON: " + e.what());
  }
  for (const auto& o : overrides) apply_override(j, o);
  return parse(j, path);
}

}  // namespace flashlab::sim
