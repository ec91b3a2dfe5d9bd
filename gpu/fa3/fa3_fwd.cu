// fa3: a FlashAttention-3-style forward for Hopper (sm_90a), bf16 / fp16 in, fp32 accumulate; causal and
// sliding-window masks (bottom-right), softcap, GQA/MQA (a kv head's query heads packed into one tile where
// that fills it better: PackGQA, scheduler.cuh), seqlen_q != seqlen_k, varlen, LSE out. Head dims
// 64, 128 and 256 (every multiple of 8 up to 256, zero-padded by the copy engine). Every mask function fa2
// takes, on fixed-length batches (a kMask instantiation, so the kernels without one keep their code):
// prefix-LM, document and chunked as each row's interval of keys (params.hpp mask_lo / mask_hi), a dense
// mask as its bits and FlexAttention's block lists at this kernel's tiles (DenseBits, fa3_blocks).
// ALiBi and dropout are fa2's only.
//
// FP8 (fa3_fp8_forward, at the end of this file; since v20 with v19's staged epilogue at d = 128, v21's at 256): the same
// kernel on float8 e4m3 Q, K and V with a descale a
// tensor, O in bf16. Rows of 128 bytes hold 128 elements, so the tiles are 128 x 128 at d = 128 and 256;
// wgmma's k-step is 32 elements (QGMMA); P~ goes to e4m3 in registers; FP8's wgmma reads its B operand only
// K-major, so a transpose kernel writes V^T first, each 32-key group in the order of a thread's P~ registers
// (fp8_key_order), and P~ needs no shuffle. Causal and sliding windows, softcap, GQA; fixed-length batches.
//
// The kernel, by role (one CTA per SM, persistent; a producer and Shape::kConsumers consumer warpgroups):
//   scheduler  scheduler.cuh: tiles (Q block of Br rows, head, batch) handed to the persistent CTAs as
//              they ask (an atomic counter); under a causal mask longest first, in L2-sized sections
//              (under a mask function too: its tiles are as unequal).
//   producer   producer.cuh: warpgroup 0 (one thread issues, the rest of the warpgroup exits after giving back its
//              registers): Q_i by the bulk tensor copy engine (TMA), then K_j and V_j into `stages`
//              128-byte-swizzled buffers, each completing on its own mbarrier; a buffer is refilled
//              when the consumers' arrivals on its "empty" mbarrier say they are done with it. The
//              blocks: sequence.cuh's key_blocks of the window or of a mask function's row intervals,
//              or under a dense mask the Q block's list (BlockWalk), walked alike by the consumers.
//   consumer   consumer.cuh: warpgroups 1 and 2, 64 query rows each: S = Q_i K_j^T by wgmma (both operands
//              from shared memory), softmax on the accumulators in registers, O += P V_j by wgmma with P
//              from registers and V read transposed from shared memory; S_{j+1} and P_j V_j in flight
//              together (intra-warpgroup overlap) and the two warpgroups' GEMMs in turns (ping-pong).
//   softmax    gpu/softmax.cuh on the wgmma accumulators (their layout is mma.sync's C fragment a warp):
//              softcap, the edge mask (blocks that cross it; a dense mask's bits on its partial blocks),
//              row max, exp2 with the scale folded in, row sums, O's rescale; a row's four lanes reduce by
//              shuffles. A row that sees no key ends with O = 0 and LSE = -inf.
//   epilogue   epilogue.cuh: O_i / l_i and LSE_i; a whole tile's O through shared memory (its own buffer at
//              D <= 128, V's stages at 256) and out by a bulk tensor store that runs on under the next tile; a
//              ragged or packed tile, or an O no tensor map takes, straight from registers.
//
// Tile shape: shapes.hpp's fa3_forward_shape (`flashlab shapes --algo fa3`).
//
// Where it stands: NVIDIA H100 80GB HBM3, 2026-11-27, this code (v17), bf16, batch x seqlen = 16k, heads x
// d = 2048, against SDPA's cuDNN backend in the same process (bench/results/gpu-h100-2026-11-27-fa3-v17.csv),
// s = 1k-16k: d = 64 0.89-1.14x (causal 0.77-1.11x), d = 128 0.86-0.97x (causal 0.86-0.99x), d = 256
// 0.90-1.04x (causal 0.84-0.97x); against our fa2 at d = 128, s >= 4k: 1.59-1.69x. (First sweep, v7,
// 2026-11-23: d = 64 0.86-1.01x, d = 128 0.87-0.99x, d = 256 0.78-0.87x.) On an NVIDIA H200, 2026-11-28, v18,
// the same sweep (bench/results/gpu-h200-2026-11-28-fa3-v18.csv; H200 and H100 times are not comparable):
// d = 64 0.94-1.12x (causal 0.88-1.08x), d = 128 0.88-0.98x (causal 0.88-1.02x), d = 256 0.89-1.03x (causal
// 0.86-1.03x); against fa2 at d = 128, s >= 4k, 1.61-1.71x. v19 on that H200, 2026-11-28
// (bench/results/gpu-h200-2026-11-28-fa3-v19.csv): d = 64 0.94-1.11x (causal 0.89-1.12x), d = 128 0.94-1.03x
// (causal 0.96-1.08x), d = 256 0.90-1.02x (causal 0.86-1.00x); against fa2 at d = 128, s >= 4k, 1.69-1.79x.
// v21 on that H200, 2026-11-28 (bench/results/gpu-h200-2026-11-28-fa3-v21.csv; d <= 128 compile as v19's): d = 64
// 0.92-1.13x (causal 0.90-1.10x), d = 128 0.98-1.07x (causal 0.98-1.07x), d = 256 1.00-1.06x (causal
// 0.97-1.01x); against fa2 at d = 128, s >= 4k, 1.68-1.77x. Latest, v22 on that H200, 2026-11-28
// (bench/results/gpu-h200-2026-11-28-fa3-v22.csv): d = 64 0.97-1.13x (causal 0.91-1.14x), d = 128 0.99-1.06x
// (causal 0.95-1.07x), d = 256 1.05-1.11x (causal 0.99-1.11x); against fa2 at d = 128, s >= 4k, 1.73-1.80x.
// The same code re-measured on that H200, 2026-11-29 (bench/results/gpu-h200-2026-11-29-fa3-bwd-v15.csv): d = 64
// 0.99-1.17x (causal 0.88-1.14x), d = 128 0.94-1.03x (causal 0.97-1.14x), d = 256 1.02-1.09x (causal
// 0.96-1.05x), 1.71-1.87x fa2; ours within 2% a cell of the day before, cuDNN's d = 128 at 4k and 8k 5-10% faster.
// Latest, v23 on that H200, 2026-11-29, two sweeps in two processes (bench/results/gpu-h200-2026-11-29-fa3-v23.csv,
// -v23-fwdbwd.csv): d = 64 0.94-1.16x (causal 0.93-1.15x), d = 128 0.96-1.04x (causal 0.98-1.07x), d = 256
// 1.04-1.13x (causal 0.96-1.12x); against fa2 at d = 128, s >= 4k, 1.62-1.81x. Short in them: d = 64 at s = 1k
// (0.94-0.96, causal 0.93-0.94), d = 128 at 1k-4k in one run or the other (0.96-0.99), d = 256 causal at 8k and
// 16k in the second (0.96-0.98; 1.00 and 1.04 in the first): cuDNN's own cells moved 3-7% between the two runs.
// What binds d = 64 at s = 1k (per-tile timeline and power probe, H200, 2026-11-29; gpu/HISTORY.md): a round of
// the three warpgroups' blocks needs 1536 cycles of tensor cores and 1536 of exponentials and takes about their
// sum (2977 cycles); a tile spends 2 blocks' worth beyond its loop, and the ragged first tile two thirds of a
// full one for a third of its rows; both kernels run at the board's 700 W limit, ours at an equal or higher clock.
//
// Version index (bench/gpu_compare.py, bench/ab_libs.py --kernel fa3; H100, the sweep above, TFLOP/s at
// d = 128 s = 16k non-causal / causal with cuDNN's in the same run; full entries in gpu/HISTORY.md):
//   v1  TMA + wgmma, one producer and two consumer warpgroups (setmaxnreg 24 / 240), two K/V stages,
//       persistent round-robin tiles, no overlap of softmax and GEMMs: 589 / 384 (cuDNN 600 / 588).
//   v2  intra-warpgroup overlap (S_{j+1} beside P_j V_j), ping-pong turns, causal tiles longest first
//       over all heads: 617 / 516 vs v1's 562 / 398 in one process; at s = 1k-4k causal 0.78-0.94x of v1.
//   v3  causal tiles longest first within L2-sized sections of heads: 604 / 500 (cuDNN 587 / 574); short
//       causal back above v1, d = 256 s = 16k causal 405 (static deal of unequal tiles: 0.55 balanced).
//   v4  causal tiles handed out by an atomic counter (dynamic): causal +10-35%; DRAM bytes of causal
//       16k d = 128 2.03 -> 0.37 GB (ncu); non-causal d = 256 -8% (spills).
//   v5  non-causal tiles dealt statically again; setmaxnreg 32 / 240 hung: the counts must add up to
//       the launch's 168 a thread (static_assert below). Not kept.
//   v6  v4 + v5's static non-causal deal, setmaxnreg 24 / 240: 604 / 504 (cuDNN 618 / 545).
//   v7  any number of consumer warpgroups; three at d = 64 (Br = 192) measured 0.83-1.06x of v6 (faster
//       only from s = 16k): the default stays two.
//   v8  mask functions (kMask): the row intervals and dense masks of fa2, tiles by the atomic counter.
//       The kernels without a mask compile to the same PTX as v7's. H100, one process, documents
//       (8 in 16k tokens) 10.1x (d = 128) / 11.0x (d = 64) cuDNN with the dense mask at s = 16k; time
//       against density x unmasked 1.04-1.34 (bench/results/masks-h100-2026-11-23-fa3.csv).
//   v9  FP8 forward (2026-11-24): e4m3 in, V^T by a transpose kernel (25 us of the 0.9 ms at d = 128
//       s = 4k under ncu), the bf16 kernels as before (their PTX differs in parameter offsets only). H100, one process, against our bf16 fa3:
//       d = 128 1.04-1.39x (s >= 4k 1.28-1.39x), d = 256 1.23-1.76x (s >= 4k 1.65-1.76x), 980 TFLOP/s at
//       d = 256 s = 16k; against cuDNN's bf16 0.89-1.51x (bench/results/fp8-h100-2026-11-24.csv). Three K/V
//       stages at d = 128: 0.98-1.00x of two. ptxas: no spills in the consumers at d = 128; at d = 256
//       (O 128 + S 64 + P 16 registers a thread) 25 spill instructions in the main loop, as bf16 d = 256.
//       Error with outliers 1.6-2.6x lower with a Hadamard rotation of Q and K before quantizing
//       (bench/fp8_compare.py --accuracy).
//   v10 d = 256: key blocks of 80 (FA3's) in place of 64, 224 KiB of shared memory; more work a tile for
//       its fixed costs (O's rescale is 128 FMULs a thread a tile at d = 256) though ptxas spills more (156
//       bytes, was 84). A/B in one process, H100 (bench/results/ab-h100-2026-11-24-fa3-d256-bc80.csv):
//       0.99-1.07x of 64, faster from s = 4k. The sweep (gpu-h100-2026-11-24-fa3-d256-bc80.csv): 0.82-0.92x
//       cuDNN without a mask, 0.74-0.87x causal (was 0.78-0.87x and 0.76-0.81x on 11-23's machine).
//   v11 PackGQA (FA3's pack_gqa; kPack kernels compiled apart, pack_of's fill rule picks them): a tile is
//       every query head of a kv head at 128 / group positions. H100, one process, d = 128, batch 4,
//       seqlen_k 4k and 16k (bench/results/gqa-pack-h100-2026-11-24.csv): group 8, seqlen_q 1-64: 1.83-2.21x
//       unpacked (256 tiles in two waves become 32 in one), 1.72-2.01x the best SDPA backend at seqlen_q
//       4-64 (at 1, SDPA's split-KV decoding wins, 0.53-0.69x: gpu/decode/ is flashlab's); group 4:
//       1.00-1.14x (128 tiles were one wave already; a tile's time is its walk over the keys). Packed and
//       unpacked outputs agree bit for bit on every row of the bench. The unpacked kernels as v10: A/B
//       both orders in one process 0.985-1.039x (bench/results/ab-h100-2026-11-24-fa3-packgqa-*.csv).
//   v12 under a mask function the Q blocks go longest walk first (tiled::longest_first, made once with the
//       mask; scheduler.cuh m_order) where the causal order had documents' short tiles first. H100,
//       2026-11-26, bench/mask_compare.py --kernel fa3, old and new builds alternating on one machine
//       (bench/results/masks-h100-2026-11-26-fa3-ab-*.csv): documents at d = 64, 8k and 16k, 5% faster in
//       both pairs; the other cells within the runs' spread (d = 128 x 16k documents 0.72-0.81 ms either
//       way); mask_vs_density within 1.2 on 11 and 12 of 12 cells (the old build 10 and 9).
//   v13 the longest-first order's sections from gpu/tile_order.hpp, shared with fa2: evened out (16 pairs
//       that fit 3 a section: 3,3,3,3,2,2, not 3,3,3,3,3,1), and under a mask function sized by the
//       longest walk's K/V, not the whole sequence's (DeviceMask's deal). H100, 2026-11-26, two runs
//       (bench/results/masks-h100-2026-11-26-fa3-deal*.csv): mask_vs_density 0.97-1.21, within 1.2 on 12
//       and 11 of 12 cells; causal without a mask 0.82-0.95x cuDNN at d = 64 and 128, s = 1k-16k
//       (gpu-h100-2026-11-26-fa3-sections.csv), within the spread of earlier runs.
//   v14 d = 256 without spills in the main loop: each GEMM's k-step descriptors from one base an operand,
//       made where they are issued (ptx.cuh fresh) where the compiler had hoisted them out of the tile loop
//       (S = Q K^T's 16 k-steps held 32 registers). SASS spill instructions between the first and last
//       HGMMA: 20-23 -> 0 (unmasked, softcap, PackGQA; masked 65-82 -> 35-53; FP8 d = 256 0, softcapped
//       21); d <= 128 keeps its code. A/B in one process, both orders, H100, 2026-11-26 (bench/results/
//       ab-h100-2026-11-26-fa3-fresh-desc-d256-fwd*.csv): +1.8% to +5.3% a cell (geometric mean of the
//       orders), 509-652 TFLOP/s, 0.82-0.98x cuDNN in the same runs.
//   v15 the warpgroup index from a warp broadcast (ptx.cuh warp_uniform_index), meant to let the compiler keep
//       the descriptors in the uniform registers wgmma reads (R2UR: 6.8 M executed at d = 128 s = 1k against
//       cuDNN's 2.9 M; ncu source counters, bench/results/ncu-sass-h100-2026-11-27-*.csv.gz). At d = 128 it did
//       not: after it R2UR 6.5 M, IMAD 12.3 M (was 11.5), 98.7 M instructions (was 98.3); why d = 256 gains is
//       not established. A/B in one process, both orders, H100, 2026-11-27
//       (ab-h100-2026-11-27-fa3-uniform-warpgroup*.csv): forward d = 256 +1.2-4.4%, d <= 128 0.98-1.05x. Sweep
//       (gpu-h100-2026-11-27-fa3-v15-uniform.csv): d = 64 0.84-1.00x cuDNN, d = 128 0.83-0.94x, d = 256
//       0.83-0.99x; against fa2 at d = 128, s >= 4k, 1.50-1.60x.
//   v16 the step count (and the tile, its lengths and the walk's bounds) from lane 0 (consumer.cuh): ptxas had
//       held the step count in a general register, so each step's K/V stage address and every k-step
//       descriptor went through 64-bit integer adds and R2UR moves. SASS between the first and last HGMMA,
//       d = 128: 1658 -> 1479 instructions, R2UR 77 -> 3, IMAD 192 -> 79 (d = 256 1566 -> 1368, d = 64 1451 ->
//       1323; bench/results/sass-h100-2026-11-27-fa3-v16-opcodes.txt); ncu at d = 128 s = 1k: 90.5 M -> 77.3 M
//       warp instructions (cuDNN's kernel 81.4 M). A/B in one process, both orders, H100, 2026-11-27
//       (ab-h100-2026-11-27-fa3-v16-uniform-steps*.csv): +0.4% to +9.8% a cell, one -1.1% (d = 64 s = 1k);
//       FP8 -0.3% to +7% (fp8-h100-2026-11-27-v16-ab*.csv). The tile and bounds alone (without the step count) moved
//       R2UR 77 -> 61 and measured -2.4% to +5.8%. Sweep (gpu-h100-2026-11-27-fa3-v16.csv): d = 64 0.83-1.00x
//       cuDNN, d = 128 0.88-1.01x, d = 256 0.86-1.04x; against fa2 at d = 128, s >= 4k, 1.53-1.71x.
//   v17 three consumer warpgroups at d = 64 (192-row tiles; gpu/shapes.hpp): v7 measured three at 0.83-1.06x
//       of two; after v16's leaner loop, A/B in one process, both orders, H100, 2026-11-27
//       (ab-h100-2026-11-27-fa3-v17-d64-three-consumers*.csv): +3% to +16% at s = 1k-16k but s = 1k causal,
//       -7.5% (1024 rows make 5 1/3 tiles of 192: the last, the longest walk, a third full). Sweep
//       (gpu-h100-2026-11-27-fa3-v17.csv): d = 64 0.89-1.14x cuDNN, causal 0.77-1.11x (v16 0.88-0.98x, causal
//       0.83-1.00x). Next: a length-dependent pick (two consumers where 192-row tiles leave the longest walks
//       mostly padding).
//   v18 Q blocks counted from the sequence's end where a Q block is taller than a key block (d = 64's 192 x
//       128, d = 256's 128 x 80; no mask function): the ragged block, 1024 = 5 x 192 + 64, is the first, whose
//       causal walk is one key block, not the last, which walked all eight with two thirds of its rows
//       padding (27 block steps against 32; scheduler.cuh first_row, shapes.hpp
//       fa3_forward_q_blocks_from_end, the simulator's Tiling::q_from_end). In place of v17's "next": the
//       192-row tiles keep their +3-16% and lose less at s = 1k causal. A/B in one process, both orders,
//       NVIDIA H200, 2026-11-28 (bench/results/ab-h200-2026-11-28-fa3-v18-*.csv; geometric mean of the
//       orders): d = 64 causal s = 1k +11.3%, 1000 +9.8%, 2k +3.2%, 4k +7.5%, 8k +1.2%, 16k -0.9%; without a
//       mask (the same work) 0.98-1.00x; d = 256 0.96-1.02x (at s = 1000 causal, 59 block steps against 61,
//       +1.9%). Counting from the end everywhere (d = 128 too, where Br = Bc gives every causal Q block the
//       same walk either way) measured 1-2.6% slower at d = 128 over six A/Bs (-every-shape-d128-*.csv):
//       d = 128's kernels (and FP8's, and the mask functions') keep v17's PTX.
//       Against cuDNN on the H200: d = 64 causal s = 1k 0.88x (v17 in the same A/B runs 0.77-0.79x).
//   v19 at 16-bit D <= 128 two Q buffers and O out through shared memory by a bulk tensor store (epilogue.cuh;
//       shapes.hpp fa3_forward_stages_o, 226 KiB at d = 128). A timeline of each warpgroup's tiles
//       (bench/fa3_fwd_timeline.py, H200, d = 128 s = 1k) had put 4.4 us of a 16.1 us tile outside its loop of
//       key blocks: the epilogue's direct stores 2.4 (16 bytes into each of 8 rows a store instruction; 1.6
//       without them), the wait for Q 0.7 (loaded only once the tile before had done its last S = Q K^T).
//       Each alone had been tried (v7's "two Q buffers", "O through shared memory": no gain): the wait each
//       removed the other still held. After: epilogue 1.2 us, 3.1 us outside the loop, 15.0 us a tile. A/B
//       in one process, both orders, H200 (ab-h200-2026-11-28-fa3-v19-*.csv; geometric mean): d = 128 +5.8%
//       to +10.5% (s = 4k causal +1.0%), d = 64 +1.0% to +3.6%, d = 256 (unchanged) 0.99x. Against cuDNN
//       in the sweep: d = 128 0.94-1.08x (v18 0.88-1.02x); at s = 16k 626 / 601 TFLOP/s (cuDNN 613 / 556; H200).
//   v20 the same for FP8 at d = 128 (O, bf16, staged in its own 32 KiB; 130 KiB in all). H200, one process, v19's
//       build beside it (bench/results/fp8-h200-2026-11-28-v20.csv, one order): +3.0% to +6.2% at d = 128, d = 256
//       (unchanged) 0.995-1.035x; FP8 against our bf16 fa3 (v19) at d = 128, s >= 4k, 1.30-1.40x (4k: 1.30,
//       1.31), at d = 256 1.58-1.81x; at d = 128 s = 16k 856 / 834 TFLOP/s (cuDNN's bf16 616 / 562).
//   v21 d = 256 (16-bit and FP8) stages O too, in V's two stages (FlashAttention-3's place for it: no shared
//       memory is left beside Q and the K/V stages): warpgroup w writes its 64 rows into the stage of the tile's
//       block `2 - w` from its last once every warp has released it (warpgroup 0 the block before the last,
//       which warpgroup 1 has passed; warpgroup 1 the last, which warpgroup 0 read before its own epilogue),
//       so neither waits on the other's last P V; its store's issuer waits for the read and arrives on o_free,
//       which the producer waits for before the next tile's first V. Smem 224 KiB as before; SASS spills in the
//       masked kernels 87 -> 42 (20 -> 0 between the HGMMAs), unmasked 26 -> 10. A/B in one process, both
//       orders, H200 (ab-h200-2026-11-28-fa3-v21-o-in-v-*.csv; geometric mean): s = 1k +13.1% (causal +12.2%),
//       2k +10.1% / +6.4%, 4k +3.9% / +1.0%, 16k +3.5% / +1.0%; FP8 d = 256 (fp8-h200-2026-11-28-v21.csv, one
//       order) +14% at 1k, +5-6% at 4k, 1.00x at 16k. Against cuDNN in the sweep: d = 256 1.00-1.06x, causal
//       0.97-1.01x (v19 0.90-1.02x, 0.86-1.00x); s = 16k 696 / 610 TFLOP/s (cuDNN 662 / 602; H200).
//   v22 v21's stage freed a tile later: the store's issuer had waited for the store to read V's stage right after
//       issuing it (cp.async.bulk.wait_group.read) and held its warpgroup there; now it waits once its next tile's Q
//       is in (epilogue.cuh free_o_stage), when the read is long done, and the producer's next V load waits on
//       that. And lane 0 alone reads the tile slot it frees (racecheck had reported the slot's reuse at a CTA's
//       third tile, every head dim, v21's and before). A/B in one process, both orders, H200 (ab-h200-2026-11-28-
//       fa3-v22-*.csv; geometric mean): d = 256 +1.8% to +7.7% (s = 16k +7.7% / +3.4%), d <= 128 1.00-1.03x; FP8
//       (fp8-h200-2026-11-28-v22.csv, one order) +0.9% to +5.7%. Against cuDNN in the sweep: d = 256 1.05-1.11x,
//       causal 0.99-1.11x; s = 16k 739 / 623 TFLOP/s (cuDNN 670 / 602; H200).
//   v23 each consumer warpgroup walks only the key blocks its own 64 rows see, where tiles are taller than key
//       blocks (d = 64's 192 x 128, d = 256's 128 x 80; scheduler.cuh own_end): under a causal mask a 192-row
//       tile's first warpgroups skip the diagonal's last block or two, and a ragged first tile's rows before the
//       sequence compute nothing (at d = 64 s = 1k causal a head's warpgroup-blocks 81 -> 72). The skipping
//       warpgroup still takes its turns of the ping-pong; the producer makes its arrivals on the skipped
//       stages (mbarrier.arrive with a count, once the load is issued). A/B in one process, both orders, H200
//       (ab-h200-2026-11-29-fa3-v23-own-ends-*.csv; geometric mean): d = 64 causal +4.2% at s = 1k, +5.3% at
//       2k, -0.4% / +0.8% at 4k / 16k; without a mask -1.7% to +3.3% (runs' spread); d = 256 -0.2% to +1.4%.
//       Less than the 11% of warpgroup-blocks; not measured why (likely: the turns keep the warpgroups in step,
//       and the last warpgroup's walk, all of the tile's blocks, is as long as before). A first version (the producer's
//       count made a block, the tile's end held through the loop) measured d = 256 -1.5% to -7% in one order
//       (ab-h200-2026-11-29-fa3-own-ends-first-try.csv). d = 128 and FP8 (square tiles) keep their code.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "../cuda_check.hpp"
#include "../kernels.hpp"
#include "../shapes.hpp"
#include "consumer.cuh"
#include "producer.cuh"
#include "tensor_maps.hpp"

