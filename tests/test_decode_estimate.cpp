// The decode estimate (simulator/decode.hpp): flash-attn's split heuristic, the schedule's counts, and
// split-KV's speedup where the grid leaves SMs idle.
#include <doctest/doctest.h>

#include <cstdio>
#include <string>

#include "csv_rows.hpp"
#include "decode.hpp"
#include "decode_check.hpp"
#include "decode_executor.hpp"
#include "flashlab/error.hpp"
#include "gpu_spec.hpp"
#include "shapes.hpp"

using namespace flashlab;

namespace {
DecodeProblem llama_decode(int64_t batch, int64_t cache_len) {
  DecodeProblem d;  // q_len 1, bf16, d = 128, GQA 32:8: the decode shape
  d.batch = batch;
  d.heads_q = 32;
  d.heads_kv = 8;
  d.head_dim = 128;
  d.cache_len = cache_len;
  d.cache_seqlens.assign(static_cast<size_t>(batch), cache_len);
  d.dtype = DType::bf16;
  d.num_splits = 0;
  return d;
}
}  // namespace

TEST_CASE("the split heuristic: no split for a full grid, else the fewest splits near the best wave efficiency") {
  // 8 CTAs on 264 slots, 512 key blocks: efficiency 8s/264 while one wave; the best is 1.0 (s = 33);
  // the smallest eligible s with 8s/264 >= 0.85 is 29 (ceil(512/29) = 18 != ceil(512/28) = 19).
  CHECK(sim::split_kv_heuristic(8, 264, 512) == 29);
  CHECK(sim::split_kv_heuristic(212, 264, 512) == 1);  // 212 >= 0.8 x 264
  CHECK(sim::split_kv_heuristic(8, 264, 3) == 3);      // never more splits than key blocks
  // 4 blocks: s = 3 gives ceil(4/3) = 2 blocks per split like s = 2, so it is not eligible.
  CHECK(sim::split_kv_heuristic(100, 264, 4) == 2);
}

TEST_CASE("decode estimate: the cache is read once per kv head, and split-KV pays where the grid is small") {
  const sim::GpuSpec h100 = sim::load_gpu("h100-sxm");
  const sim::DecodeEstimate one = sim::estimate_decode(llama_decode(1, 65536), h100);
  CHECK(one.gqa_packed);
  CHECK(one.cache_bytes == doctest::Approx(1.0 * 65536 * 8 * 128 * 2 * 2));  // seqlen x kv heads x d x bf16 x (K, V)
  CHECK(one.splits_from_heuristic);
  CHECK(one.num_splits > 1);
  CHECK(one.ctas == 8 * one.num_splits);
  CHECK(one.speedup_vs_no_split > 2.0);
  CHECK(one.time_s >= one.cache_bytes / h100.hbm_effective());
  CHECK(one.partial_write_bytes == doctest::Approx(one.combine_read_bytes));
  // A batch that fills the GPU: the heuristic keeps one split and there is nothing to gain.
  const sim::DecodeEstimate full = sim::estimate_decode(llama_decode(64, 8192), h100);
  CHECK(full.num_splits == 1);
  CHECK(full.speedup_vs_no_split == doctest::Approx(1.0));
  CHECK(full.bound == "hbm");
  CHECK(full.cache_bandwidth <= h100.hbm_effective() * 1.0001);
}

TEST_CASE("decode estimate: its cache bytes are the tiled executor's, through the same SplitSchedule") {
  DecodeProblem d;  // q_len 4: no packing, so the CPU run and the model walk the same rows
  d.batch = 2;
  d.heads_q = 4;
  d.heads_kv = 2;
  d.head_dim = 64;
  d.q_len = 4;
  d.causal = true;
  d.cache_len = 1000;
  d.cache_seqlens = {999, 300};
  d.num_splits = 3;
  d.dtype = DType::bf16;
  const sim::DecodeEstimate e = sim::estimate_decode(d, sim::load_gpu("h100-sxm"));
  CHECK_FALSE(e.gqa_packed);
  tiled::ByteCounter counter;
  tiled::decode(d, harness::random_decode_inputs(d, 3), tiled::Tiling{e.block_m, e.block_n}, &counter);
  const auto& load = counter.counts.load;
  CHECK(e.cache_bytes == static_cast<double>(load[static_cast<int>(tiled::TensorId::K)] +
                                             load[static_cast<int>(tiled::TensorId::V)]));
  CHECK(e.combine_read_bytes == static_cast<double>(load[static_cast<int>(tiled::TensorId::Oaccum)] +
                                                    load[static_cast<int>(tiled::TensorId::LSEaccum)]));
}

