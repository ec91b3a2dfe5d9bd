// The decode estimate (simulator/decode.hpp): flash-attn's split heuristic, the schedule's counts, and
// split-KV's speedup where the grid leaves SMs idle.
#include <doctest/doctest.h>

#include "decode.hpp"
#include "decode_check.hpp"
#include "decode_executor.hpp"
#include "gpu_spec.hpp"

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