namespace flashlab::gpu {
namespace {

using namespace fa3;

// ---- the kernel: set up the mbarriers, split the warpgroups into their roles.

// kMask: a mask function (params.hpp mask_lo / mask_hi, and under a dense mask its bits and fa3_blocks);
// without it the kernels keep the window rule's code as it was. kPack: PackGQA's tiles (scheduler.cuh;
// never with kMask), compiled apart so that the unpacked kernels keep kBr rows a constant.
template <class S, typename T, bool kSoftcap, bool kMask, bool kPack>
__global__ void __launch_bounds__(S::kThreads, 1)
    fa3_forward_kernel(const __grid_constant__ AttentionParams p, const __grid_constant__ CUtensorMap map_q,
                       const __grid_constant__ CUtensorMap map_k, const __grid_constant__ CUtensorMap map_v,
                       const __grid_constant__ CUtensorMap map_o, const TileScheduler sched, const bool o_tma) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)  // sm_90a only: other targets compile an empty kernel, never launched
  extern __shared__ unsigned char smem_raw[];
  auto& sm = *reinterpret_cast<Smem<S, T>*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  const int wg = warp_uniform_index(128);
  if (threadIdx.x == 0) {
    tma_prefetch_map(&map_q);
    tma_prefetch_map(&map_k);
    tma_prefetch_map(&map_v);
    if (o_tma) tma_prefetch_map(&map_o);
    for (int b = 0; b < Smem<S, T>::kQBuffers; ++b) {
      mbar_init(&sm.q_full[b], 1);
      mbar_init(&sm.q_empty[b], S::kConsumerWarps);
    }
    for (int s = 0; s < S::kStages; ++s) {
      mbar_init(&sm.k_full[s], 1);
      mbar_init(&sm.v_full[s], 1);
      mbar_init(&sm.k_empty[s], S::kConsumerWarps);
      mbar_init(&sm.v_empty[s], S::kConsumerWarps);
    }
    for (int slot = 0; slot < 2; ++slot) {
      mbar_init(&sm.tile_full[slot], 1);
      mbar_init(&sm.tile_empty[slot], S::kConsumerWarps);
    }
    if constexpr (kOInV<S, T>) mbar_init(&sm.o_free, S::kConsumers);
    mbar_init_fence();
  }
  __syncthreads();