TEST_CASE("decode estimate --impl flashlab: the kernel's own tiles, slots and split rule (gpu/shapes.hpp)") {
  const sim::GpuSpec h200 = sim::load_gpu("h200");
  auto ours = [&](int64_t batch, int64_t cache_len) {
    return sim::estimate_decode(llama_decode(batch, cache_len), h200, sim::Impl::flashlab);
  };
  const sim::DecodeEstimate e = ours(1, 8192);
  CHECK(e.impl == "flashlab");
  CHECK(e.block_m == 16);
  CHECK(e.block_n == gpu::decode_split_shape(128).block_n);
  CHECK(e.slots == 2 * 132);  // two CTAs an SM at d = 128 (100 KiB of shared memory each)
  CHECK(e.cache_bytes == doctest::Approx(1.0 * 8192 * 8 * 128 * 2 * 2));
  CHECK(e.ctas == 8 * e.num_splits);
  // The splits the kernel itself picked on an H200 (bench/results/decode-h200-2026-11-29-v9-contiguous.csv).
  CHECK(e.num_splits == 14);
  CHECK(ours(1, 1024).num_splits == 11);
  CHECK(ours(8, 8192).num_splits == 2);
  CHECK(ours(64, 1024).num_splits == 1);
  CHECK(e.time_s >= e.cache_bytes / h200.hbm_effective());
  CHECK(e.time_s >= h200.kernel_launch_s);
  CHECK(ours(1, 1024).bound == "latency");  // 88 CTAs at the kernel's stream rate do not fill the HBM
  DecodeProblem d256 = llama_decode(8, 8192);
  d256.head_dim = 256;
  CHECK(sim::estimate_decode(d256, h200, sim::Impl::flashlab).slots == 132);  // four warps, 136 KiB: one an SM
  CHECK_THROWS_WITH_AS(sim::estimate_decode(llama_decode(1, 8192), h200, sim::Impl::cudnn),
                       doctest::Contains("not modelled"), Error);
}

// flashlab's decode kernel measured on an H200 (simulator/validation/measure_decode.py): ncu's DRAM bytes of
// the split and combine kernels, and the time a call on the layers clock (calls back to back in a CUDA
// graph). Every row predicted with the splits the kernel ran; no row's total informed the model (its kernel
// rates, gpu/shapes.hpp kDecodeBlockIdlePeriodS and kDecodeFullLatencyS, come from batch 1 x 64k keys at forced
// split counts, bench/results/decode-splits-h200-2026-11-29-v8*.csv; its merge and combine from the timeline
// probe's phases, bench/decode_timeline.py). simulator/README.md lists the rows and
// what the model leaves out: below 256 MB of cache it is short by up to 14% (the bounds here were read off the
// rows: they guard what holds today, they were not a target). The model charges the cache at the preset's
// achievable read rate (4.44 TB/s, microbench.cu); where the kernel streamed faster (4.55-4.58 TB/s at batch 8 x 64k
// and 64 x 8k) the model must come out over, so those rows are held to 5% and counted apart.
TEST_CASE("decode estimate --impl flashlab against every measured row: bytes within 1%, time within 10% from 256 MB") {
  const auto rows = testing::read_csv(std::string(FLASHLAB_SOURCE_DIR) +
                                      "/simulator/validation/flashlab-decode-h200-2026-11-29-v9.csv");
  REQUIRE(rows.size() == 14);
  const sim::GpuSpec h200 = sim::load_gpu("h200");
  int bytes_ok = 0, time_ok = 0, large = 0, under = 0, faster_than_preset = 0;
  for (const auto& r : rows) {
    DecodeProblem d = llama_decode(int64_t(r.num("batch")), int64_t(r.num("cache_len")));
    d.heads_q = int64_t(r.num("heads_q"));
    d.heads_kv = int64_t(r.num("heads_kv"));
    d.head_dim = int64_t(r.num("hdim"));
    d.num_splits = int64_t(r.num("splits"));
    const sim::DecodeEstimate e = sim::estimate_decode(d, h200, sim::Impl::flashlab);
    // ncu counts what reached DRAM: the partials the split kernel writes stay in L2 until ncu's flush
    // before the combine, which then reads them from DRAM; the model counts both once.
    const double measured_bytes = r.num("split_dram_read_bytes") + r.num("split_dram_write_bytes") +
                                  r.num("combine_dram_read_bytes") + r.num("combine_dram_write_bytes");
    const double model_bytes = e.cache_bytes + e.q_bytes + e.combine_read_bytes + e.out_write_bytes;
    const double bytes_err = model_bytes / measured_bytes - 1, time_err = e.time_s / r.num("layers_s") - 1;
    MESSAGE("decode b" << r.f.at("batch") << " L" << r.f.at("cache_len") << " d" << r.f.at("hdim") << " splits "
                       << r.f.at("splits") << ": bytes " << bytes_err * 100 << "%, time " << e.time_s * 1e6
                       << " us against " << r.num("layers_s") * 1e6 << " (" << time_err * 100 << "%, " << e.bound
                       << ")");
    bytes_ok += std::abs(bytes_err) <= 0.01;
    if (e.cache_bytes / r.num("layers_s") > h200.hbm_effective()) {
      ++faster_than_preset;  // streamed above the preset's read rate: the model cannot be under
      under += time_err <= 0.05;
    } else {
      under += time_err <= 0.03;  // what the model leaves out are costs: it does not invent time
    }
    if (e.cache_bytes >= 256e6) {
      ++large;
      time_ok += std::abs(time_err) <= 0.10;
    }
  }
  CHECK(bytes_ok == int(rows.size()));
  CHECK(under == int(rows.size()));
  CHECK(faster_than_preset <= 2);
  CHECK(large == 8);
  CHECK(time_ok == large);
}

