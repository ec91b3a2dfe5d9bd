// The simulator: presets, counts that equal the executor's, the FlashAttention
// paper's numbers, and predictions against kernels measured on a real GPU.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>

#include "check.hpp"
#include "executor.hpp"
#include "flashlab/error.hpp"
#include "gpu_spec.hpp"
#include "model.hpp"

using namespace flashlab;
using namespace flashlab::sim;

TEST_CASE("every preset loads, and a malformed one is refused naming the field") {
  const auto names = list_presets();
  for (const char* want : {"v100-sxm2", "a100-40gb", "a100-80gb", "h100-sxm", "h100-pcie", "h200", "rtx-4090", "l4"})
    CHECK(std::find(names.begin(), names.end(), want) != names.end());
  for (const auto& n : names) CHECK_NOTHROW(load_gpu(n));
  CHECK(load_gpu("h100-sxm", false, {"hbm_bandwidth_bytes_per_s=1e12"}).hbm_bandwidth == 1e12);
  CHECK_THROWS_WITH_AS(load_gpu("h100-sxm", false, {"no_such_field=3"}), doctest::Contains("no field"), Error);
  CHECK_THROWS_WITH_AS(load_gpu("b300"), doctest::Contains("unknown GPU"), Error);

  const auto path = (std::filesystem::temp_directory_path() / "flashlab_bad_gpu.json").string();
  std::ifstream in(preset_dir() + "/h100-sxm.json");
  std::stringstream text;
  text << in.rdbuf();
  std::string body = text.str();
  const auto at = body.find("\"l2_bytes\"");
  std::ofstream(path) << body.substr(0, at) + "\"l2_bites\"" + body.substr(at + 10);
  CHECK_THROWS_WITH_AS(load_gpu(path, true), doctest::Contains("'l2_bytes'"), Error);
  std::ofstream(path) << "{ not json";
  CHECK_THROWS_WITH_AS(load_gpu(path, true), doctest::Contains("not valid JSON"), Error);
  std::filesystem::remove(path);
}

TEST_CASE("the model's SRAM <-> L2 bytes equal the tiled executor's events, byte for byte") {
  Problem p;
  p.batch = 2;
  p.heads_q = 4;
  p.heads_kv = 2;
  p.seqlen_q = 300;
  p.seqlen_k = 333;
  p.head_dim = 64;
  p.causal = true;
  p.dtype = DType::fp16;
  const GpuSpec gpu = load_gpu("a100-40gb");
  const auto in = harness::random_inputs(p, 1);
  Options o;
  o.block_m = 128;
  o.block_n = 64;
  tiled::ByteCounter fwd, bwd;
  const auto f = tiled::forward(p, in.q, in.k, in.v, {128, 64}, tiled::Order::fa2, &fwd);
  CHECK(estimate(p, gpu, Algo::fa2, Pass::fwd, o).l2_bytes == double(fwd.counts.total_load() + fwd.counts.total_store()));
  // FA2's backward kernel uses 64 x 128 tiles at this head dim.
  tiled::backward(p, in.q, in.k, in.v, f.o, f.lse, in.d_o, {64, 128}, &bwd);
  CHECK(estimate(p, gpu, Algo::fa2, Pass::bwd, o).l2_bytes == double(bwd.counts.total_load() + bwd.counts.total_store()));
}