  if (wg == 0) {
    regs_dealloc<S::kProducerRegs>();
    if (threadIdx.x == 0) produce<S, T, kMask, kPack>(sm, p, sched, &map_q, &map_k, &map_v);
  } else {
    regs_alloc<S::kConsumerRegs>();
    consume<S, T, kSoftcap, kMask, kPack>(sm, p, sched, wg - 1, &map_o, o_tma);
  }
#endif
}

// The shape of each compiled head dim and element type: shapes.hpp's fa3_forward_shape, or for FP8 (one
// byte an element) fa3_fp8_forward_shape.
template <int D, typename T>
struct KernelOf {
  static constexpr TileShape s = sizeof(T) == 1 ? fa3_fp8_forward_shape(D) : fa3_forward_shape(D);
  using type = Shape<D, s.block_n, s.stages, s.block_m / 64>;
  static_assert(s.head_dim == D && type::kBr == s.block_m && type::kThreads == s.threads,
                "shapes.hpp's fa3 forward shape must be a shape of this file's kernel");
  static_assert(sizeof(Smem<type, T>) + 1024 <= size_t(s.smem_bytes),
                "shapes.hpp's shared memory must cover the kernel's (with its 1024-byte alignment)");
  static constexpr size_t smem = s.smem_bytes;
};

