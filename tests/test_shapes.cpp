// gpu/shapes.hpp: the tile shapes the kernels launch, as the simulator and `flashlab shapes` read them;
// the kernels' host-and-device helpers (tile_order.hpp, row_search.hpp).
// That the kernels compile exactly these shapes is checked where they are instantiated (static_asserts
// in gpu/*.cu); here, the rules a caller relies on.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "row_search.hpp"
#include "shapes.hpp"
#include "tile_order.hpp"

using namespace flashlab::gpu;

namespace {
constexpr int kH100SmemPerBlock = 232448, kA100SmemPerBlock = 166912, kL4SmemPerBlock = 101376;  // presets/*.json

bool consistent(const TileShape& s) {
  return s.threads == 32 * s.warps && s.block_m > 0 && s.block_n > 0 && s.smem_bytes > 0 && s.threads <= 1024 &&
         std::string(s.why).size() > 20;
}
}  // namespace

TEST_CASE("shapes: fa2 runs every multiple of 8 up to 256 in the shape of the head dim it pads to") {
  for (int d = 8; d <= 256; d += 8) {
    const TileShape f = fa2_forward_shape(d), b = fa2_backward_shape(d, kH100SmemPerBlock);
    CAPTURE(d);
    CHECK(f.head_dim == fa2_padded_head_dim(d));
    CHECK(f.head_dim >= d);
    CHECK(consistent(f));
    CHECK(consistent(b));
    CHECK(consistent(fa2_backward_dq_shape(d)));
    CHECK(f.smem_bytes <= kH100SmemPerBlock);
    CHECK(b.smem_bytes <= kH100SmemPerBlock);
    // Only d = 256 runs the warp-pair kernel; its pairs own 32 query rows each.
    CHECK(f.warp_pairs == (f.head_dim == 256));
    if (f.warp_pairs) CHECK(f.block_m == 16 * f.warps);
    else CHECK(f.block_m == 16 * f.mma_tiles * f.warps);
  }
  CHECK(fa2_forward_shape(80).block_m == fa2_forward_shape(128).block_m);
  CHECK(fa2_forward_shape(80).block_n == fa2_forward_shape(128).block_n);
  for (int d : {0, -8, 7, 61, 264}) {
    CAPTURE(d);
    CHECK_FALSE(fa2_forward_shape(d).supported());
    CHECK_FALSE(fa2_backward_shape(d, kH100SmemPerBlock).supported());
    CHECK(std::string(fa2_forward_shape(d).why).find("multiples of 8") != std::string::npos);
  }
}

TEST_CASE("shapes: fa2's backward takes smaller tiles where the device has less shared memory per block") {
  for (int d : {64, 128, 256}) {
    CAPTURE(d);
    const TileShape most = fa2_backward_shape(d, kH100SmemPerBlock);
    const TileShape least = fa2_backward_shape(d, 0);
    CHECK(least.block_m * least.block_n <= most.block_m * most.block_n);
    CHECK(least.smem_bytes <= most.smem_bytes);
    // Each shape is the one chosen exactly from its own shared memory upwards.
    CHECK(fa2_backward_shape(d, most.smem_bytes).block_m == most.block_m);
    if (least.block_m != most.block_m) CHECK(fa2_backward_shape(d, most.smem_bytes - 1).block_m == least.block_m);
  }
  // An A100 (163 KiB a block) keeps d = 64's 128 x 128 but not d = 256's 64 query rows.
  CHECK(fa2_backward_shape(64, kA100SmemPerBlock).block_m == 128);
  CHECK(fa2_backward_shape(256, kA100SmemPerBlock).block_m < fa2_backward_shape(256, kH100SmemPerBlock).block_m);
  CHECK(fa2_backward_shape(256, kA100SmemPerBlock).smem_bytes <= kA100SmemPerBlock);
}