TEST_CASE("FlashAttention paper, Fig. 2 left: A100, GPT-2 medium attention, forward + backward") {
  // N = 1024, d = 64, 16 heads, batch 64, fp16. Paper: standard 40.3 GB, FlashAttention 4.4 GB.
  Problem p;
  p.batch = 64;
  p.heads_q = p.heads_kv = 16;
  p.seqlen_q = p.seqlen_k = 1024;
  p.head_dim = 64;
  p.dtype = DType::fp16;
  const auto rows = estimate_all(p, load_gpu("a100-40gb"), {Algo::standard, Algo::fa1}, Pass::fwd_bwd);
  const double standard = (rows[0].hbm_read_bytes + rows[0].hbm_write_bytes) / 1e9;
  const double flash = (rows[1].hbm_read_bytes + rows[1].hbm_write_bytes) / 1e9;
  MESSAGE("standard " << standard << " GB, FlashAttention (FA1) " << flash << " GB, speedup "
                      << rows[1].speedup_vs_standard);
  CHECK(standard >= 30);
  CHECK(standard <= 45);
  CHECK(flash >= 4.0);
  CHECK(flash <= 4.8);
  CHECK(rows[1].speedup_vs_standard > 2);  // the paper measured 41.7 / 7.3 = 5.7x
}

TEST_CASE("FlashAttention paper, Table 18: forward time over N grows like N^2, standard's absolute times") {
  // A100-40GB, batch 16, 8 heads, d = 64, fp16, forward.
  const double paper_flash[] = {0.08, 0.09, 0.18, 0.68, 2.40, 8.42, 33.54, 134.03, 535.95, 2147.05};
  const double paper_standard[] = {0.21, 0.22, 0.43, 1.27, 4.32, 16.47, 67.77};
  const GpuSpec gpu = load_gpu("a100-40gb");
  double last = 0;
  for (int n = 0; n < 10; ++n) {
    Problem p;
    p.batch = 16;
    p.heads_q = p.heads_kv = 8;
    p.seqlen_q = p.seqlen_k = int64_t{128} << n;
    p.head_dim = 64;
    p.dtype = DType::fp16;
    const auto rows = estimate_all(p, gpu, {Algo::standard, Algo::fa1}, Pass::fwd);
    const double flash_ms = rows[1].time_s * 1e3, standard_ms = rows[0].time_s * 1e3;
    CAPTURE(p.seqlen_q);
    if (n >= 6) {  // N >= 8192: time grows 4x per doubling, as the paper's column does (3.98-4.01)
      CHECK(flash_ms / last == doctest::Approx(paper_flash[n] / paper_flash[n - 1]).epsilon(0.05));
    }
    if (n >= 3 && n < 7) {  // standard within 25% of the paper's PyTorch times from N = 1024
      CHECK(standard_ms == doctest::Approx(paper_standard[n]).epsilon(0.25));
    }
    last = flash_ms;
  }
}

namespace {
struct Row {
  std::map<std::string, std::string> f;
  double num(const std::string& k) const { return std::stod(f.at(k)); }
};
std::vector<Row> read_csv(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::vector<std::string> header;
  std::vector<Row> rows;
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::stringstream ss(line);
    std::string cell;
    while (std::getline(ss, cell, ',')) cells.push_back(cell);
    if (header.empty()) {
      header = cells;
      continue;
    }
    Row r;
    for (size_t i = 0; i < header.size() && i < cells.size(); ++i) r.f[header[i]] = cells[i];
    rows.push_back(r);
  }
  return rows;
}

// The problem one measured row describes (the anchors' sweep: bf16, equal lengths, MHA).
Problem measured_problem(const Row& r) {
  Problem p;
  p.batch = static_cast<int64_t>(r.num("batch"));
  p.heads_q = p.heads_kv = static_cast<int64_t>(r.num("heads"));
  p.seqlen_q = p.seqlen_k = static_cast<int64_t>(r.num("seqlen"));
  p.head_dim = static_cast<int64_t>(r.num("hdim"));
  p.causal = r.num("causal") != 0;
  p.dtype = DType::bf16;
  return p;
}

// Relative errors of a prediction against a measured row: DRAM bytes (read + write) and event time.
struct Errors {
  double bytes, time;
};
Errors errors_of(const Estimate& e, const Row& r) {
  return {(e.hbm_read_bytes + e.hbm_write_bytes) / (r.num("dram_read_bytes") + r.num("dram_write_bytes")) - 1,
          e.time_s / r.num("event_time_s") - 1};
}
}  // namespace

