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
#include "csv_rows.hpp"
#include "executor.hpp"
#include "flashlab/error.hpp"
#include "gpu_spec.hpp"
#include "model.hpp"
#include "replay.hpp"
#include "shapes.hpp"

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
using Row = testing::CsvRow;
using testing::read_csv;

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

// One validation file (simulator/validation/measure_*.py), every row predicted on `preset`: SDPA's
// flash kernel as fa2, cuDNN as fa3, the math backend as math, flashlab's own fa2 forward as fa2 with
// its kernel's tiles. Prints every row; returns how many are within 15% in DRAM bytes and 20% in time.
struct Within {
  int rows = 0, bytes_ok = 0, time_ok = 0;
};
Within rows_within(const std::string& file, const std::string& preset) {
  const auto rows = read_csv(std::string(FLASHLAB_SOURCE_DIR) + "/simulator/validation/" + file);
  REQUIRE(!rows.empty());
  const GpuSpec gpu = load_gpu(preset);
  Within w;
  for (const auto& r : rows) {
    const Problem p = measured_problem(r);
    const std::string backend = r.f.at("backend");
    const bool fp8 = backend == "flashlab_fa3_fp8";  // gpu/fa3/'s FP8 forward: e4m3 in, its V transpose
    const bool det = backend.ends_with("_det");       // the deterministic backward (dQ without atomics)
    const bool fa3 = backend == "flashlab_fa3" || backend == "flashlab_fa3_det" || fp8;
    const Algo algo = backend == "cudnn" || fa3 ? Algo::fa3 : backend == "math" ? Algo::math : Algo::fa2;
    Options o;
    o.fp8 = fp8;
    o.deterministic = det;
    if (backend == "cudnn") o.impl = Impl::cudnn;
    if (fa3 || backend == "flashlab_fa2_det") o.impl = Impl::flashlab;  // tiles from gpu/shapes.hpp
    if (backend == "flashlab_fa2") {  // (the forward's tile flags; a backward takes its own from shapes.hpp)
      o.impl = Impl::flashlab;  // gpu/fa2_fwd.cu's tiles on this GPU
      o.block_m = p.head_dim <= 128 ? 128 : 64;
      o.block_n = p.head_dim <= 64 && preset == "h100-sxm" ? 128 : 64;
    }
    const Pass pass = r.f.count("pass") && r.f.at("pass") == "bwd" ? Pass::bwd : Pass::fwd;
    const Estimate e = estimate(p, gpu, algo, pass, o);
    const auto [be, te] = errors_of(e, r);
    const bool bok = std::fabs(be) <= 0.15, tok = std::fabs(te) <= 0.20;
    std::printf("  %-12s s=%5lld d=%3lld causal=%d  bytes %+6.1f%%%s  time %+6.1f%%%s  (bound %s)\n", backend.c_str(),
                static_cast<long long>(p.seqlen_q), static_cast<long long>(p.head_dim), int(p.causal), 100 * be,
                bok ? " " : "*", 100 * te, tok ? " " : "*", e.bound.c_str());
    ++w.rows;
    w.bytes_ok += bok;
    w.time_ok += tok;
  }
  MESSAGE(file << " on " << preset << ": " << w.rows << " rows; DRAM bytes within 15%: " << w.bytes_ok
               << "; time within 20%: " << w.time_ok);
  return w;
}

TEST_CASE("predictions against every measured kernel (simulator/validation): 90% within 15% in bytes, 20% in time") {
  const std::pair<const char*, const char*> files[] = {{"sdpa-h100-2026-11-22.csv", "h100-sxm"},
                                                        {"sdpa-h200-2026-11-22.csv", "h200"},
                                                        {"flashlab-h100-2026-11-22.csv", "h100-sxm"},
                                                        {"flashlab-h200-2026-11-22.csv", "h200"}};
  Within all;
  for (const auto& [file, preset] : files) {
    const Within w = rows_within(file, preset);
    all.rows += w.rows;
    all.bytes_ok += w.bytes_ok;
    all.time_ok += w.time_ok;
  }
  MESSAGE("all files: " << all.rows << " rows; bytes within 15%: " << all.bytes_ok << "; time within 20%: " << all.time_ok);
  CHECK(all.rows == 216);
  CHECK(all.bytes_ok >= 0.9 * all.rows);
  CHECK(all.time_ok >= 0.9 * all.rows);
}