TEST_CASE("shapes: fa1_minimal, standard and the FA3 forward") {
  CHECK(fa1_minimal_shape(59).supported());
  CHECK(fa1_minimal_shape(59).head_dim == 59);  // not padded
  CHECK(fa1_minimal_shape(59).threads == fa1_minimal_shape(59).block_m);  // a thread a query row
  CHECK(fa1_minimal_shape(256).smem_bytes == 2 * fa1_minimal_shape(128).smem_bytes);
  CHECK_FALSE(fa1_minimal_shape(257).supported());
  CHECK(standard_softmax_shape(64).threads == 256);
  CHECK(fa3_forward_shape(128).block_n == 128);
  CHECK(fa3_forward_shape(256).block_n == 80);  // FA3's 80 keys at d = 256 (224 KiB of shared memory)
  CHECK(consistent(fa3_forward_shape(256)));
  CHECK(fa3_forward_shape(80).head_dim == 128);  // padded, as fa2
  CHECK(fa3_forward_shape(256).smem_bytes <= kH100SmemPerBlock);
  CHECK_FALSE(fa3_forward_shape(260).supported());
  for (int d : {64, 128}) {  // the backward: every wgmma 64 rows high, its shared memory within an H100's
    CAPTURE(d);
    const TileShape b = fa3_backward_shape(d);
    CHECK(consistent(b));
    CHECK(b.block_n == 128);
    CHECK(b.block_m * d == 64 * 128);  // a consumer's share of a step's dQ: 64 x 64
    CHECK(b.smem_bytes <= kH100SmemPerBlock);
  }
  CHECK(fa3_backward_shape(72).head_dim == 128);
  const TileShape b256 = fa3_backward_shape(256);  // the split kernel: 64 keys, the head dim halved a consumer
  CHECK(consistent(b256));
  CHECK(b256.block_m == 64);
  CHECK(b256.block_n == 64);
  CHECK(b256.smem_bytes <= kH100SmemPerBlock);
  CHECK(fa3_backward_shape(200).head_dim == 256);
  CHECK_FALSE(fa3_backward_shape(264).supported());
  // The split kernel is the padded head dims of 256 only (the kernel's kSplitD and the simulator's turn
  // keepers ask the same predicate).
  CHECK(fa3_backward_splits_head_dim(256));
  CHECK(fa3_backward_splits_head_dim(200));
  CHECK_FALSE(fa3_backward_splits_head_dim(128));
  CHECK_FALSE(fa3_backward_splits_head_dim(72));
  CHECK_FALSE(fa3_backward_splits_head_dim(264));
}

TEST_CASE("shapes: the lookup by name lists a pass's kernels and says why it refuses") {
  std::string error;
  auto rows = kernel_shapes("fa2", false, 96, "bf16", kH100SmemPerBlock, &error);
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].shape.head_dim == 128);
  CHECK(rows[0].pass == "fwd");
  rows = kernel_shapes("fa2", true, 256, "fp16", kA100SmemPerBlock, &error);
  REQUIRE(rows.size() == 2);  // dkdv, and the deterministic dq kernel
  CHECK(rows[0].shape.block_m == fa2_backward_shape(256, kA100SmemPerBlock).block_m);
  CHECK(kernel_shapes("all", false, 64, "bf16", kH100SmemPerBlock, &error).size() == shape_algos().size());
  CHECK(kernel_shapes("all", false, 64, "fp32", kH100SmemPerBlock, &error).size() == 2);  // standard, fa1-minimal
  CHECK(kernel_shapes("all", true, 64, "bf16", kH100SmemPerBlock, &error).size() == 3);   // fa2's two, fa3's
  CHECK(kernel_shapes("all", true, 64, "bf16", kA100SmemPerBlock, &error).size() == 2);   // fa3's is over 163 KiB
  CHECK(kernel_shapes("all", true, 256, "bf16", kH100SmemPerBlock, &error).size() == 3);  // fa3's split kernel
  CHECK(kernel_shapes("all", true, 264, "bf16", kH100SmemPerBlock, &error).empty());      // no head dim over 256

  struct Refusal {
    std::string algo;
    bool backward;
    int head_dim;
    std::string dtype;
    int smem;
    std::string says;
  };
  const Refusal refusals[] = {
      {"fa4", false, 64, "bf16", kH100SmemPerBlock, "unknown algorithm 'fa4'"},
      {"fa2", false, 100, "bf16", kH100SmemPerBlock, "head dim 100 is not supported"},
      {"fa2", false, 64, "fp32", kH100SmemPerBlock, "not fp32"},
      {"fa2", false, 64, "fp4", kH100SmemPerBlock, "unknown dtype 'fp4'"},
      {"fa2", false, 64, "fp8", kH100SmemPerBlock, "fp8 is fa3's forward only"},
      {"fa3", true, 64, "fp8", kH100SmemPerBlock, "fp8 is fa3's forward only"},
      {"fa3", false, 200, "fp8", kH100SmemPerBlock, "multiples of 16"},
      {"fa1-minimal", true, 64, "fp32", kH100SmemPerBlock, "no backward"},
      {"fa3", true, 256, "bf16", kA100SmemPerBlock, "bytes of shared memory per block"},
      {"fa2", true, 128, "bf16", kL4SmemPerBlock, "bytes of shared memory per block"},
      {"all", false, 300, "bf16", kH100SmemPerBlock, "head dim 300"},
  };
  for (const Refusal& r : refusals) {
    CAPTURE(r.says);
    error.clear();
    CHECK(kernel_shapes(r.algo, r.backward, r.head_dim, r.dtype, r.smem, &error).empty());
    CHECK(error.find(r.says) != std::string::npos);
  }
}

