#include "launch.hpp"

#include <algorithm>
#include <vector>

#include "cuda_check.hpp"
#include "flashlab/dropout.hpp"
#include "flashlab/error.hpp"
#include "kernels.hpp"
#include "tile_order.hpp"
#include "block_mask.hpp"

namespace flashlab::gpu {

AttentionParams params_of(const Problem& p, Dtype dt) {
  AttentionParams a;
  a.batch = int(p.batch);
  a.heads_q = int(p.heads_q);
  a.heads_kv = int(p.heads_kv);
  a.seqlen_q = int(p.seqlen_q);
  a.seqlen_k = int(p.seqlen_k);
  a.head_dim = int(p.head_dim);
  a.scale = float(p.softmax_scale());
  a.softcap = float(p.softcap);
  a.window_left = int(p.left());
  a.window_right = int(p.right());
  a.dtype = dt;
  if (p.dropout_p > 0) {
    a.dropout_seed = p.seed;
    a.dropout_threshold = dropout::threshold(p.dropout_p);
    a.dropout_keep_scale = float(1.0 / (1.0 - p.dropout_p));
  }
  set_contiguous_strides(a);
  return a;
}

DeviceSlopes::DeviceSlopes(const Problem& problem, AttentionParams& p, cudaStream_t stream) : stream_(stream) {
  if (!problem.alibi) return;
  std::vector<float> slopes(size_t(problem.heads_q));
  for (int64_t h = 0; h < problem.heads_q; ++h) slopes[size_t(h)] = float(problem.alibi_slope(h));
  FLASHLAB_CUDA(cudaMallocAsync(&ptr_, slopes.size() * 4, stream));
  FLASHLAB_CUDA(cudaMemcpyAsync(ptr_, slopes.data(), slopes.size() * 4, cudaMemcpyHostToDevice, stream));
  FLASHLAB_CUDA(cudaStreamSynchronize(stream));  // the pageable source is freed when this returns
  p.alibi_slopes = static_cast<const float*>(ptr_);
}

namespace {

// FlexAttention's compressed block mask of one kernel's tiles (block_m query rows x block_n keys), for
// each batch variant, appended to `words`: lines are Q blocks (by_q) or K/V blocks, each listing the
// blocks of the other side it must visit, the partial ones first.
template <class Out>
void append_lists(const Problem& problem, int block_m, int block_n, bool by_q, int variants, Out& lists,
                  std::vector<int32_t>& words) {
  const tiled::Tiling tiling{block_m, block_n};
  std::vector<int32_t> counts, index;
  for (int v = 0; v < variants; ++v) {
    const tiled::BlockMask mask(problem, v, tiling);
    const int64_t lines = by_q ? mask.Tr() : mask.Tc(), cross = by_q ? mask.Tc() : mask.Tr();
    lists.lists.lines = int(lines);
    lists.lists.cross = int(cross);
    // A tile whose keys run past seqlen_k is listed partial even where BlockMask calls it full (it counts
    // only the pairs inside the problem): the kernels read those keys as zeros or as the next batch
    // entry's, and only the element mask (the interval's end, at most seqlen_k) hides them.
    auto kind_of = [&](int64_t line, int64_t x) {
      const tiled::TileKind k = by_q ? mask.kind(line, x) : mask.kind(x, line);
      const bool past_keys = ((by_q ? x : line) + 1) * block_n > problem.seqlen_k;
      return k == tiled::TileKind::full && past_keys ? tiled::TileKind::partial : k;
    };
    for (int64_t line = 0; line < lines; ++line) {
      int32_t partial = 0, full = 0;
      for (const tiled::TileKind kind : {tiled::TileKind::partial, tiled::TileKind::full})
        for (int64_t x = 0; x < cross; ++x)
          if (kind_of(line, x) == kind) {
            index.push_back(int32_t(x));
            ++(kind == tiled::TileKind::partial ? partial : full);
          }
      index.resize(size_t((int64_t(v) * lines + line + 1) * cross), 0);
      counts.push_back(partial);
      counts.push_back(full);
    }
  }
  lists.lists.block_m = block_m;
  lists.lists.block_n = block_n;
  lists.lists.by_batch = variants > 1;
  lists.counts_at = words.size();
  words.insert(words.end(), counts.begin(), counts.end());
  lists.index_at = words.size();
  words.insert(words.end(), index.begin(), index.end());
}

}  // namespace

DeviceMask::DeviceMask(const Problem& problem, cudaStream_t stream) : stream_(stream) {
  if (problem.mask.kind == MaskKind::none) return;
  if (problem.varlen()) throw Error("the GPU kernels take a mask function on fixed-length batches");
  rows_ = size_t(problem.batch * problem.seqlen_q);
  std::vector<int32_t> words(2 * rows_);
  for (int64_t b = 0; b < problem.batch; ++b)
    for (int64_t i = 0; i < problem.seqlen_q; ++i) {
      words[size_t(b * problem.seqlen_q + i)] = int32_t(problem.col_begin(b, i));
      words[rows_ + size_t(b * problem.seqlen_q + i)] = int32_t(problem.col_end(b, i));
    }

  const int d = fa2_padded_head_dim(int(problem.head_dim));
  // Each kernel's tiles, as its launch will pick them (shapes.hpp): for the dense mask's lists and the deals.
  const TileShape fa3 = fa3_forward_shape(d), fwd = fa2_forward_shape(d),
                  kv = fa2_backward_shape(d, int(max_smem_per_block()));
  const int variants = problem.mask_varies_by_batch() ? int(problem.batch) : 1;
  dense_ = !problem.interval_mask();
  if (dense_) {
    // The bits, row by row in 32-key words; a dimension the mask does not have gets stride 0.
    const DenseMask& m = *problem.mask.dense;
    const int64_t sq = problem.seqlen_q, sk = problem.seqlen_k, row_words = (sk + 31) / 32;
    const int64_t nb = m.varies_by_batch() ? problem.batch : 1, nh = m.varies_by_head() ? problem.heads_q : 1;
    bits_.row_words = int(row_words);
    bits_.head_stride = nh > 1 ? sq * row_words : 0;
    bits_.batch_stride = nb > 1 ? nh * sq * row_words : 0;
    bits_at_ = words.size();
    words.resize(words.size() + size_t(nb * nh * sq * row_words), 0);
    int32_t* at = words.data() + bits_at_;
    for (int64_t b = 0; b < nb; ++b)
      for (int64_t h = 0; h < nh; ++h)
        for (int64_t i = 0; i < sq; ++i, at += row_words)
          for (int64_t j = 0; j < sk; ++j)
            if (m.at(b, h, i, j)) at[j / 32] = int32_t(uint32_t(at[j / 32]) | (1u << (j % 32)));

    // The lists at each fa2 kernel's tiles and at fa3's forward.
    if (d == 0) throw Error("fa2 takes head dims up to 256: no block lists for head_dim " + std::to_string(problem.head_dim));
    const TileShape dq = fa2_backward_dq_shape(d);
    append_lists(problem, fwd.block_m, fwd.block_n, true, variants, forward_, words);
    append_lists(problem, kv.block_m, kv.block_n, false, variants, dkdv_, words);
    append_lists(problem, dq.block_m, dq.block_n, true, variants, dq_, words);
    if (fa3.block_m == fwd.block_m && fa3.block_n == fwd.block_n) fa3_ = forward_;  // the same tiles, the same lists
    else append_lists(problem, fa3.block_m, fa3.block_n, true, variants, fa3_, words);
  }

  // fa3's forward, fa2's forward and fa2's dK/dV deal their tiles longest walk first (tile_order.hpp): each
  // one's order of lines, at its tiles. A dense mask's walks are its lists' counts (partial + full, summed
  // over the variants), read back rather than classifying every bit again; an interval mask's come from
  // its rows' edges.
  // They deal them in even sections of (batch, head) pairs sized by what a pair's longest line reads
  // (tile_order.hpp l2_sections), block_bytes a block of its walk (forward_block_bytes, dkdv_block_bytes).
  // The simulator deals the same way (simulator/model.cpp flashlab_deal).
  auto append_order = [&](const Lists& of, int block_m, int block_n, bool by_q, Order& out, double block_bytes,
                          int pairs) {
    std::vector<int64_t> walk;
    if (dense_) {
      const int lines = of.lists.lines, listed = of.lists.by_batch ? int(problem.batch) : 1;
      walk.assign(size_t(lines), 0);
      const int32_t* counts = words.data() + of.counts_at;  // (variants, lines, partial and full)
      for (int v = 0; v < listed; ++v)
        for (int i = 0; i < lines; ++i) {
          const int32_t* line = counts + (v * lines + i) * 2;
          walk[size_t(i)] += line[0] + line[1];
        }
    } else {
      walk = tiled::line_walks(problem, tiled::Tiling{block_m, block_n}, by_q);
    }
    const std::vector<int32_t> order = by_q ? tiled::longest_first(walk) : tiled::longest_first_columns(walk);
    const double longest = walk.empty() ? 0.0 : double(*std::max_element(walk.begin(), walk.end())) / variants;
    out = {words.size(), order.size(), l2_sections(l2_cache_bytes(), longest * block_bytes, pairs)};
    words.insert(words.end(), order.begin(), order.end());
  };
  if (d != 0) {
    const int group = int(problem.heads_q / problem.heads_kv), batch = int(problem.batch);
    append_order(forward_, fwd.block_m, fwd.block_n, true, fa2_forward_order_, forward_block_bytes(fwd.block_n, d, group),
                 int(problem.heads_q) * batch);
    append_order(dkdv_, kv.block_m, kv.block_n, false, fa2_dkdv_order_, dkdv_block_bytes(kv.block_m, d, group),
                 int(problem.heads_kv) * batch);
    if (fa3.supported())  // under a mask function fa3 packs no GQA group (fa3_fwd.cu packable)
      append_order(fa3_, fa3.block_m, fa3.block_n, true, fa3_order_, forward_block_bytes(fa3.block_n, d, group),
                   int(problem.heads_q) * batch);
  }

  FLASHLAB_CUDA(cudaMallocAsync(&ptr_, words.size() * 4, stream));
  FLASHLAB_CUDA(cudaMemcpyAsync(ptr_, words.data(), words.size() * 4, cudaMemcpyHostToDevice, stream));
  FLASHLAB_CUDA(cudaStreamSynchronize(stream));  // the pageable source is freed when this returns
}

void DeviceMask::set(AttentionParams& p) const {
  if (!ptr_) return;
  const int32_t* base = static_cast<const int32_t*>(ptr_);
  p.mask_lo = base;
  p.mask_hi = base + rows_;
  for (auto [to, from] : {std::pair{&p.fa3_forward_deal, &fa3_order_}, {&p.fa2_forward_deal, &fa2_forward_order_},
                          {&p.fa2_dkdv_deal, &fa2_dkdv_order_}})
    *to = {from->len ? base + from->at : nullptr, int(from->len), from->sections};
  if (!dense_) return;
  p.bits = bits_;
  p.bits.words = reinterpret_cast<const uint32_t*>(base + bits_at_);
  for (auto [to, from] : {std::pair{&p.forward_blocks, &forward_}, {&p.dkdv_blocks, &dkdv_}, {&p.dq_blocks, &dq_},
                          {&p.fa3_blocks, &fa3_}}) {
    *to = from->lists;
    to->counts = base + from->counts_at;
    to->index = base + from->index_at;
  }
}

DeviceMask::~DeviceMask() {
  if (ptr_) cudaFreeAsync(ptr_, stream_);
}

DeviceSlopes::~DeviceSlopes() {
  if (ptr_) cudaFreeAsync(ptr_, stream_);
}

std::pair<std::string, PackGqa> forward_kernel(const std::string& name) {
  if (name == "fa3-pack-gqa") return {"fa3", PackGqa::on};
  if (name == "fa3-no-pack-gqa") return {"fa3", PackGqa::off};
  return {name, PackGqa::automatic};
}

void launch_forward(const std::string& kernel, const AttentionParams& p, cudaStream_t stream) {
  if (kernel == "fa2") {
    fa2_forward(p, stream);
  } else if (kernel == "fa3") {
    fa3_forward(p, stream);
  } else if (const auto [base, pack] = forward_kernel(kernel); base == "fa3") {  // PackGQA asked for, or not
    AttentionParams packed = p;
    packed.pack_gqa = pack;
    fa3_forward(packed, stream);
  } else if (kernel == "standard") {
    const size_t plane = size_t(p.batch) * p.heads_q * p.seqlen_q * p.seqlen_k;  // S (fp32) and P per head
    void *S = nullptr, *P = nullptr;
    FLASHLAB_CUDA(cudaMallocAsync(&S, plane * 4, stream));
    FLASHLAB_CUDA(cudaMallocAsync(&P, plane * (p.dtype == Dtype::fp32 ? 4 : 2), stream));
    standard_forward(p, static_cast<float*>(S), P, stream);
    FLASHLAB_CUDA(cudaFreeAsync(S, stream));
    FLASHLAB_CUDA(cudaFreeAsync(P, stream));
  } else {
    throw Error("unknown kernel '" + kernel + "': expected fa2, fa3 (fa3-pack-gqa, fa3-no-pack-gqa) or standard");
  }
}

size_t backward_scratch_bytes(const std::string& kernel, const BackwardParams& p) {
  if (kernel == "fa2") return fa2_backward_scratch_bytes(p);
  if (kernel == "fa3") return fa3_backward_scratch_bytes(p);
  throw Error("kernel '" + kernel + "' has no backward: fa2 and fa3 have one");
}

void backward_on_scratch(const std::string& kernel, const BackwardParams& p, cudaStream_t stream) {
  if (kernel == "fa2") return fa2_backward(p, stream);
  if (kernel == "fa3") return fa3_backward(p, stream);
  throw Error("kernel '" + kernel + "' has no backward: fa2 and fa3 have one");
}

void launch_backward(const std::string& kernel, BackwardParams& p, cudaStream_t stream) {
  FLASHLAB_CUDA(cudaMallocAsync(&p.scratch, backward_scratch_bytes(kernel, p), stream));
  try {
    backward_on_scratch(kernel, p, stream);
  } catch (...) {
    cudaFreeAsync(p.scratch, stream);
    p.scratch = nullptr;
    throw;
  }
  FLASHLAB_CUDA(cudaFreeAsync(p.scratch, stream));
  p.scratch = nullptr;
}

}  // namespace flashlab::gpu