// flashlab's fa3 backward (three kernels: preprocess, main, convert) against its 20 ncu rows of v9 (H100,
// 2026-11-27; the rows of v1, 2026-11-23, are kept beside them). No row chose a rate; the time misses of v1's
// rows sent us to read the kernel's barriers (simulator/README.md, "flashlab's fa3 backward"). The checks
// guard today's level: time within 20% on every row, bytes on 13 (12 before the backward's half segment
// budget, grids.cpp; the causal rows are over by 15-29%: the replay's random replacement evicts what the
// kernel keeps, listed there).
TEST_CASE("predictions against every measured kernel: flashlab's fa3 backward (H100)") {
  const Within w = rows_within("flashlab-fa3-bwd-h100-2026-11-27-v9.csv", "h100-sxm");
  CHECK(w.rows == 20);
  CHECK(w.bytes_ok >= 13);
  CHECK(w.time_ok >= 20);
}

// The same backward at d = 64 and 128 on the H200 (2026-11-29): its rows of v14 (the consumers computing
// halves of every step's dQ, in step) and of v15 (a step's dQ one consumer's, in turns), both measured after
// the model; v15's rows informed one choice, to leave the turns unmodelled (simulator/kernels.cpp). The
// checks guard the level measured: time within 20% on every row (v14 -7% to -19%, v15 0% to -14%), bytes
// on 15 (the causal d = 128 rows +16% to +25%).
TEST_CASE("predictions against every measured kernel: flashlab's fa3 backward v14 and v15 (H200)") {
  for (const char* file : {"flashlab-fa3-bwd-h200-2026-11-29-v14.csv", "flashlab-fa3-bwd-h200-2026-11-29-v15.csv"}) {
    const Within w = rows_within(file, "h200");
    CHECK(w.rows == 20);
    CHECK(w.bytes_ok >= 15);
    CHECK(w.time_ok >= 20);
  }
}

// flashlab's fa3 backward at d = 256 (64 keys a CTA, the consumers splitting the head dim, dQ by atomics)
// against its 10 ncu rows of v9 (H100, 2026-11-27; v7's rows of the same day kept beside them). No row chose
// anything; the checks guard the level measured (simulator/README.md, "flashlab's fa3 backward").
TEST_CASE("predictions against every measured kernel: flashlab's fa3 backward at d = 256 (H100)") {
  const Within w = rows_within("flashlab-fa3-bwd-d256-h100-2026-11-27-v9.csv", "h100-sxm");
  CHECK(w.rows == 10);
  CHECK(w.bytes_ok >= 5);
  CHECK(w.time_ok >= 10);
}

// flashlab's fa3 forward (v10) against its 30 ncu rows (H100, 2026-11-24). No row chose a rate; the bytes
// are guarded at the level measured on arrival, the time reported (simulator/README.md, "flashlab's own fa3").
TEST_CASE("predictions against every measured kernel: flashlab's fa3 forward (H100)") {
  const Within w = rows_within("flashlab-fa3-h100-2026-11-27-v17.csv", "h100-sxm");
  CHECK(w.rows == 30);
  CHECK(w.bytes_ok >= 24);
}

// The same forward (v22: O staged for a bulk tensor store, in its own buffer beside two Q buffers at D <= 128 (v19),
// in V's stages at d = 256 (v21, freed a tile later since v22); v18's Q blocks counted from the end where Br > Bc)
// on an H200 (2026-11-28; the d = 64 and 128 rows are v19's: v21 left those kernels' PTX as it was and v22 changed
// only how they read the tile index, 1.00-1.03x in A/B; v18's, v19's and v21's files kept beside it). No row chose
// anything; the checks guard the level measured on arrival (v18's: 27 in bytes, 18 in time; v19's 27 and 19;
// v21's and v22's 26 and 20 / 22: d = 256 causal at 2k read 8% more than v19 did, -17.9% against the model, one
// of the d = 256 causal rows the replay under-reads, simulator/README.md).
TEST_CASE("predictions against every measured kernel: flashlab's fa3 forward (H200)") {
  const Within w = rows_within("flashlab-fa3-h200-2026-11-28-v22.csv", "h200");
  CHECK(w.rows == 30);
  CHECK(w.bytes_ok >= 26);
}