TEST_CASE("decode splits: until the CTAs stream at the HBM's rate, within one wave and the key blocks") {
  // An H100: 3.35 TB/s peak at 90%, a CTA at 51 GB/s: 60 CTAs keep it busy.
  const double hbm = 0.9 * 3.352e12, cta = 51e9;
  CHECK(decode_split_count(8, 132, 512, hbm, cta) == 8);   // batch 1 x 8 kv heads: 64 CTAs
  CHECK(decode_split_count(16, 132, 512, hbm, cta) == 4);
  CHECK(decode_split_count(32, 132, 512, hbm, cta) == 2);
  CHECK(decode_split_count(64, 132, 512, hbm, cta) == 1);  // batch 8: the grid alone is enough
  CHECK(decode_split_count(512, 132, 512, hbm, cta) == 1);
  CHECK(decode_split_count(8, 16, 512, hbm, cta) == 2);    // never past one wave of the slots
  CHECK(decode_split_count(8, 132, 3, hbm, cta) == 3);     // nor past one CTA step of keys a split
  CHECK(decode_split_count(1, 1000, 4096, 100 * hbm, cta) == 128);
  // An H200's 4.8 TB/s takes more: 85 CTAs, 11 splits at batch 1.
  CHECK(decode_split_count(8, 132, 512, 0.9 * 4.8e12, cta) == 11);
}

TEST_CASE("decode's split rule: a CTA streams its blocks by Little's law; the H200's picks are the measured best") {
  // Two stages: a warp's block every max(latency, compute); one stage (d = 256): latency + compute.
  const TileShape d128 = decode_split_shape(128), d256 = decode_split_shape(256);
  const double block128 = 2.0 * 32 * 128 * 2;  // a 32-key block of K and V, bf16
  CHECK(decode_cta_bytes_per_s(d128, kDecodeFullLatencyS) == doctest::Approx(3 * block128 / kDecodeFullLatencyS));
  CHECK(decode_cta_bytes_per_s(d128, 0.0) == doctest::Approx(3 * block128 / kDecodeBlockIdlePeriodS));  // 60 GB/s
  CHECK(decode_cta_bytes_per_s(d256, kDecodeFullLatencyS) ==
        doctest::Approx(4 * 2 * block128 / (kDecodeFullLatencyS + 2 * kDecodeBlockIdlePeriodS)));
  CHECK(decode_block_compute_s(decode_split_shape(64)) == doctest::Approx(kDecodeBlockIdlePeriodS / 2));
  // The H200 (132 SMs, 4.8 TB/s peak) at its slots: the counts bench/results/decode-splits-h200-2026-11-29-v8.csv
  // measured within 1-4% of the best (batch 1: 12-15 at d = 128, 11-16 at 256, 16-32 at 64; batch 4 and 8: 4, 2).
  const double h200 = 4.8e12;
  CHECK(decode_splits_for(d128, 8, 264, 8192, h200) == 14);
  CHECK(decode_splits_for(d128, 32, 264, 16384, h200) == 4);
  CHECK(decode_splits_for(d128, 64, 264, 8192, h200) == 2);
  CHECK(decode_splits_for(d128, 512, 264, 1024, h200) == 1);
  CHECK(decode_splits_for(d256, 8, 132, 65536, h200) == 12);
  CHECK(decode_splits_for(decode_split_shape(64), 8, 528, 65536, h200) == 27);
}

TEST_CASE("decode's split kernel: two CTAs an SM up to d = 128, so one's start and merge overlap the other's stream") {
  constexpr int kSmPerSm = 233472, kReservedPerCta = 1024;  // an H100's or H200's 228 KiB an SM, 1 KiB a CTA
  auto per_sm = [](const TileShape& s) { return kSmPerSm / (s.smem_bytes + kReservedPerCta); };
  for (int d : {8, 64, 96, 128}) {
    const TileShape s = decode_split_shape(d);
    CAPTURE(d);
    CHECK(s.supported());
    CHECK(per_sm(s) >= 2);
    CHECK(s.block_n == 32 * s.warps);  // a 32-key block a warp a step
    CHECK(s.stages == 2);              // one block loads while the other computes
  }
  CHECK(per_sm(decode_split_shape(256)) == 1);  // four warps of one stage: 136 KiB
  CHECK(decode_split_shape(256).warps == 4);
  CHECK(!decode_split_shape(264).supported());
  CHECK(!decode_split_shape(100).supported());  // multiples of 8
}

