#include "cases.hpp"

#include "decode_check.hpp"

namespace flashlab::testing {

std::shared_ptr<const DenseMask> patterned_mask(std::vector<int64_t> shape) {
  auto m = std::make_shared<DenseMask>();
  m->bits.shape = shape;
  m->source = "patterned";
  const size_t n = shape.size();
  const int64_t sq = shape[n - 2], sk = shape[n - 1], planes = n == 4 ? shape[0] * shape[1] : 1;
  m->bits.data.resize(static_cast<size_t>(planes * sq * sk));
  for (int64_t plane = 0; plane < planes; ++plane)
    for (int64_t i = 0; i < sq; ++i)
      for (int64_t j = 0; j < sk; ++j) {
        const uint64_t hash = (uint64_t(plane) * 1000003u + uint64_t(i) * 7919u + uint64_t(j) * 104729u) % 5;
        const bool hole = j >= 48 && j < 96;  // K/V block 1 of 48-key tiles: a hole in every Q block's line
        const bool dark_row = i == 5 || i == sq - 1;  // rows that see nothing: O = 0, LSE = -inf
        const bool solid = i >= 64 && i < 96 && j < 48;  // a tile every pair of which is visible: full
        m->bits.data[static_cast<size_t>((plane * sq + i) * sk + j)] = !hole && !dark_row && (solid || hash != 0);
      }
  return m;
}

// A dense (sq, sk) mask that hides only keys [16, 32) of every row: with sk not a multiple of the
// kernels' key blocks, a Q block's last K/V block is then visible wherever it lies inside the problem,
// and the keys past sk in it must still be masked (a kernel reads them as zeros, or as the next batch
// entry's).
static std::shared_ptr<const DenseMask> edge_mask(int64_t sq, int64_t sk) {
  auto m = std::make_shared<DenseMask>();
  m->bits.shape = {sq, sk};
  m->source = "edge";
  m->bits.data.resize(static_cast<size_t>(sq * sk));
  for (int64_t i = 0; i < sq; ++i)
    for (int64_t j = 0; j < sk; ++j) m->bits.data[static_cast<size_t>(i * sk + j)] = !(j >= 16 && j < 32);
  return m;
}

std::vector<Case> mask_cases() {
  std::vector<Case> cases;
  Problem p;
  p.heads_q = p.heads_kv = 2;
  p.head_dim = 64;
  p.dtype = DType::fp16;
  p.seqlen_q = p.seqlen_k = 150;
  {
    Problem q = p;
    q.mask.kind = MaskKind::prefix_lm;
    q.mask.prefix = {40};
    cases.push_back({"prefix-lm 40, 150", q});
    q.batch = 3;
    q.seqlen_q = 97;
    q.mask.prefix = {0, 37, 150};  // no prefix (causal), one inside a tile, the whole sequence (no mask)
    q.dtype = DType::bf16;
    cases.push_back({"prefix-lm per entry 0,37,150, 97x150 (bottom-right)", q});
    // Whole Q blocks (1152 = 9 x 128 rows), batch 2: the last row sees every K/V block, so a dK/dV CTA's
    // rows run to the end of the sequence and its walk must stop there (the row search once ended a row
    // past it, and fa3's backward then walked entry 1's first Q block as entry 0's last).
    Problem r = p;
    r.batch = 2;
    r.heads_q = r.heads_kv = 1;
    r.seqlen_q = r.seqlen_k = 1152;
    r.mask.kind = MaskKind::prefix_lm;
    r.mask.prefix = {40};
    cases.push_back({"prefix-lm 40, batch 2, 1152 (whole Q blocks)", r});
  }
  {
    Problem q = p;
    q.mask.kind = MaskKind::document;
    q.mask.doc_lengths = {30, 1, 70, 49};
    cases.push_back({"document 30,1,70,49", q});
    q.causal = true;
    q.dtype = DType::bf16;
    cases.push_back({"document 30,1,70,49 causal", q});
    q.causal = false;
    q.window_left = q.window_right = 16;
    q.heads_q = 4;
    q.heads_kv = 1;
    cases.push_back({"document 30,1,70,49, window (16,16), MQA 4:1", q});
  }
  {
    Problem q = p;
    q.mask.kind = MaskKind::chunked;
    q.mask.chunk = 32;
    cases.push_back({"chunked 32, 150", q});
    q.seqlen_q = 200;
    q.seqlen_k = 97;
    q.mask.chunk = 40;
    q.dtype = DType::bf16;
    cases.push_back({"chunked 40, 200x97 (fully masked rows)", q});
  }
  {
    Problem q = p;
    q.seqlen_q = 130;
    q.mask.kind = MaskKind::dense;
    q.mask.dense = patterned_mask({130, 150});
    cases.push_back({"dense 130x150: holes, dark rows, a full tile", q});
    q.batch = 2;
    q.heads_q = 4;
    q.mask.dense = patterned_mask({2, 4, 130, 150});
    q.causal = true;
    q.dtype = DType::bf16;
    cases.push_back({"dense (2, 4, 130, 150) per head, GQA 4:2, and causal", q});
  }
  {
    Problem q = p;
    q.batch = 2;
    q.seqlen_q = 130;
    q.mask.kind = MaskKind::dense;
    q.mask.dense = edge_mask(130, 150);
    cases.push_back({"dense 130x150, batch 2: the last K/V block visible, keys past 150 masked", q});
  }
  return cases;
}

std::vector<Case> harness_cases() {
  std::vector<Case> cases;
  auto base = [](int64_t sq, int64_t sk, int64_t d, DType dt) {
    Problem p;
    p.batch = 1;
    p.heads_q = p.heads_kv = 2;
    p.seqlen_q = sq;
    p.seqlen_k = sk;
    p.head_dim = d;
    p.dtype = dt;
    return p;
  };
  // Head dims of the official test list, with unequal lengths and every dtype in turn.
  const DType dtypes[] = {DType::bf16, DType::fp16, DType::fp32};
  int n = 0;
  for (int64_t d : {32, 40, 59, 64, 80, 96, 111, 128, 160, 192, 224, 256}) {
    Problem p = base(97, 200, d, dtypes[n++ % 3]);
    p.causal = d % 64 == 0;
    cases.push_back({"hdim " + std::to_string(d) + (p.causal ? " causal " : " ") + std::string(to_string(p.dtype)), p});
  }
  // Sequence lengths 1, 17, 97, 200, 1025, seqlen_q != seqlen_k, both ways round.
  const std::pair<int64_t, int64_t> lengths[] = {{1, 1}, {1, 17}, {17, 1}, {17, 97}, {200, 97}, {97, 1025}, {1025, 200}};
  for (auto [sq, sk] : lengths)
    for (bool causal : {false, true}) {
      Problem p = base(sq, sk, 64, DType::bf16);
      p.causal = causal;
      cases.push_back({"seqlen " + std::to_string(sq) + "x" + std::to_string(sk) + (causal ? " causal" : ""), p});
    }
  // Every mask kind.
  {
    Problem p = base(150, 150, 64, DType::fp16);
    p.window_left = 32;
    p.window_right = 0;
    cases.push_back({"window (32,0)", p});
    p.window_left = 16;
    p.window_right = 16;
    cases.push_back({"window (16,16)", p});
    p.window_left = 0;
    p.window_right = 0;
    cases.push_back({"window (0,0): the diagonal only", p});
    p.window_left = -1;
    p.window_right = 40;
    cases.push_back({"window (-1,40)", p});
    Problem q = base(333, 1000, 80, DType::bf16);
    q.heads_q = 8;
    q.heads_kv = 2;
    q.causal = true;
    q.window_left = 128;
    q.window_right = 0;
    q.softcap = 30;
    cases.push_back({"the issue's awkward problem: GQA 8:2, causal, window 128, softcap 30, 333x1000 hdim 80", q});
  }
  // Fully masked rows: causal with seqlen_q > seqlen_k leaves the first rows nothing to see.
  {
    Problem p = base(100, 30, 64, DType::bf16);
    p.causal = true;
    cases.push_back({"fully masked rows (causal, 100x30)", p});
    p.window_left = 5;
    cases.push_back({"fully masked rows (window (5,0), 100x30)", p});
  }
  // Mask functions (flashlab/mask.hpp): each built-in kind, and a dense mask with holes.
  for (const Case& c : mask_cases()) cases.push_back(c);
  // GQA and MQA.
  {
    Problem p = base(128, 160, 64, DType::bf16);
    p.heads_q = 8;
    p.heads_kv = 2;
    cases.push_back({"GQA 8:2", p});
    p.heads_kv = 1;
    p.causal = true;
    cases.push_back({"MQA 8:1 causal", p});
  }
  // Variable-length batch.
  {
    Problem p = base(150, 170, 64, DType::fp16);
    p.batch = 4;
    p.cu_seqlens_q = {0, 1, 91, 241, 258};
    p.cu_seqlens_k = {0, 17, 187, 188, 358};
    cases.push_back({"varlen batch 4", p});
    p.causal = true;
    cases.push_back({"varlen batch 4 causal", p});
  }
  // Softcap, ALiBi, dropout, head_dim_v, batch > 1.
  {
    Problem p = base(120, 130, 64, DType::bf16);
    p.softcap = 5;
    cases.push_back({"softcap 5", p});
    p.softcap = 0;
    p.alibi = true;
    p.causal = true;
    cases.push_back({"ALiBi causal", p});
    p.alibi = false;
    p.causal = false;
    p.dropout_p = 0.17;
    p.seed = 42;
    cases.push_back({"dropout 0.17", p});
    p.dropout_p = 0;
    p.head_dim_v = 32;
    p.batch = 3;
    cases.push_back({"head_dim_v 32 != head_dim 64, batch 3", p});
  }
  // Large logits must not overflow.
  {
    Problem p = base(200, 200, 64, DType::bf16);
    cases.push_back({"logits x1000", p, 1000.0});
    p.causal = true;
    p.dtype = DType::fp32;
    // Forward only in fp32: a backward that recomputes P = exp(S - LSE) from a
    // stored fp32 LSE of about 1000 inherits its rounding (ulp(1000) = 6e-5),
    // which the naive fp32 reference, keeping S - max exact, never sees.
    // Measured: dV error 2.0e-4 against a tolerance of 9.4e-5. FlashAttention's
    // own kernels store the same fp32 LSE; bf16 (above) checks the backward.
    cases.push_back({"logits x1000 causal fp32 (forward)", p, 1000.0, false});
  }
  return cases;
}

std::vector<DecodeCase> decode_cases() {
  // q_len 1 and 4, ragged cache_seqlens, contiguous and paged (16, 256), GQA 8:1, rotary both layouts,
  // cache_len 1 .. 64k. The long caches have one head of 32 dims so the whole list runs in seconds.
  auto base = [](std::vector<int64_t> seqlens, int64_t cache_len, DType dt) {
    DecodeProblem d;
    d.batch = static_cast<int64_t>(seqlens.size());
    d.heads_q = d.heads_kv = 2;
    d.head_dim = 64;
    d.cache_seqlens = std::move(seqlens);
    d.cache_len = cache_len;
    d.dtype = dt;
    return d;
  };
  auto paged = [](DecodeProblem d, int64_t page_size) {
    d.page_size = page_size;
    d.max_pages = (d.cache_len + page_size - 1) / page_size;
    d.num_pages = d.batch * d.max_pages;
    d.block_table = harness::shuffled_block_table(d.batch, d.max_pages, 7);
    d.cache_len = 0;
    return d;
  };
  std::vector<DecodeCase> cases;
  {
    DecodeProblem d = base({5, 900, 17}, 1024, DType::bf16);
    d.num_splits = 4;
    cases.push_back({"q_len 1, ragged 5,900,17, contiguous, 4 splits", d});
    cases.push_back({"q_len 1, ragged 5,900,17, paged 16, 4 splits", paged(d, 16)});
  }
  {
    DecodeProblem d = base({30, 200}, 256, DType::fp16);
    d.heads_q = 8;
    d.heads_kv = 1;
    d.q_len = 4;
    d.new_len = 4;
    d.causal = true;
    d.rotary = Rotary::half;
    d.num_splits = 3;
    cases.push_back({"q_len 4 causal, append 4, rotary half, GQA 8:1, paged 16, 3 splits", paged(d, 16)});
    d.rotary = Rotary::interleaved;
    d.rotary_dim = 32;
    d.dtype = DType::bf16;
    cases.push_back({"q_len 4 causal, append 4, rotary interleaved on 32 of 64 dims, GQA 8:1, contiguous", d});
  }
  {
    DecodeProblem d = base({1, 700, 255}, 768, DType::bf16);
    d.new_len = 1;
    d.rotary = Rotary::interleaved;
    d.num_splits = 5;
    cases.push_back({"q_len 1, append 1, rotary interleaved, paged 256, ragged 1,700,255, 5 splits", paged(d, 256)});
    d.causal = false;
    d.rotary = Rotary::half;
    d.softcap = 30;
    cases.push_back({"q_len 1, append 1, rotary half (non-causal: one position), softcap 30, contiguous", d});
  }
  {
    DecodeProblem d = base({0}, 1, DType::fp32);
    d.new_len = 1;
    d.num_splits = 2;
    cases.push_back({"cache_len 1: an empty cache and one appended key, 2 splits (one empty)", d});
  }
  {
    DecodeProblem d = base({2, 50}, 64, DType::fp32);
    d.q_len = 4;
    d.causal = true;
    d.num_splits = 16;
    cases.push_back({"q_len 4 causal over 2 keys: fully masked rows; 16 splits, most empty", d});
  }
  {
    DecodeProblem d = base({65536 - 1}, 65536, DType::bf16);
    d.heads_q = d.heads_kv = 1;
    d.head_dim = 32;
    d.new_len = 1;
    d.rotary = Rotary::half;
    d.num_splits = 8;
    cases.push_back({"cache_len 64k, paged 256, append 1, rotary half, 8 splits (1 head, d 32)", paged(d, 256)});
    d.rotary = Rotary::none;
    d.new_len = 0;
    d.cache_seqlens = {40000};
    d.num_splits = 3;
    cases.push_back({"cache_len 64k contiguous, 40000 cached, 3 splits (1 head, d 32)", d});
  }
  return cases;
}

}  // namespace flashlab::testing