// flashlab's FP8 forward (its V transpose and the kernel) against its 20 ncu rows. No row chose a rate; the
// bytes are guarded at the level measured on arrival, the time reported (simulator/README.md, "flashlab's
// FP8 forward").
TEST_CASE("predictions against every measured kernel: flashlab's FP8 forward (H100)") {
  const Within w = rows_within("flashlab-fa3-fp8-h100-2026-11-24.csv", "h100-sxm");
  CHECK(w.rows == 20);
  CHECK(w.bytes_ok >= 15);
}

TEST_CASE("flashlab's FP8 forward: e4m3 bytes, the FP8 tensor rate, refused where it cannot run") {
  const GpuSpec h100 = load_gpu("h100-sxm");
  Problem p;
  p.batch = 4;
  p.heads_q = p.heads_kv = 16;
  p.seqlen_q = p.seqlen_k = 4096;
  p.head_dim = 128;
  p.dtype = DType::bf16;
  Options o;
  o.impl = Impl::flashlab;
  const Estimate bf16 = estimate(p, h100, Algo::fa3, Pass::fwd, o);
  o.fp8 = true;
  const Estimate fp8 = estimate(p, h100, Algo::fa3, Pass::fwd, o);
  CHECK(fp8.flops == doctest::Approx(bf16.flops));
  CHECK(fp8.t_tensor == doctest::Approx(bf16.t_tensor / 2).epsilon(0.01));  // 1979 against 989 TFLOP/s
  // Q, K, V read in one byte an element, O written in two: the kernel's DRAM bytes fall by about a third,
  // and its V transpose adds V twice (read and written) at one byte.
  CHECK(fp8.hbm_read_bytes < 0.75 * bf16.hbm_read_bytes);
  CHECK(fp8.time_s < bf16.time_s);
  CHECK(fp8.launches == bf16.launches + 1);
  // Refused, with the reason: another algorithm or kernel, the backward, a GPU without FP8 wgmma.
  CHECK_THROWS_WITH_AS(estimate(p, h100, Algo::fa2, Pass::fwd, o), doctest::Contains("--algo fa3 --impl flashlab"),
                       Error);
  CHECK_THROWS_WITH_AS(estimate(p, h100, Algo::fa3, Pass::fwd_bwd, o), doctest::Contains("use --pass fwd"), Error);
  CHECK_THROWS_WITH_AS(estimate(p, load_gpu("a100-80gb"), Algo::fa3, Pass::fwd, o), doctest::Contains("wgmma"), Error);
}

// flashlab's fa3 backward as its kernels work (gpu/fa3/fa3_bwd.cu), at the level `estimate` shows.
TEST_CASE("flashlab's fa3 backward: five GEMMs, a CTA a K/V block and kv head, the dQ scratch in the bytes") {
  const GpuSpec h100 = load_gpu("h100-sxm");
  Problem p;
  p.batch = 2;
  p.heads_q = 16;
  p.heads_kv = 4;  // GQA: a CTA walks its kv head's four query heads
  p.seqlen_q = p.seqlen_k = 4096;
  p.head_dim = 128;
  p.dtype = DType::bf16;
  Options o;
  o.impl = Impl::flashlab;
  const Estimate fwd = estimate(p, h100, Algo::fa3, Pass::fwd, o), bwd = estimate(p, h100, Algo::fa3, Pass::bwd, o);
  // S, dP, dV, dK, dQ: 2 (3 d + 2 dv) FLOPs an element of S against the forward's 2 (d + dv).
  CHECK(bwd.flops == doctest::Approx(2.5 * fwd.flops));
  // One CTA a (K/V block of Bc keys, kv head, batch entry), not a query head: the grid is gpu/shapes.hpp's.
  const gpu::TileShape k = gpu::fa3_backward_shape(int(p.head_dim));
  CHECK(bwd.block_m == k.block_m);
  CHECK(bwd.block_n == k.block_n);
  CHECK(bwd.ctas == double(p.seqlen_k / k.block_n * p.heads_kv * p.batch));
  // A causal mask skips the tiles above the diagonal: about half the FLOPs (the diagonal's tiles whole).
  Problem c = p;
  c.causal = true;
  const Estimate cb = estimate(c, h100, Algo::fa3, Pass::bwd, o);
  CHECK(cb.flops > 0.5 * bwd.flops);
  CHECK(cb.flops < 0.5 * bwd.flops * (1.0 + 2.0 * k.block_n / double(p.seqlen_k)));
  // The fp32 dQ scratch goes through DRAM: zeroed by the preprocess (written), read and written back by the
  // main kernel's bulk reductions, read by the convert; so the bytes hold at least every tensor once plus
  // the scratch twice each way.
  const double e = 2, rows = double(p.batch * p.seqlen_q * p.heads_q);
  const double q = rows * p.head_dim * e, kv = double(p.batch * p.seqlen_k * p.heads_kv) * p.head_dim * e;
  const double scratch = rows * p.head_dim * 4.0;
  CHECK(bwd.hbm_read_bytes >= q /* Q */ + 2 * q /* O, dO (preprocess) */ + q /* dO (main) */ + 2 * kv + 2 * scratch);
  CHECK(bwd.hbm_write_bytes >= 2 * scratch + q /* dQ */ + 2 * kv /* dK, dV */);
  // ... and the scratch's traffic is what separates it from a backward that kept dQ on chip: at least the
  // scratch's bytes, four times, above the bf16 tensors' compulsory traffic.
  CHECK(bwd.hbm_read_bytes + bwd.hbm_write_bytes - (5 * q + 4 * kv) >= 4 * scratch);
}