// The scheduler's two counters, one pair a stream (launches on one stream run in order; the kernel leaves
// them at zero), allocated and zeroed at a stream's first launch on this device.
int* tile_counter(cudaStream_t stream) {
  static std::mutex mutex;
  static std::map<std::pair<int, cudaStream_t>, int*> counters;
  int dev = 0;
  FLASHLAB_CUDA(cudaGetDevice(&dev));
  const std::lock_guard<std::mutex> lock(mutex);
  int*& c = counters[{dev, stream}];
  if (!c) {
    FLASHLAB_CUDA(cudaMalloc(&c, 2 * sizeof(int)));
    FLASHLAB_CUDA(cudaMemset(c, 0, 2 * sizeof(int)));
  }
  return c;
}

// PackGQA (scheduler.cuh) can run where a tile of br rows holds every query head of a kv head (the group
// divides br) and no mask function is read per row and head (a dense mask's bits, its block lists).
bool packable(const AttentionParams& p, int br) {
  const int group = p.heads_q / p.heads_kv;
  return group <= br && br % group == 0 && !p.mask_lo && !p.bits.words;
}

// A launch's pack (query heads a tile): the group where PackGQA is asked for, or, automatically, where it
// fills more of the tiles' rows: FA3's rule, packing when the unpacked tiles' fill, sq / (br ceil(sq /
// br)), is under 0.9 of the packed tiles' (short query sequences: decoding, speculative steps, prefill
// chunks). Long sequences fill both alike and stay unpacked (the same tiles; no cost to measure there).
int pack_of(const AttentionParams& p, int br) {
  const int group = p.heads_q / p.heads_kv;
  if (p.pack_gqa == PackGqa::off || group == 1 || !packable(p, br)) return 1;
  if (p.pack_gqa == PackGqa::on) return group;
  const auto fill = [br](int64_t rows) { return double(rows) / (double(br) * double((rows + br - 1) / br)); };
  return fill(p.seqlen_q) < 0.9 * fill(int64_t(p.seqlen_q) * group) ? group : 1;
}

