// The tiled decode: a DecodeProblem run by its SplitSchedule on real data.
//
//   decode(d, tensors, tiling[, observer]) -> O, LSE, and the caches after the append
//
// 1. prologue, per (batch, kv head): K_new rows rotated (fp32, rounded to the dtype) and V_new rows
//    written into a copy of the cache at cache_seqlens[b] + t, through DecodeProblem::cache_row;
// 2. per (batch, query head), the schedule's steps: Q_i loaded and rotated on chip, K_j and V_j
//    read from the cache through the block table, FA2's online softmax within each split, the
//    split's partial O and LSE stored (fp32), then the combine.
// With no observer the (batch, head) pairs run in parallel; with one, serially in schedule order,
// reporting every transfer (Where::split says which split), tile, row statistic and combine.
#pragma once
#include "events.hpp"
#include "flashlab/decode_tensors.hpp"
#include "split_schedule.hpp"

namespace flashlab::tiled {

// The executor's decode tiles: all q_len rows in one Q block (decoding has few), and key blocks of 128.
inline constexpr Tiling kDecodeDefault{64, 128};

DecodeOutputs<float> decode(const DecodeProblem& d, const DecodeTensors& in, Tiling tiling = kDecodeDefault,
                            Observer* observer = nullptr);

}  // namespace flashlab::tiled