TEST_CASE("flashlab's fa3 backward refuses what its kernel does not run, saying why") {
  Problem p;
  p.batch = 1;
  p.heads_q = p.heads_kv = 8;
  p.seqlen_q = p.seqlen_k = 2048;
  p.head_dim = 256;
  p.dtype = DType::bf16;
  Options o;
  o.impl = Impl::flashlab;
  // d = 256: the split kernel (64 keys a CTA, gpu/shapes.hpp), forward and backward.
  CHECK(estimate(p, load_gpu("h100-sxm"), Algo::fa3, Pass::bwd, o).block_n == 64);
  CHECK_NOTHROW(estimate(p, load_gpu("h100-sxm"), Algo::fa3, Pass::fwd, o));
  p.head_dim = 128;
  CHECK_THROWS_WITH_AS(estimate(p, load_gpu("a100-80gb"), Algo::fa3, Pass::bwd, o), doctest::Contains("wgmma"), Error);
}

// The FlashAttention-2 paper's A100 sweep (bf16, batch x seqlen = 16k, hidden 2048, d = 64 and 128,
// seqlen 1k..16k, causal or not): FA2's forward at 50-73% of the 312 TFLOP/s peak, FA1 at 25-40%,
// FA2 about 2x FA1 (counted here as at least 1.5x), and FA2's backward less efficient than its forward
// (forward + backward below the forward alone). TFLOP/s use the papers' FLOP count (4 s^2 d per head
// forward, half under a causal mask, 3.5x for forward + backward). The target is 90% of the
// cells for each relationship; simulator/README.md lists what the model reaches and what binds.
TEST_CASE("FlashAttention-2 paper, A100 80GB: efficiencies of FA1 and FA2 over the paper's sweep") {
  const GpuSpec gpu = load_gpu("a100-80gb");
  const double peak = gpu.tensor_peak(DType::bf16);
  int cells = 0, fa2_fwd_ok = 0, fa1_fwd_ok = 0, ratio_ok = 0, bwd_below_ok = 0;
  for (int d : {64, 128})
    for (bool causal : {false, true})
      for (int s = 1024; s <= 16384; s *= 2) {
        Problem p;
        p.batch = 16384 / s;
        p.heads_q = p.heads_kv = 2048 / d;
        p.seqlen_q = p.seqlen_k = s;
        p.head_dim = d;
        p.causal = causal;
        p.dtype = DType::bf16;
        const double flops = 4.0 * s * s * d * p.heads_q * p.batch * (causal ? 0.5 : 1.0);
        auto efficiency = [&](Algo a, Pass pass) {
          return flops * (pass == Pass::fwd ? 1.0 : 3.5) / estimate(p, gpu, a, pass).time_s / peak;
        };
        const double fa2 = efficiency(Algo::fa2, Pass::fwd), fa1 = efficiency(Algo::fa1, Pass::fwd);
        const double fa2_fb = efficiency(Algo::fa2, Pass::fwd_bwd);
        std::printf("  d=%3d causal=%d s=%5d  fa1 fwd %4.1f%%  fa2 fwd %4.1f%%  fa2/fa1 %.2f  fa2 fwd+bwd %4.1f%%\n", d,
                    int(causal), s, 100 * fa1, 100 * fa2, fa2 / fa1, 100 * fa2_fb);
        ++cells;
        fa2_fwd_ok += fa2 >= 0.50 && fa2 <= 0.73;
        fa1_fwd_ok += fa1 >= 0.25 && fa1 <= 0.40;
        ratio_ok += fa2 / fa1 >= 1.5;
        bwd_below_ok += fa2_fb < fa2;
      }
  MESSAGE("A100 sweep, " << cells << " cells: FA2 fwd in 50-73%: " << fa2_fwd_ok << "; FA1 fwd in 25-40%: " << fa1_fwd_ok
                         << "; FA2 >= 1.5x FA1: " << ratio_ok << "; FA2 fwd+bwd below fwd: " << bwd_below_ok);
  CHECK(cells == 20);
  // The target: each relationship on at least 90% of the cells (18 of 20).
  CHECK(fa2_fwd_ok >= 18);
  CHECK(fa1_fwd_ok >= 18);
  CHECK(ratio_ok >= 18);
  CHECK(bwd_below_ok >= 18);
}