TEST_CASE("tile_order: the longest-first deal takes every tile once, section by section, in the line order") {
  // 5 pairs in 2 sections (3 and 2 pairs), 4 lines in the order 2, 0, 3, 1.
  const std::vector<int> order{2, 0, 3, 1};
  std::set<std::pair<int, int>> seen;
  std::vector<DealtTile> tiles;
  for (int t = 0; t < 4 * 5; ++t) {
    tiles.push_back(longest_first_tile(t, 4, 5, 2, order.data()));
    seen.insert({tiles.back().line, tiles.back().pair});
  }
  CHECK(seen.size() == 20);
  // The first section: pairs 0-2 at line 2, then at line 0, ...; the second: pairs 3-4.
  CHECK(tiles[0].line == 2);
  CHECK(tiles[2].pair == 2);
  CHECK(tiles[3].line == 0);
  CHECK(tiles[3].pair == 0);
  CHECK(tiles[11].line == 1);
  CHECK(tiles[12].pair == 3);
  CHECK(tiles[12].line == 2);
  CHECK(tiles[19].line == 1);
  CHECK(tiles[19].pair == 4);
  // Without an order: from the last line (causal).
  CHECK(longest_first_tile(0, 4, 5, 1, nullptr).line == 3);
  CHECK(longest_first_tile(19, 4, 5, 1, nullptr).line == 0);
}

TEST_CASE("tile_order: sections as few as half the L2 allows, evened out") {
  const double l2 = 50e6;  // half of it: 25 MB
  CHECK(l2_sections(l2, 8e6, 16) == 6);  // 3 pairs fit: 6 sections, of 3, 3, 3, 3, 2, 2
  CHECK(l2_sections(l2, 1.6e6, 16) == 2);  // 15 fit: two sections of 8, not 15 and 1
  CHECK(l2_sections(l2, 1e3, 16) == 1);
  CHECK(l2_sections(l2, 1e9, 16) == 16);  // not even one fits: a pair a section
  CHECK(l2_sections(l2, 8e6, 1) == 1);
  // 16 pairs in 6 sections: the first four take 3, the last two 2.
  CHECK(longest_first_tile(4 * 3 * 10 - 1, 10, 16, 6, nullptr).pair == 11);
  CHECK(longest_first_tile(4 * 3 * 10, 10, 16, 6, nullptr).pair == 12);
  CHECK(longest_first_tile(16 * 10 - 1, 10, 16, 6, nullptr).pair == 15);
}

TEST_CASE("tile_order: rotated walks' turns go by step, each place's ranks 0, 1, ... once, ties from the last") {
  // Every K/V block j walks every place, starting at j mod places; the turns at a place, enumerated here by
  // (step, then the later block first), against the closed form the kernels use.
  for (int places = 1; places < 20; ++places)
    for (int blocks = 1; blocks < 50; ++blocks) {
      std::vector<std::vector<std::pair<int, int>>> visits(size_t(places), std::vector<std::pair<int, int>>{});
      for (int j = 0; j < blocks; ++j)
        for (int t = 0; t < places; ++t) visits[size_t((t + j % places) % places)].push_back({t, -j});
      int wrong = 0;
      for (auto& at : visits) {
        std::sort(at.begin(), at.end());
        for (size_t r = 0; r < at.size(); ++r)
          wrong += rotated_turn_rank(places, at[r].first, -at[r].second, blocks) != int(r);
      }
      CHECK_MESSAGE(wrong == 0, places << " places, " << blocks << " blocks");
    }
  CHECK(rotates_walks(true, 132, 132));
  CHECK_FALSE(rotates_walks(true, 133, 132));  // a block could wait on one not yet launched
  CHECK_FALSE(rotates_walks(false, 16, 132));   // a mask or window: walks differ, no rotation
}

TEST_CASE("row_search: the 32-ary search finds the first row seen, and never a row past the range") {
  // Every range [a, z) up to 2100 rows from a few starts, the first seen row anywhere in it or past it
  // (none seen): the answer is that row, z if it lies past. The kernels' `hits` sets the bit of every
  // row past the range, as here. (A range of 1088 rows with none seen once ended a row past z, which
  // made fa2's and fa3's backward walk a Q block past the sequence: fa3's then added another entry's
  // rows into dK and dV.)
  int wrong = 0, searches = 0;
  for (int a : {0, 1, 37, 128})
    for (int z = a; z <= a + 2100; ++z)
      for (int edge = a; edge <= z + 40; edge += edge < a + 70 || edge > z - 70 ? 1 : 29) {
        const auto hits = [&](int a0, int step, int z0) {
          unsigned bits = 0;
          for (int lane = 0; lane < 32; ++lane) {
            const int row = a0 + lane * step;
            if (row >= z0 || row >= edge) bits |= 1u << lane;
          }
          return bits;
        };
        const int want = edge < z ? edge : z;
        wrong += first_row_32ary(a, z, hits) != want;
        ++searches;
      }
  CHECK(searches > 100000);
  CHECK(wrong == 0);
}
