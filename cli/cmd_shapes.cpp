// flashlab shapes: the tile shapes flashlab's GPU kernels launch (gpu/shapes.hpp), for an algorithm,
// a pass and head dims, as a table with the reason for each, or as JSON for scripts. CPU only: it
// reads the shape functions, not a GPU; the device's shared memory per block (which picks fa2's
// backward tiles) comes from a GPU preset.
#include <cstdio>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "flashlab/error.hpp"
#include "flashlab/pass.hpp"
#include "gpu_spec.hpp"
#include "shapes.hpp"

namespace flashlab::cli {
namespace {

struct Row {
  int asked_head_dim;
  gpu::KernelShapeRow r;
};

void print_table(const std::vector<Row>& rows, const std::string& gpu, int smem_per_block, const std::string& dtype) {
  std::printf("kernel tile shapes (gpu/shapes.hpp), %s, for %s (%d bytes of shared memory per block)\n",
              dtype.c_str(), gpu.c_str(), smem_per_block);
  std::printf("%-12s %-4s %4s %8s %4s %4s %5s %7s %6s %9s %5s %10s  %s\n", "algo", "pass", "d", "compiled", "Br",
              "Bc", "warps", "threads", "stages", "mma_tiles", "pairs", "smem_bytes", "kernel");
  for (const Row& row : rows) {
    const gpu::TileShape& s = row.r.shape;
    std::printf("%-12s %-4s %4d %8d %4d %4d %5d %7d %6d %9d %5s %10d  %s\n", row.r.algo.c_str(), row.r.pass.c_str(),
                row.asked_head_dim, s.head_dim, s.block_m, s.block_n, s.warps, s.threads, s.stages, s.mma_tiles,
                s.warp_pairs ? "yes" : "no", s.smem_bytes, s.kernel);
  }
  std::printf("why:\n");
  for (const Row& row : rows) {
    const std::string kernel = row.r.shape.kernel, function = kernel.substr(0, kernel.find(' '));
    std::printf("  %s %s d=%d, %s: %s\n", row.r.algo.c_str(), row.r.pass.c_str(), row.asked_head_dim, function.c_str(),
                row.r.shape.why);
  }
  std::printf("(Br: query rows a CTA, or a step of the backward's dkdv; Bc: keys a K/V block, 0 a whole row of S; "
              "mma_tiles: 16-row MMA tiles a warp)\n");
}

nlohmann::json to_json(const std::vector<Row>& rows, const std::string& gpu, int smem_per_block,
                       const std::string& dtype) {
  nlohmann::json out = nlohmann::json::array();
  for (const Row& row : rows) {
    const gpu::TileShape& s = row.r.shape;
    out.push_back({{"algo", row.r.algo},
                   {"pass", row.r.pass},
                   {"head_dim", row.asked_head_dim},
                   {"compiled_head_dim", s.head_dim},
                   {"dtype", dtype},
                   {"gpu", gpu},
                   {"smem_per_block", smem_per_block},
                   {"kernel", s.kernel},
                   {"block_m", s.block_m},
                   {"block_n", s.block_n},
                   {"warps", s.warps},
                   {"threads", s.threads},
                   {"stages", s.stages},
                   {"mma_tiles", s.mma_tiles},
                   {"warp_pairs", s.warp_pairs},
                   {"min_ctas_per_sm", s.min_ctas_per_sm},
                   {"smem_bytes", s.smem_bytes},
                   {"why", s.why}});
  }
  return out;
}

}  // namespace

void add_shapes(CLI::App& app) {
  struct Opts {
    std::string algo = "fa2", pass = "fwd", dtype = "bf16", gpu = "h100-sxm", gpu_file, format = "table";
    std::vector<int> head_dims = {128};
    int smem_per_block = 0;
    bool json = false;
  };
  auto opts = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("shapes", "print the tile shapes (Br, Bc, warps, threads, shared memory) flashlab's GPU "
                                           "kernels launch, and why (gpu/shapes.hpp); CPU only");
  cmd->footer("Example: flashlab shapes --algo fa2 --pass fwd+bwd --hdim 64,128,256\n"
              "         flashlab shapes --algo all --hdim 96 --gpu a100-80gb --json");
  std::string algos;
  for (const std::string& n : gpu::shape_algos()) algos += n + " | ";
  cmd->add_option("--algo", opts->algo, algos + "all")->capture_default_str();
  cmd->add_option("--pass", opts->pass, "fwd | bwd | fwd+bwd")->capture_default_str();
  cmd->add_option("--hdim,--head-dim", opts->head_dims, "head dims, comma-separated (e.g. 64,128,256)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--dtype", opts->dtype, "bf16 | fp16 | fp32 | fp8 (fa2 and fa3 take bf16 and fp16; fa1-minimal runs fp32; fp8: fa3's forward)")
      ->capture_default_str();
  cmd->add_option("--gpu", opts->gpu, "GPU preset whose shared memory per block picks fa2's backward tiles")
      ->capture_default_str();
  cmd->add_option("--gpu-file", opts->gpu_file, "a GPU description of your own (JSON, the presets' schema)");
  cmd->add_option("--smem-per-block", opts->smem_per_block, "bytes of opt-in shared memory per block (instead of --gpu's)");
  cmd->add_option("--format", opts->format, "table | json")->capture_default_str()->check(CLI::IsMember({"table", "json"}));
  cmd->add_flag("--json", opts->json, "same as --format json");
  cmd->callback([opts, cmd] {
    const Pass pass = parse_pass(opts->pass);
    int smem = opts->smem_per_block;
    std::string device = "--smem-per-block";
    if (cmd->count("--smem-per-block")) {
      if (smem <= 0) throw Error("--smem-per-block: " + std::to_string(smem) + " is not a positive byte count");
    } else {
      const sim::GpuSpec g = opts->gpu_file.empty() ? sim::load_gpu(opts->gpu) : sim::load_gpu(opts->gpu_file, true);
      smem = static_cast<int>(g.smem_per_block_bytes);
      device = g.name;
    }
    std::vector<Row> rows;
    for (const int d : opts->head_dims) {
      for (const bool backward : {false, true}) {
        if ((backward && !has_bwd(pass)) || (!backward && !has_fwd(pass))) continue;
        std::string error;
        const auto found = gpu::kernel_shapes(opts->algo, backward, d, opts->dtype, smem, &error);
        if (found.empty()) throw Error(error);
        for (const auto& r : found) rows.push_back({d, r});
      }
    }
    if (opts->json || opts->format == "json") std::cout << to_json(rows, device, smem, opts->dtype).dump(2) << "\n";
    else print_table(rows, device, smem, opts->dtype);
  });
}

}  // namespace flashlab::cli