// The tile scheduler of a launch: Q blocks of br rows (br / pack positions of pack heads), handed out
// longest first (under a causal mask or a mask function) within sections of (batch, head unit) pairs
// whose K and V (elem_bytes an element, a kv head shared by its group's head units) fit half the L2.
TileScheduler scheduler_of(const AttentionParams& p, int br, int d, int elem_bytes, bool longest_first, int pack,
                           cudaStream_t stream) {
  const double kv_bytes = forward_block_bytes(p.seqlen_k, d, p.heads_q / p.heads_kv / pack, elem_bytes);
  const int sections = l2_sections(device_attribute(cudaDevAttrL2CacheSize), kv_bytes, p.heads_q / pack * p.batch);
  const int rows = br / pack;
  return TileScheduler{(p.seqlen_q + rows - 1) / rows, p.heads_q / pack, p.batch, pack,
                       longest_first, sections, tile_counter(stream)};
}

// Whether a launch's O can go out through a tensor map (epilogue.cuh's staged stores): the map's 16-byte aligned
// base and strides, batch and sequence folded into rows as Q's map folds them.
bool o_fits_tensor_map(const AttentionParams& p) {
  const bool folded = p.cu_seqlens_q || p.o_batch_stride == int64_t(p.seqlen_q) * p.o_row_stride;
  return folded && reinterpret_cast<uintptr_t>(p.o) % 16 == 0 && (p.o_row_stride * 2) % 16 == 0 &&
         (p.o_head_stride * 2) % 16 == 0;
}