// SDPA's rows of one validation file (simulator/validation/measure_sdpa.py), each predicted on `preset`
// (flash as fa2, cuDNN as fa3, math as standard, all with their default tiles). Prints every row;
// returns the fused (flash and cuDNN) rows and how many are within 15% in DRAM bytes and 25% in time.
struct Within {
  int fused, bytes_ok, time_ok;
};
Within sdpa_rows_within(const std::string& file, const std::string& preset) {
  const auto rows = read_csv(std::string(FLASHLAB_SOURCE_DIR) + "/simulator/validation/" + file);
  REQUIRE(!rows.empty());
  const GpuSpec gpu = load_gpu(preset);
  int fused = 0, bytes_ok = 0, time_ok = 0;
  std::vector<double> byte_err, time_err;
  for (const auto& r : rows) {
    const Problem p = measured_problem(r);
    const std::string backend = r.f.at("backend");
    const Algo algo = backend == "flash" ? Algo::fa2 : backend == "cudnn" ? Algo::fa3 : Algo::standard;
    Options o;
    o.standard_scale_pass = false;  // SDPA's math path scales Q and K, not S
    const Estimate e = estimate(p, gpu, algo, Pass::fwd, o);
    const auto [be, te] = errors_of(e, r);
    std::printf("  %-5s s=%5lld d=%3lld causal=%d  bytes %+6.1f%%  time %+6.1f%%  (bound %s)\n", backend.c_str(),
                static_cast<long long>(p.seqlen_q), static_cast<long long>(p.head_dim), int(p.causal), 100 * be,
                100 * te, e.bound.c_str());
    if (backend == "math") continue;
    ++fused;
    byte_err.push_back(std::fabs(be));
    time_err.push_back(std::fabs(te));
    bytes_ok += std::fabs(be) <= 0.15;
    time_ok += std::fabs(te) <= 0.25;
  }
  REQUIRE(fused > 0);
  std::sort(byte_err.begin(), byte_err.end());
  std::sort(time_err.begin(), time_err.end());
  MESSAGE(file << ": FA2 + cuDNN rows: " << fused << "; DRAM bytes within 15%: " << bytes_ok << " (median |error| "
               << 100 * byte_err[byte_err.size() / 2] << "%); time within 25%: " << time_ok << " (median |error| "
               << 100 * time_err[time_err.size() / 2] << "%)");
  return {fused, bytes_ok, time_ok};
}

TEST_CASE("predictions against PyTorch SDPA kernels measured on an H200 (simulator/validation)") {
  const Within w = sdpa_rows_within("sdpa-h200-2026-11-22.csv", "h200");
  CHECK(w.fused == 60);
  // What the model holds today (simulator/README.md): 54 of 60 rows within 15% in bytes, 60 of 60
  // within 25% in time, against the target of 90% (54) each. These bounds guard against regressions.
  CHECK(w.bytes_ok >= 54);
  CHECK(w.time_ok >= 60);
}

TEST_CASE("predictions against PyTorch SDPA kernels measured on an H100 (simulator/validation)") {
  // The same sweep on an H100 SXM with the h100-sxm preset's measured rates (simulator/README.md): 51 of
  // 60 within 15% in bytes, short of the 90% target (54) by flash's causal rows at d = 128 and 256,
  // which read 1.16-3.48x the compulsory bytes where the model predicts 1.0x (as on the H200, more so);
  // 60 of 60 within 25% in time. These bounds guard against regressions.
  const Within w = sdpa_rows_within("sdpa-h100-2026-11-22.csv", "h100-sxm");
  CHECK(w.fused == 60);
  CHECK(w.bytes_ok >= 51);
  CHECK(w.time_ok >= 60);
}