namespace {
// A grid of equal CTAs, each loading a block of its own (an L2 miss) and then computing `seconds`.
class EqualCtas : public CtaGrid {
 public:
  EqualCtas(int64_t n, double bytes, double seconds) : n_(n), bytes_(bytes), seconds_(seconds) {}
  int64_t ctas() const override { return n_; }
  int64_t segments(int64_t) const override { return 1; }
  void segment(int64_t cta, int64_t, Segment& out) const override {
    out.seconds = seconds_;
    out.accesses.push_back({uint32_t(cta), bytes_, AccessKind::load});
  }
  uint32_t keys() const override { return uint32_t(n_); }
  int64_t head(int64_t) const override { return 0; }

 private:
  int64_t n_;
  double bytes_, seconds_;
};
}  // namespace

TEST_CASE("replay: a wave of equal CTAs waits for all its first loads together (bursts); a CTA alone for its own") {
  const double bytes = 1e6, seconds = 10e-6, rate = 1e12;  // a CTA's load alone: 1 us at the chip's rate
  ReplaySetup setup;
  setup.slots = setup.sms = 4;
  setup.l2_capacity = 1e9;
  setup.dram_bytes_per_s = rate;
  setup.l2_bytes_per_s = 1e15;
  const EqualCtas two_waves(8, bytes, seconds);
  // Times in microseconds: doctest's Approx adds an absolute margin (about 1e-5) that would hide them.
  // Each wave: its four CTAs' 4 MB through DRAM (4 us) before any computes, then 10 us together.
  CHECK(replay(two_waves, setup).makespan_s * 1e6 == doctest::Approx(2 * (4 + 10)));
  // With one slot every CTA starts alone: its own 1 us, then 10 us.
  setup.slots = 1;
  CHECK(replay(EqualCtas(3, bytes, seconds), setup).makespan_s * 1e6 == doctest::Approx(3 * 11));
  // Without bursts a start costs cta_start_s (here nothing): 2 x 10 us.
  setup.slots = 4;
  setup.dram_bytes_per_s = setup.l2_bytes_per_s = 0;
  CHECK(replay(two_waves, setup).makespan_s * 1e6 == doctest::Approx(20));
}