// O's map for the staged stores (16-bit O, q_rows rows, 64-row boxes: one consumer warpgroup's), where the launch
// does not pack and O's strides allow; else no map (o_tma false) and `unused` in its place (a kernel parameter
// the kernel then never reads).
std::pair<CUtensorMap, bool> o_map(const AttentionParams& p, int64_t q_rows, int pack, const CUtensorMap& unused) {
  if (pack != 1 || !o_fits_tensor_map(p)) return {unused, false};
  return {rows_heads_map(p.o, q_rows, p.heads_q, p.head_dim, p.o_row_stride, p.o_head_stride, 64), true};
}

template <int D, typename T>
void launch(const AttentionParams& p, cudaStream_t stream) {
  using S = typename KernelOf<D, T>::type;
  constexpr size_t smem = KernelOf<D, T>::smem;
  const bool varlen = p.cu_seqlens_q != nullptr;
  const int64_t q_rows = varlen ? p.total_q : int64_t(p.batch) * p.seqlen_q;
  const int64_t k_rows = varlen ? p.total_k : int64_t(p.batch) * p.seqlen_k;
  const int pack = pack_of(p, S::kBr);
  const CUtensorMap map_q = rows_heads_map(p.q, q_rows, p.heads_q, p.head_dim, p.q_row_stride, p.q_head_stride,
                                           S::kBr / pack, 2, pack);
  const CUtensorMap map_k = rows_heads_map(p.k, k_rows, p.heads_kv, p.head_dim, p.k_row_stride, p.k_head_stride, S::kBc);
  const CUtensorMap map_v = rows_heads_map(p.v, k_rows, p.heads_kv, p.head_dim, p.v_row_stride, p.v_head_stride, S::kBc);
  const bool causal = p.window_right == 0 && p.window_left < 0, mask = p.mask_lo != nullptr;
  check_block_lists(p.fa3_blocks, S::kBr, S::kBc, "fa3 forward");
  // Under a mask function the Q blocks' walks differ in length too, so they take the causal path: the
  // atomic counter, which balances whatever the lengths (a CTA that drew short tiles takes more), within
  // L2-sized sections, in the mask's longest-walk-first order (DeviceMask made the deal once, with the
  // mask: tiled::longest_first, the sections sized by the longest walk's K/V). The causal order, last Q
  // block first, was that for prefix-LM but not for documents (fa3's document rows missed 1.2x their
  // density's time: bench/README.md).
  TileScheduler sched = scheduler_of(p, S::kBr, D, 2, causal || mask, pack, stream);
  if (mask && p.fa3_forward_deal.lines) {
    if (p.fa3_forward_deal.len != sched.num_m)
      throw Error("fa3 forward: the mask's Q block order has " + std::to_string(p.fa3_forward_deal.len) +
                  " blocks, the launch " + std::to_string(sched.num_m) + " (made for other tiles)");
    sched.m_order = p.fa3_forward_deal.lines;
    sched.sections = p.fa3_forward_deal.sections;
  }
  // kMask for every level above none (fa3_forward_unsupported refuses the extras, ALiBi and dropout);
  // kPack where the launch packs (never under a mask function: packable).
  const auto kernel = pick_instantiation(p, [pack](auto cap, auto f) {
    constexpr bool kCap = decltype(cap)::value;
    if constexpr (decltype(f)::value != Features::none) return &fa3_forward_kernel<S, T, kCap, true, false>;
    else return pack > 1 ? &fa3_forward_kernel<S, T, kCap, false, true> : &fa3_forward_kernel<S, T, kCap, false, false>;
  });
  FLASHLAB_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  // O through the copy engine where the kernel stages it (epilogue.cuh).
  const auto [map_o, o_tma] = o_map(p, q_rows, pack, map_q);
  const int grid = std::min(sched.count(), device_attribute(cudaDevAttrMultiProcessorCount));
  kernel<<<grid, S::kThreads, smem, stream>>>(p, map_q, map_k, map_v, map_o, sched, o_tma);
  FLASHLAB_CUDA_LAUNCHED();
}

// ---- FP8: e4m3 Q, K and V with per-tensor descales, bf16 O. The same kernel on 1-byte elements; V^T
// written first by fp8_transpose_v, since FP8's wgmma reads its B operand K-major only.

