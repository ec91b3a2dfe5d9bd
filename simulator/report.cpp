#include "report.hpp"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

namespace flashlab::sim {
namespace {

// Column name and value of every field, in one place for JSON and CSV.
std::vector<std::pair<const char*, nlohmann::json>> fields(const Estimate& e) {
  return {{"algo", e.algo}, {"gpu", e.gpu}, {"pass", e.pass}, {"seqlen", e.seqlen_q}, {"seqlen_k", e.seqlen_k},
          {"head_dim", e.head_dim}, {"block_m", e.block_m}, {"block_n", e.block_n}, {"flops", e.flops},
          {"exp_ops", e.exp_ops}, {"other_flops", e.other_flops}, {"hbm_read_bytes", e.hbm_read_bytes},
          {"hbm_write_bytes", e.hbm_write_bytes}, {"l2_bytes", e.l2_bytes}, {"sram_bytes", e.sram_bytes},
          {"ctas", e.ctas}, {"ctas_per_sm", e.ctas_per_sm}, {"waves", e.waves}, {"occupancy", e.occupancy},
          {"peak_hbm_bytes", e.peak_hbm_bytes}, {"t_tensor_s", e.t_tensor}, {"t_smem_s", e.t_smem}, {"t_exp_s", e.t_exp},
          {"t_fp32_s", e.t_fp32}, {"t_hbm_s", e.t_hbm}, {"t_l2_s", e.t_l2}, {"t_launch_s", e.t_launch}, {"t_wait_s", e.t_wait},
          {"time_s", e.time_s}, {"bound", e.bound}, {"speedup_vs_standard", e.speedup_vs_standard}};
}

}  // namespace

std::string to_json(const std::vector<Estimate>& estimates) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& e : estimates) {
    nlohmann::json row = nlohmann::json::object();
    for (auto& [k, v] : fields(e)) row[k] = v;
    list.push_back(row);
  }
  return list.dump(2) + "\n";
}

std::string to_csv(const std::vector<Estimate>& estimates) {
  std::ostringstream out;
  if (estimates.empty()) return "";
  bool first = true;
  for (auto& [k, v] : fields(estimates.front())) out << (first ? "" : ",") << k, first = false;
  out << "\n";
  for (const auto& e : estimates) {
    first = true;
    for (auto& [k, v] : fields(e)) {
      out << (first ? "" : ",") << (v.is_string() ? v.get<std::string>() : v.dump());
      first = false;
    }
    out << "\n";
  }
  return out.str();
}

std::string to_table(const std::vector<Estimate>& estimates) {
  std::ostringstream out;
  char line[256];
  std::snprintf(line, sizeof line, "%-9s %7s %9s %10s %10s %10s %9s %10s %-7s %8s %10s\n", "algo", "seqlen", "tiles",
                "TFLOP", "HBM GB", "L2 GB", "SRAM KiB", "time ms", "bound", "speedup", "peak GB");
  out << line;
  for (const auto& e : estimates) {
    const std::string tiles = e.block_m ? std::to_string(e.block_m) + "x" + std::to_string(e.block_n) : "-";
    std::snprintf(line, sizeof line, "%-9s %7lld %9s %10.3f %10.3f %10.3f %9.1f %10.4f %-7s %7.2fx %10.3f\n",
                  e.algo.c_str(), static_cast<long long>(e.seqlen_q), tiles.c_str(), e.flops / 1e12,
                  (e.hbm_read_bytes + e.hbm_write_bytes) / 1e9, e.l2_bytes / 1e9, e.sram_bytes / 1024,
                  e.time_s * 1e3, e.bound.c_str(), e.speedup_vs_standard, e.peak_hbm_bytes / 1e9);
    out << line;
  }
  return out.str();
}

}  // namespace flashlab::sim