// flashlab's own fa2 forward rows (simulator/validation/measure_flashlab.py: the same sweep and
// measurements as the SDPA rows), predicted with the kernel's own tiles: Br x Bc = 128 x 64 for
// d <= 128 (128 x d64_block_n at d = 64), 64 x 64 for d = 256. Returns how many of the 30 rows are
// within 15% in DRAM bytes and within 25% in time.
std::pair<int, int> own_fa2_rows_within(const std::string& file, const std::string& preset, int d64_block_n) {
  const auto rows = read_csv(std::string(FLASHLAB_SOURCE_DIR) + "/simulator/validation/" + file);
  REQUIRE(rows.size() == 30);
  const GpuSpec gpu = load_gpu(preset);
  int bytes_ok = 0, time_ok = 0;
  for (const auto& r : rows) {
    const Problem p = measured_problem(r);
    Options o;
    o.block_m = p.head_dim <= 128 ? 128 : 64;
    o.block_n = p.head_dim <= 64 ? d64_block_n : 64;
    const auto [be, te] = errors_of(estimate(p, gpu, Algo::fa2, Pass::fwd, o), r);
    bytes_ok += std::fabs(be) <= 0.15;
    time_ok += std::fabs(te) <= 0.25;
  }
  MESSAGE(file << ": 30 rows; DRAM bytes within 15%: " << bytes_ok << "; time within 25%: " << time_ok);
  return {bytes_ok, time_ok};
}

TEST_CASE("predictions against flashlab's own fa2 forward measured on an H200 (simulator/validation)") {
  // gpu/fa2_fwd.cu v5: 29 and 30 since the model gives FA2's forward a warp per 16 rows at d = 256
  // (4 warps for these 64-row tiles; it had charged 8 warps' ldmatrix reads and one CTA an SM, and
  // missed d = 256 in time by 23-41%: bench/results/gpu-h200-2026-11-22-fa2v5-dram.md, 28 and 21).
  // The miss: d = 256 non-causal at 16k in bytes.
  const auto [bytes_ok, time_ok] = own_fa2_rows_within("flashlab-h200-2026-11-22.csv", "h200", 64);
  CHECK(bytes_ok >= 29);
  CHECK(time_ok >= 30);
}

TEST_CASE("predictions against flashlab's own fa2 forward measured on an H100 (simulator/validation)") {
  // gpu/fa2_fwd.cu v8 (d = 64 in 128 x 128 tiles, d = 256 in fa2_fwd_pairs.cu) on the h100-sxm preset
  // with the H100's measured rates (bench/results/gpu-h100-2026-11-22-fa2v9-dram.md): 30 and 30. Before
  // the 16-rows-a-warp rule and the measured rates, v7 gave 29 and 20 (d = 256 predicted 41-61% slow).
  // The model does not know the pairs kernel's smaller ldmatrix traffic (52 bytes per element of S
  // against 72); its d = 256 rows are within 8%.
  const auto [bytes_ok, time_ok] = own_fa2_rows_within("flashlab-h100-2026-11-22.csv", "h100-sxm", 128);
  CHECK(bytes_ok >= 30);
  CHECK(time_ok >= 30);
}

TEST_CASE("one estimate takes well under 5 ms of CPU; a 1000-point sweep under 2 s") {
  const GpuSpec gpu = load_gpu("h100-sxm");
  Problem p;
  p.batch = 1;
  p.heads_q = p.heads_kv = 16;
  p.head_dim = 128;
  p.dtype = DType::bf16;
  p.causal = true;
  const auto t0 = std::chrono::steady_clock::now();
  for (int n = 1; n <= 1000; ++n) {
    p.seqlen_q = p.seqlen_k = 128 * n;  // 128 .. 128000
    estimate(p, gpu, Algo::fa2, Pass::fwd_bwd);
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  MESSAGE("1000 FA2 fwd+bwd estimates, seqlen 128..128000: " << s << " s");
#if defined(FLASHLAB_SANITIZED)
  MESSAGE("skipped: the time limit is not checked under the sanitizers, which slow the code several times");
#else
  CHECK(s < 2.0);
#endif
}