// V^T's key order within each group of 32 keys (consumer.cuh p_to_a): position k holds key fp8_key_order(k).
__host__ __device__ constexpr int fp8_key_order(int k) {
  const int half = k / 16, t = (k % 16) / 4, i = k % 4;
  return 16 * half + (i < 2 ? 2 * t + i : 8 + 2 * t + i - 2);
}
static_assert(fp8_key_order(0) == 0 && fp8_key_order(2) == 8 && fp8_key_order(4) == 2 && fp8_key_order(31) == 31,
              "the k32 A fragment's columns 4t..4t+3 are a thread's keys 2t, 2t+1, 8+2t, 9+2t");

// V (batch, seqlen_k, heads_kv, head_dim) -> V^T (batch x heads_kv planes, head_dim rows, `keys` = seqlen_k
// rounded up to 32), each 32-key group in fp8_key_order, keys past seqlen_k zero. A CTA of 256 threads moves
// a 64-key x 64-column tile through shared memory: in, 16 bytes of a key's row a thread; out, a 4 x 4 block
// of bytes a thread (four keys' words, transposed by byte permutes into four columns' words), sixteen
// threads writing 64 bytes of a row of V^T.
__global__ void __launch_bounds__(256) fp8_transpose_v(const AttentionParams p, uint8_t* vt, int keys) {
  __shared__ __align__(16) uint8_t tile[64][64 + 16];
  const int key0 = blockIdx.x * 64, col0 = blockIdx.y * 64, plane = blockIdx.z;
  const int b = plane / p.heads_kv, h = plane % p.heads_kv;
  const uint8_t* v = static_cast<const uint8_t*>(p.v) + b * p.v_batch_stride + h * p.v_head_stride;
  {
    const int r = threadIdx.x / 4, c = (threadIdx.x % 4) * 16;
    uint4 x = make_uint4(0, 0, 0, 0);
    if (key0 + r < p.seqlen_k && col0 + c < p.head_dim)
      x = *reinterpret_cast<const uint4*>(v + int64_t(key0 + r) * p.v_row_stride + col0 + c);
    *reinterpret_cast<uint4*>(&tile[r][c]) = x;
  }
  __syncthreads();
  const int quad = threadIdx.x % 16, c4 = threadIdx.x / 16 * 4;  // V^T's keys 4 quad .. + 3, columns c4 .. + 3
  if (col0 + c4 >= p.head_dim || key0 + 4 * quad >= keys) return;
  uint32_t w[4];  // the four keys' bytes of columns c4 .. c4 + 3
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int k = 4 * quad + i;
    w[i] = *reinterpret_cast<const uint32_t*>(&tile[k / 32 * 32 + fp8_key_order(k % 32)][c4]);
  }
  const uint32_t lo01 = __byte_perm(w[0], w[1], 0x5140), hi01 = __byte_perm(w[0], w[1], 0x7362);
  const uint32_t lo23 = __byte_perm(w[2], w[3], 0x5140), hi23 = __byte_perm(w[2], w[3], 0x7362);
  const uint32_t col[4] = {__byte_perm(lo01, lo23, 0x5410), __byte_perm(lo01, lo23, 0x7632),
                           __byte_perm(hi01, hi23, 0x5410), __byte_perm(hi01, hi23, 0x7632)};
  uint8_t* out = vt + (int64_t(plane) * p.head_dim + col0 + c4) * keys + key0 + 4 * quad;
#pragma unroll
  for (int c = 0; c < 4; ++c) *reinterpret_cast<uint32_t*>(out + int64_t(c) * keys) = col[c];
}

// V^T's buffer: one a stream of a device (launches on one stream run in order, so one buffer serves
// them all), kept and grown to the largest problem run so far (cudaFree and cudaMalloc synchronize the
// device, so that happens only when a problem outgrows it).
uint8_t* fp8_vt_buffer(size_t bytes, cudaStream_t stream) {
  static std::mutex mutex;
  static std::map<std::pair<int, cudaStream_t>, std::pair<void*, size_t>> buffers;
  int dev = 0;
  FLASHLAB_CUDA(cudaGetDevice(&dev));
  const std::lock_guard<std::mutex> lock(mutex);
  auto& [ptr, size] = buffers[{dev, stream}];
  if (size < bytes) {
    if (ptr) FLASHLAB_CUDA(cudaFree(ptr));
    ptr = nullptr;
    size = 0;
    FLASHLAB_CUDA(cudaMalloc(&ptr, bytes));
    size = bytes;
  }
  return static_cast<uint8_t*>(ptr);
}

template <int D>
void launch_fp8(const AttentionParams& in, cudaStream_t stream) {
  using T = __nv_fp8_e4m3;
  using S = typename KernelOf<D, T>::type;
  constexpr size_t smem = KernelOf<D, T>::smem;
  AttentionParams p = in;
  p.scale = in.scale * in.descale_q * in.descale_k;  // scores of the e4m3 values -> true scores, in one factor
  const int keys = (p.seqlen_k + 31) / 32 * 32;
  const int64_t planes = int64_t(p.batch) * p.heads_kv;
  uint8_t* vt = fp8_vt_buffer(size_t(planes) * p.head_dim * keys, stream);
  fp8_transpose_v<<<dim3((keys + 63) / 64, (p.head_dim + 63) / 64, unsigned(planes)), 256, 0, stream>>>(p, vt, keys);
  FLASHLAB_CUDA_LAUNCHED();
  const int pack = pack_of(p, S::kBr);
  const CUtensorMap map_q = rows_heads_map(p.q, int64_t(p.batch) * p.seqlen_q, p.heads_q, p.head_dim, p.q_row_stride,
                                           p.q_head_stride, S::kBr / pack, 1, pack);
  const CUtensorMap map_k = rows_heads_map(p.k, int64_t(p.batch) * p.seqlen_k, p.heads_kv, p.head_dim,
                                           p.k_row_stride, p.k_head_stride, S::kBc, 1);
  const CUtensorMap map_v = vt_map(vt, keys, p.head_dim, planes, D);
  const bool causal = p.window_right == 0 && p.window_left < 0;
  const TileScheduler sched = scheduler_of(p, S::kBr, D, 1, causal, pack, stream);
  const auto kernel = p.softcap > 0.f ? (pack > 1 ? &fa3_forward_kernel<S, T, true, false, true>
                                                  : &fa3_forward_kernel<S, T, true, false, false>)
                                      : (pack > 1 ? &fa3_forward_kernel<S, T, false, false, true>
                                                  : &fa3_forward_kernel<S, T, false, false, false>);
  FLASHLAB_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  const int grid = std::min(sched.count(), device_attribute(cudaDevAttrMultiProcessorCount));
  const auto [map_o, o_tma] = o_map(p, int64_t(p.batch) * p.seqlen_q, pack, map_q);  // O in bf16
  kernel<<<grid, S::kThreads, smem, stream>>>(p, map_q, map_k, map_v, map_o, sched, o_tma);
  FLASHLAB_CUDA_LAUNCHED();
}