// flashlab's deterministic backward against ncu rows of all four backward kernels, measured in one session
// (H100, 2026-11-27, measure_flashlab.py --pass bwd [--deterministic]): fa2's (preprocess, dkdv without dQ,
// the Q-outer dq kernel) and fa3's (dQ added in turns), beside the atomic kernels of the same session. No
// row chose anything; the checks guard the level measured (simulator/README.md, "The deterministic backward").
TEST_CASE("predictions against every measured kernel: the deterministic backward and its atomic twin (H100)") {
  const Within fa2_det = rows_within("flashlab-fa2-det-bwd-h100-2026-11-27.csv", "h100-sxm");
  CHECK(fa2_det.rows == 30);
  CHECK(fa2_det.time_ok >= 30);
  CHECK(fa2_det.bytes_ok >= 29);
  const Within fa3_det = rows_within("flashlab-fa3-det-bwd-h100-2026-11-28-v13.csv", "h100-sxm");
  CHECK(fa3_det.rows == 30);
  CHECK(fa3_det.time_ok >= 29);
  CHECK(fa3_det.bytes_ok >= 2);
  const Within fa2 = rows_within("flashlab-fa2-bwd-h100-2026-11-27.csv", "h100-sxm");
  CHECK(fa2.rows == 30);
  CHECK(fa2.time_ok >= 24);
  CHECK(fa2.bytes_ok >= 21);
  const Within fa3 = rows_within("flashlab-fa3-bwd-h100-2026-11-28-v12.csv", "h100-sxm");
  CHECK(fa3.rows == 30);
  CHECK(fa3.time_ok >= 30);
  CHECK(fa3.bytes_ok >= 18);
}

TEST_CASE("the deterministic backward: fa2's two kernels recompute S and dP; fa3's turns rotate or wait; both refused elsewhere") {
  const GpuSpec h100 = load_gpu("h100-sxm");
  Problem p;
  p.batch = 8;
  p.heads_q = p.heads_kv = 8;
  p.seqlen_q = p.seqlen_k = 2048;
  p.head_dim = 256;
  p.dtype = DType::bf16;
  Options o;
  o.impl = Impl::flashlab;
  Options det = o;
  det.deterministic = true;
  // fa2: dK/dV without dQ (S, dP, dV, dK) and the dq kernel (S, dP, dQ): 2 (4 d + 3 dv) FLOPs an element of S
  // against the atomic kernel's 2 (3 d + 2 dv), d = dv: 1.4x; no fp32 dQ scratch to zero, add into and convert.
  const Estimate fa2 = estimate(p, h100, Algo::fa2, Pass::bwd, o), fa2_det = estimate(p, h100, Algo::fa2, Pass::bwd, det);
  CHECK(fa2_det.flops == doctest::Approx(1.4 * fa2.flops));
  CHECK(fa2_det.time_s > fa2.time_s);
  CHECK(fa2_det.launches == fa2.launches);  // preprocess, dkdv, dq against preprocess, dkdv, convert
  // fa3: the same kernel and FLOPs, dQ added in turns. Without a mask the walks rotate where a head's K/V blocks
  // fit on the device (32 of 64 keys here): each block finds its predecessor's turn a step old, but its own
  // previous turn's rows (64 KiB at d = 256) land more slowly than a step computes, so the turns still cost
  // (ncu: 0.82x at s = 2k, the model 0.93x). With 256 blocks a head (s = 16k) they do not rotate: every block
  // of a head reaches Q block 0 at once and waits for the one launched before it (ncu: 0.78x; the model is
  // short of it, simulator/README.md "The deterministic backward").
  const Estimate fa3 = estimate(p, h100, Algo::fa3, Pass::bwd, o), fa3_det = estimate(p, h100, Algo::fa3, Pass::bwd, det);
  CHECK(fa3_det.flops == fa3.flops);
  CHECK(fa3.time_s / fa3_det.time_s > 0.85);
  CHECK(fa3.time_s / fa3_det.time_s < 0.97);
  Problem long_one = p;
  long_one.batch = 1;
  long_one.seqlen_q = long_one.seqlen_k = 16384;
  CHECK(estimate(long_one, h100, Algo::fa3, Pass::bwd, o).time_s < estimate(long_one, h100, Algo::fa3, Pass::bwd, det).time_s);
  // What is not modelled is refused, saying why.
  CHECK_THROWS_WITH_AS(estimate(p, h100, Algo::fa2, Pass::fwd, det), doctest::Contains("--pass bwd"), Error);
  Options upstream = det;
  upstream.impl = Impl::upstream;
  CHECK_THROWS_WITH_AS(estimate(p, h100, Algo::fa2, Pass::bwd, upstream), doctest::Contains("--impl flashlab"), Error);
  CHECK_THROWS_WITH_AS(estimate(p, h100, Algo::fa1, Pass::bwd, det), doctest::Contains("--impl flashlab"), Error);
  CHECK_THROWS_WITH_AS(estimate(p, load_gpu("h200"), Algo::fa3, Pass::bwd, det), doctest::Contains("l2_latency_s"), Error);
  CHECK_THROWS_WITH_AS(estimate(p, load_gpu("h200", false, {"l2_latency_s=1.46e-7"}), Algo::fa3, Pass::bwd, det),
                       doctest::Contains("l2_reduce_bytes_per_s"), Error);
  CHECK_NOTHROW(estimate(p,
                         load_gpu("h200", false,
                                  {"l2_latency_s=1.46e-7", "l2_reduce_bytes_per_s=2.7e12", "l2_reduce_stream_bytes_per_s=3.2e12"}),
                         Algo::fa3, Pass::bwd, det));
  CHECK_NOTHROW(estimate(p, h100, Algo::standard, Pass::bwd, det));  // deterministic as it is
}