// The same model on another GPU (simulator/validation/flashlab-decode-h100-2026-12-07-v10-layers.csv: an NVIDIA
// H100, the kernel's v10, decode_compare.py's layers clock). None of the model's figures came from an H100 row:
// its kernel rates are the H200 probes' above, the H100's own from the h100-sxm preset. The splits must be the
// kernel's (the same gpu/shapes.hpp rule on the preset's SMs and HBM); the time bounds were read off the rows
// (from 256 MB -0.3% to +3.6%; below, -15.1% to -6.3%: the start and the end the H200 rows also miss).
TEST_CASE("decode estimate --impl flashlab on the H100's rows: the kernel's splits, time within 5% from 256 MB") {
  const auto rows = testing::read_csv(std::string(FLASHLAB_SOURCE_DIR) +
                                      "/simulator/validation/flashlab-decode-h100-2026-12-07-v10-layers.csv");
  REQUIRE(rows.size() == 26);
  const sim::GpuSpec h100 = sim::load_gpu("h100-sxm");
  int contiguous = 0, large = 0, large_ok = 0, small_ok = 0;
  for (const auto& r : rows) {
    if (r.num("page_size") != 0) continue;  // the model reads a paged cache's blocks as a contiguous one's
    ++contiguous;
    DecodeProblem d = llama_decode(int64_t(r.num("batch")), int64_t(r.num("cache_len")));
    d.heads_q = int64_t(r.num("heads_q"));  // the row's shape, as the H200 rows' test reads it
    d.heads_kv = int64_t(r.num("heads_kv"));
    d.head_dim = int64_t(r.num("hdim"));
    d.q_len = int64_t(r.num("q_len"));
    REQUIRE(r.f.at("dtype") == "bf16");
    const sim::DecodeEstimate e = sim::estimate_decode(d, h100, sim::Impl::flashlab);
    const double err = e.time_s / r.num("layers_s") - 1;
    MESSAGE("H100 decode b" << r.f.at("batch") << " L" << r.f.at("cache_len") << ": splits " << e.num_splits
                            << " (kernel " << r.f.at("splits") << "), " << e.time_s * 1e6 << " us against "
                            << r.num("layers_s") * 1e6 << " (" << err * 100 << "%)");
    CHECK(e.num_splits == int64_t(r.num("splits")));
    if (e.cache_bytes >= 256e6) {
      ++large;
      large_ok += std::abs(err) <= 0.05;
    } else {
      small_ok += err >= -0.20 && err <= 0.03;
    }
  }
  CHECK(contiguous == 13);
  CHECK(large == 9);
  CHECK(large_ok == large);
  CHECK(small_ok == contiguous - large);
}