template <typename T>
void dispatch_dim(const AttentionParams& p, cudaStream_t stream) {
  switch (fa3_padded_head_dim(p.head_dim)) {
    case 64: return launch<64, T>(p, stream);
    case 128: return launch<128, T>(p, stream);
    case 256: return launch<256, T>(p, stream);
  }
  throw Error("fa3 forward: head_dim " + std::to_string(p.head_dim) + " is not supported");
}

// "" unless PackGQA is asked for where it cannot run.
std::string pack_unsupported(const AttentionParams& p, int br) {
  const int group = p.heads_q / p.heads_kv;
  if (p.pack_gqa != PackGqa::on || group == 1 || packable(p, br)) return "";
  if (p.mask_lo || p.bits.words) return "pack_gqa with a mask function (a packed tile's rows are several heads')";
  return "pack_gqa with " + std::to_string(group) + " query heads a kv head (packing needs a group that divides " +
         "the tile's " + std::to_string(br) + " rows)";
}

}  // namespace

// "" on an sm_90 device, else why fa3 cannot run here.
std::string hopper_unsupported() {
  int dev = 0, major = 0, minor = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess)
    return "no CUDA device";
  if (major != 9 || minor != 0)
    return "compute capability " + std::to_string(major) + "." + std::to_string(minor) +
           " (fa3 needs sm_90a: wgmma and the bulk tensor copy engine exist only on Hopper)";
  return "";
}

std::string fa3_forward_unsupported(const AttentionParams& p) {
  if (p.dtype == Dtype::fp32) return "fp32 (fa3 runs bf16 and fp16)";
  if (fa3_padded_head_dim(p.head_dim) == 0) return "head_dim " + std::to_string(p.head_dim) + " (" + kFa3HeadDims + ")";
  if (std::string why = hopper_unsupported(); !why.empty()) return why;
  if (p.cu_seqlens_q && (p.total_q <= 0 || p.total_k <= 0)) return "varlen without total_q / total_k";
  const bool folded = p.cu_seqlens_q != nullptr ||
                      (p.q_batch_stride == int64_t(p.seqlen_q) * p.q_row_stride &&
                       p.k_batch_stride == int64_t(p.seqlen_k) * p.k_row_stride &&
                       p.v_batch_stride == int64_t(p.seqlen_k) * p.v_row_stride);
  if (!folded) return "batch strides other than seqlen x row stride (fa3 folds batch and sequence into rows)";
  if (p.mask_lo && p.cu_seqlens_q) return "a mask function with varlen (fa3 takes masks on fixed-length batches)";
  if (p.bits.words && !p.fa3_blocks.counts)
    return "a dense mask without fa3's block lists (params.hpp fa3_blocks; launch.hpp DeviceMask makes them)";
  return pack_unsupported(p, fa3_forward_shape(p.head_dim).block_m);
}

std::string fa3_fp8_forward_unsupported(const AttentionParams& p) {
  if (fa3_fp8_padded_head_dim(p.head_dim) == 0)
    return "head_dim " + std::to_string(p.head_dim) + " (" + kFa3Fp8HeadDims + ")";
  if (std::string why = hopper_unsupported(); !why.empty()) return why;
  if (p.cu_seqlens_q) return "varlen (the FP8 forward takes fixed-length batches: V^T is laid out a batch entry a plane)";
  if (p.mask_lo || p.bits.words) return "mask functions (the FP8 forward takes causal masks and sliding windows)";
  if (p.alibi_slopes || p.dropout_threshold) return "ALiBi and dropout (fa2 has them)";
  const bool folded = p.q_batch_stride == int64_t(p.seqlen_q) * p.q_row_stride &&
                      p.k_batch_stride == int64_t(p.seqlen_k) * p.k_row_stride;
  if (!folded) return "batch strides other than seqlen x row stride (fa3 folds batch and sequence into rows)";
  for (int64_t stride : {p.q_row_stride, p.q_head_stride, p.k_row_stride, p.k_head_stride, p.v_batch_stride,
                         p.v_row_stride, p.v_head_stride})
    if (stride % 16 != 0) return "strides that are not multiples of 16 bytes (the copy engine's rule)";
  if (!(p.descale_q > 0.f && p.descale_k > 0.f && p.descale_v > 0.f) || !std::isfinite(p.descale_q) ||
      !std::isfinite(p.descale_k) || !std::isfinite(p.descale_v))
    return "descale factors must be positive and finite";
  return pack_unsupported(p, fa3_fp8_forward_shape(p.head_dim).block_m);
}

void fa3_fp8_forward(const AttentionParams& p, cudaStream_t stream) {
  const std::string why = fa3_fp8_forward_unsupported(p);
  if (!why.empty()) throw Error("fa3 FP8 forward: unsupported: " + why);
  if (fa3_fp8_padded_head_dim(p.head_dim) == 128) launch_fp8<128>(p, stream);
  else launch_fp8<256>(p, stream);
}

void fa3_forward(const AttentionParams& p, cudaStream_t stream) {
  const std::string why = fa3_forward_unsupported(p);
  if (!why.empty()) throw Error("fa3 forward: unsupported: " + why);
  if (p.dtype == Dtype::bf16) dispatch_dim<__nv_bfloat16>(p, stream);
  else dispatch_dim<__half>(p, stream);
}

}  // namespace flashlab::gpu