namespace {
// n CTAs of `steps` segments each, segment k adding into turn line k; the CTA launched c-th takes rank
// `ranks[c]` on every line.
class TurnChain : public CtaGrid {
 public:
  TurnChain(std::vector<uint32_t> ranks, int64_t steps, double seconds)
      : ranks_(std::move(ranks)), steps_(steps), seconds_(seconds) {}
  int64_t ctas() const override { return int64_t(ranks_.size()); }
  int64_t segments(int64_t) const override { return steps_; }
  void segment(int64_t cta, int64_t k, Segment& out) const override {
    out.seconds = seconds_;
    out.turn = {uint32_t(k), ranks_[size_t(cta)]};
  }
  uint32_t keys() const override { return 1; }
  int64_t head(int64_t) const override { return 0; }
  uint32_t turn_lines() const override { return uint32_t(steps_); }

 private:
  std::vector<uint32_t> ranks_;
  int64_t steps_;
  double seconds_;
};
}  // namespace

TEST_CASE("replay: turns make a pipeline, each CTA one hand-over behind the one before it and its own last turn") {
  ReplaySetup setup;
  setup.slots = setup.sms = 4;
  setup.l2_capacity = 1e9;
  setup.turn_latency_s = 1e-6;  // a release seen one round trip after it lands
  setup.turn_tail_s = 2e-6;     // then the rows go out; the next release one round trip after that
  // Four CTAs of three 10 us steps, all resident: CTA c's step k ends at 10 (k + 1) + 4 c us (its predecessor's
  // end, + 1 to release, + 1 to be seen, + 2 for its rows).
  const ReplayResult r = replay(TurnChain({0, 1, 2, 3}, 3, 10e-6), setup);
  CHECK(r.makespan_s * 1e6 == doctest::Approx(30 + 3 * 4));
  CHECK(r.turn_wait_s * 1e6 == doctest::Approx(4 + 8 + 12));  // at step 0 only: then each is ready in time
  // A CTA's turns are kept one after the other: with 1 us steps its next turn waits for its own release
  // (+ 1), the poll (+ 1) and its rows (+ 2): one CTA alone, three turns on lines of its own, ends at
  // 1, 5, 9 us, all of the wait its own.
  const ReplayResult alone = replay(TurnChain({0}, 3, 1e-6), setup);
  CHECK(alone.makespan_s * 1e6 == doctest::Approx(9));
  CHECK(alone.own_turn_wait_s * 1e6 == doctest::Approx(3 + 3));
  CHECK(alone.turn_wait_s == doctest::Approx(alone.own_turn_wait_s));
  // Looking ahead (fa3's keepers at d = 256): its turns free, the next is given before the release, and only
  // the adds themselves go one after the other: 3 us apart, ends at 1, 4, 7 us.
  setup.turn_look_ahead = true;
  setup.turn_stream_s = 3e-6;
  CHECK(replay(TurnChain({0}, 3, 1e-6), setup).makespan_s * 1e6 == doctest::Approx(7));
  setup.turn_look_ahead = false;
  // A turn order against the launch order on too few slots would hang the GPU; the replay says so.
  setup.slots = setup.sms = 1;
  CHECK_THROWS_WITH_AS(replay(TurnChain({1, 0}, 2, 10e-6), setup), doctest::Contains("never comes"), Error);
}
