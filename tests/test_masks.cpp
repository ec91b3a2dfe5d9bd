// Mask functions (flashlab/mask.hpp) and the block mask (tiled_cpu/block_mask.hpp): each kind means
// what its definition says, gives the same answers as an independent way of computing them, and every
// consumer of the Schedule (executor events, closed form, simulator) agrees with the block mask.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <numeric>
#include <unistd.h>

#include "attention_reference.hpp"
#include "cases.hpp"
#include "check.hpp"
#include "executor.hpp"
#include "flashlab/error.hpp"
#include "flashlab/npy.hpp"
#include "flashlab/problem_spec.hpp"
#include "gpu_spec.hpp"
#include "implementations.hpp"
#include "model.hpp"

using namespace flashlab;
using namespace flashlab::tiled;

namespace {

Problem packed(int64_t seqlen, std::vector<int64_t> docs, bool causal) {
  Problem p;
  p.heads_q = p.heads_kv = 2;
  p.seqlen_q = p.seqlen_k = seqlen;
  p.head_dim = 32;
  p.causal = causal;
  p.mask.kind = MaskKind::document;
  p.mask.doc_lengths = std::move(docs);
  return p;
}

double max_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape == b.shape);
  double m = 0;
  for (size_t n = 0; n < a.data.size(); ++n) {
    if (std::isinf(a.data[n]) && a.data[n] == b.data[n]) continue;
    m = std::max(m, std::abs(double(a.data[n]) - double(b.data[n])));
  }
  return m;
}

std::string error_of(const Problem& p) {
  try {
    p.validate();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("each mask kind is its definition, pair by pair") {
  // Document: a token's document id, counted independently of Mask::document_of.
  {
    const Problem p = packed(20, {3, 1, 9, 7}, false);
    std::vector<int> doc;
    for (int d = 0; d < 4; ++d) doc.insert(doc.end(), p.mask.doc_lengths[d], d);
    for (int64_t i = 0; i < 20; ++i)
      for (int64_t j = 0; j < 20; ++j) REQUIRE(p.visible(0, 1, i, j) == (doc[i] == doc[j]));
    Problem c = p;
    c.causal = true;
    for (int64_t i = 0; i < 20; ++i)
      for (int64_t j = 0; j < 20; ++j) REQUIRE(c.visible(0, 0, i, j) == (doc[i] == doc[j] && j <= i));
  }
  // Prefix-LM, bottom-right: row i sits at key i + sk - sq.
  {
    Problem p;
    p.seqlen_q = 10;
    p.seqlen_k = 16;
    p.batch = 2;
    p.mask.kind = MaskKind::prefix_lm;
    p.mask.prefix = {4, 0};
    p.validate();
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t i = 0; i < 10; ++i)
        for (int64_t j = 0; j < 16; ++j) REQUIRE(p.visible(b, 0, i, j) == (j < p.mask.prefix[b] || j <= i + 6));
  }
  // Chunked: the query's chunk, causal; rows above the key sequence (sq > sk) see nothing.
  {
    Problem p;
    p.seqlen_q = 24;
    p.seqlen_k = 20;
    p.mask.kind = MaskKind::chunked;
    p.mask.chunk = 6;
    p.validate();
    for (int64_t i = 0; i < 24; ++i) {
      const int64_t pos = i - 4;
      for (int64_t j = 0; j < 20; ++j) REQUIRE(p.visible(0, 0, i, j) == (pos >= 0 && j <= pos && j / 6 == pos / 6));
    }
  }
  // Dense: the file's bits, intersected with causal.
  {
    Problem p;
    p.seqlen_q = p.seqlen_k = 130;
    p.causal = true;
    p.mask.kind = MaskKind::dense;
    p.mask.dense = testing::patterned_mask({130, 130});
    p.validate();
    for (int64_t i = 0; i < 130; ++i)
      for (int64_t j = 0; j < 130; ++j) REQUIRE(p.visible(0, 0, i, j) == (j <= i && p.mask.dense->at(0, 0, i, j)));
  }
}

TEST_CASE("document masking over a packed sequence equals attending within each document alone") {
  // The same tokens as a varlen batch, one entry per document: a different code path (offsets, not a
  // mask function) that must give the same O and LSE, and the same gradients.
  for (bool causal : {false, true}) {
    CAPTURE(causal);
    const std::vector<int64_t> docs{70, 1, 100, 29, 56};
    const Problem p = packed(256, docs, causal);
    Problem v = p;
    v.mask = Mask{};
    v.batch = static_cast<int64_t>(docs.size());
    v.seqlen_q = v.seqlen_k = 100;  // the longest document
    v.cu_seqlens_q = {0};
    for (int64_t len : docs) v.cu_seqlens_q.push_back(v.cu_seqlens_q.back() + len);
    v.cu_seqlens_k = v.cu_seqlens_q;
    v.validate();
    const auto in = harness::random_inputs(p, 7);  // (1, 256, 2, 32): the same floats as varlen (256, 2, 32)
    auto as = [](Tensor t, const std::vector<int64_t>& shape) { t.shape = shape; return t; };
    const Tensor q = as(in.q, v.q_shape()), k = as(in.k, v.k_shape()), vv = as(in.v, v.v_shape());
    const auto want = reference::forward_lowp(v, q, k, vv);
    for (Order order : {Order::fa1, Order::fa2}) {
      const auto got = forward(p, in.q, in.k, in.v, {32, 48}, order);
      CHECK(max_diff(as(got.o, v.o_shape()), want.o) < 1e-5);
      // LSE: (1, heads, 256) against varlen's (heads, 256): the same order of elements.
      CHECK(max_diff(as(got.lse, v.lse_shape()), want.lse) < 1e-5);
    }
    const auto f = forward(p, in.q, in.k, in.v, {32, 48}, Order::fa2);
    const auto g = backward(p, in.q, in.k, in.v, f.o, f.lse, in.d_o, {32, 48});
    const auto gw = reference::backward_lowp(v, q, k, vv, as(in.d_o, v.o_shape()));
    CHECK(max_diff(as(g.dq, v.q_shape()), gw.dq) < 1e-4);
    CHECK(max_diff(as(g.dk, v.k_shape()), gw.dk) < 1e-4);
    CHECK(max_diff(as(g.dv, v.v_shape()), gw.dv) < 1e-4);
  }
}

TEST_CASE("the kinds reduce to each other where they should") {
  Problem base;
  base.heads_q = base.heads_kv = 1;
  base.seqlen_q = base.seqlen_k = 200;
  base.head_dim = 32;
  const auto in = harness::random_inputs(base, 11);
  const Tiling t{32, 48};
  Problem causal = base;
  causal.causal = true;
  const auto want_causal = forward(causal, in.q, in.k, in.v, t, Order::fa2);
  const auto want_full = forward(base, in.q, in.k, in.v, t, Order::fa2);

  Problem prefix = base;
  prefix.mask.kind = MaskKind::prefix_lm;
  prefix.mask.prefix = {0};
  CHECK(max_diff(forward(prefix, in.q, in.k, in.v, t, Order::fa2).o, want_causal.o) == 0);
  prefix.mask.prefix = {200};
  CHECK(max_diff(forward(prefix, in.q, in.k, in.v, t, Order::fa2).o, want_full.o) == 0);
  prefix.mask.prefix = {100};
  CHECK(max_diff(forward(prefix, in.q, in.k, in.v, t, Order::fa2).o, want_full.o) > 1e-3);  // it masks something

  Problem chunked = base;
  chunked.mask.kind = MaskKind::chunked;
  chunked.mask.chunk = 200;
  CHECK(max_diff(forward(chunked, in.q, in.k, in.v, t, Order::fa2).o, want_causal.o) == 0);
  chunked.mask.chunk = 1;  // each row sees only its own key: O_i = V_i
  CHECK(max_diff(forward(chunked, in.q, in.k, in.v, t, Order::fa2).o, in.v) < 1e-6);

  Problem one_doc = base;
  one_doc.mask.kind = MaskKind::document;
  one_doc.mask.doc_lengths = {200};
  CHECK(max_diff(forward(one_doc, in.q, in.k, in.v, t, Order::fa2).o, want_full.o) == 0);
}

TEST_CASE("the block mask agrees with the mask function element by element, for every mask case") {
  for (const auto& c : testing::mask_cases()) {
    const Problem& p = c.problem;
    CAPTURE(c.name);
    const Tiling t{32, 48};
    for (int64_t b = 0; b < p.batch; ++b) {
      const Schedule s(p, b, t, Order::fa2);
      int64_t skipped = 0;
      for (int64_t i = 0; i < s.Tr(); ++i)
        for (int64_t j = 0; j < s.Tc(); ++j) {
          int64_t seen = 0, total = 0;  // over every head: the block mask is shared by all of them
          for (int64_t h = 0; h < p.heads_q; ++h)
            for (int64_t r = i * t.Br; r < std::min(p.len_q(b), (i + 1) * t.Br); ++r)
              for (int64_t col = j * t.Bc; col < std::min(p.len_k(b), (j + 1) * t.Bc); ++col, ++total)
                seen += p.visible(b, h, r, col);
          const TileKind want = seen == 0 ? TileKind::skipped : seen == total ? TileKind::full : TileKind::partial;
          CAPTURE(i);
          CAPTURE(j);
          REQUIRE(s.classify(i, j) == want);
          skipped += want == TileKind::skipped;
          if (want != TileKind::skipped) {  // the ranges hold every computed tile
            REQUIRE(j >= s.kv_begin(i));
            REQUIRE(j < s.kv_end(i));
            REQUIRE(i >= s.q_begin(j));
            REQUIRE(i < s.q_end(j));
          }
        }
      CHECK(skipped == s.tiles_skipped());
      // The compressed form lists exactly the full and the partial tiles of each Q block, ascending.
      const CompressedBlockMask cm = compress(s.block_mask());
      for (int64_t i = 0; i < s.Tr(); ++i) {
        std::vector<int32_t> full, partial;
        for (int64_t j = 0; j < s.Tc(); ++j) {
          if (s.classify(i, j) == TileKind::full) full.push_back(int32_t(j));
          if (s.classify(i, j) == TileKind::partial) partial.push_back(int32_t(j));
        }
        REQUIRE(cm.full_count[i] == int32_t(full.size()));
        REQUIRE(cm.partial_count[i] == int32_t(partial.size()));
        for (size_t n = 0; n < full.size(); ++n) REQUIRE(cm.full_index[i * cm.Tc + n] == full[n]);
        for (size_t n = 0; n < partial.size(); ++n) REQUIRE(cm.partial_index[i * cm.Tc + n] == partial[n]);
      }
    }
  }
}

TEST_CASE("a dense mask's holes: skipped tiles inside a line, and every count leaves them out") {
  Problem p;
  p.heads_q = p.heads_kv = 1;
  p.seqlen_q = 130;
  p.seqlen_k = 150;
  p.head_dim = 32;
  p.dtype = DType::bf16;
  p.mask.kind = MaskKind::dense;
  p.mask.dense = testing::patterned_mask({130, 150});
  const Schedule s(p, 0, {32, 48}, Order::fa2);
  REQUIRE(s.block_mask().has_holes());
  CHECK(s.classify(1, 1) == TileKind::skipped);  // keys 48..95 are masked everywhere
  CHECK(s.kv_begin(1) == 0);
  CHECK(s.kv_end(1) == 4);
  CHECK(s.classify(2, 0) == TileKind::full);     // rows 64..95 x keys 0..47 all visible
  // Computed elements: only the non-skipped tiles, 3 of the 4 K/V blocks of each Q block.
  CHECK(s.computed_elements() == 130 * (150 - 48));
  // The executor's events move exactly the closed form's bytes in every order.
  const auto in = harness::random_inputs(p, 5);
  for (Order order : {Order::fa1, Order::fa2, Order::backward, Order::fa1_backward, Order::dq}) {
    CAPTURE(to_string(order));
    ByteCounter counter;
    if (is_backward(order)) {
      const auto f = forward(p, in.q, in.k, in.v, {32, 48}, Order::fa2);
      backward(p, in.q, in.k, in.v, f.o, f.lse, in.d_o, {32, 48}, &counter, order);
    } else {
      forward(p, in.q, in.k, in.v, {32, 48}, order, &counter);
    }
    ByteCounts expected;  // the deterministic backward: both of its passes
    for (Order pass : passes_of(order)) {
      const ByteCounts c = Schedule(p, 0, {32, 48}, pass).closed_form();
      for (int t = 0; t < kTensorCount; ++t) expected.load[t] += c.load[t], expected.store[t] += c.store[t];
    }
    CHECK(counter.counts == expected);
    // K is loaded for 3 of the 4 blocks in FA2's forward: the hole is never read.
    if (order == Order::fa2)
      CHECK(counter.counts.load[int(TensorId::K)] == s.Tr() * (150 - 48) * 32 * 2);
  }
  // A row that sees nothing: O = 0, LSE = -inf (rows 5 and 129).
  const auto f = forward(p, in.q, in.k, in.v, {32, 48}, Order::fa2);
  CHECK(std::isinf(f.lse[p.lse_offset(0, 0, 5)]));
  CHECK(f.lse[p.lse_offset(0, 0, 5)] < 0);
  for (int64_t c = 0; c < 32; ++c) CHECK(f.o[p.o_offset(0, 5, 0) + c] == 0.0f);
}

TEST_CASE("the simulator's FLOPs for a document mask are the block mask's density times the unmasked FLOPs") {
  // 8 documents in 8k tokens, on an H100: each Q block computes only its documents' K/V blocks.
  Problem p;
  p.batch = 2;
  p.heads_q = p.heads_kv = 8;
  p.seqlen_q = p.seqlen_k = 8192;
  p.head_dim = 128;
  p.dtype = DType::bf16;
  Problem masked = p;
  masked.mask.kind = MaskKind::document;
  masked.mask.doc_lengths = {1000, 1100, 900, 1200, 800, 1024, 1000, 1168};
  masked.validate();
  const sim::GpuSpec gpu = sim::load_gpu("h100-sxm");
  for (Pass pass : {Pass::fwd, Pass::bwd}) {
    CAPTURE(to_string(pass));
    const sim::Estimate full = sim::estimate(p, gpu, sim::Algo::fa2, pass);
    const sim::Estimate doc = sim::estimate(masked, gpu, sim::Algo::fa2, pass);
    REQUIRE(doc.block_m == full.block_m);
    const double density = BlockMask(masked, 0, {doc.block_m, doc.block_n}).density();
    CAPTURE(density);
    CHECK(density < 0.2);  // 8 documents: about 1/8 of the tiles, plus the boundaries
    CHECK(doc.flops == doctest::Approx(density * full.flops).epsilon(1e-12));
    CHECK(doc.l2_bytes < 0.2 * full.l2_bytes);  // SRAM <-> L2: the skipped tiles' K/V blocks never move
    CHECK(doc.time_s < 0.5 * full.time_s);
  }
}

TEST_CASE("bad masks are refused with a message that names what is wrong") {
  Problem p = packed(1024, {300, 700, 23}, false);
  CHECK(error_of(p).find("sum to 1023, but seqlen is 1024") != std::string::npos);
  p.mask.doc_lengths = {300, 0, 724};
  CHECK(error_of(p).find("must be positive") != std::string::npos);
  p.mask.doc_lengths = {300, 724};
  CHECK(error_of(p).empty());
  p.seqlen_k = 1000;
  CHECK(error_of(p).find("seqlen_q == seqlen_k") != std::string::npos);

  Problem q;
  q.seqlen_q = q.seqlen_k = 256;
  q.mask.kind = MaskKind::prefix_lm;
  q.mask.prefix = {300};
  CHECK(error_of(q).find("prefix 300 of batch entry 0 must be in [0, seqlen_k = 256]") != std::string::npos);
  q.mask.prefix = {100};
  q.causal = true;
  CHECK(error_of(q).find("does not combine with --causal") != std::string::npos);
  q.causal = false;
  q.batch = 3;
  q.mask.prefix = {1, 2};
  CHECK(error_of(q).find("one per batch entry (3)") != std::string::npos);

  Problem c;
  c.mask.kind = MaskKind::chunked;
  CHECK(error_of(c).find("positive chunk size") != std::string::npos);
  Problem stray;
  stray.mask.doc_lengths = {128};
  CHECK(error_of(stray).find("use --mask document") != std::string::npos);

  // Dense masks from files: the wrong shape, the wrong dtype.
  const auto dir = std::filesystem::temp_directory_path() / ("flashlab_masks_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string good = (dir / "m.npy").string(), floats = (dir / "f.npy").string();
  write_npy_bool(good, BoolArray{{4, 4}, std::vector<uint8_t>(16, 1)});
  Tensor t({4, 4}, 1.0f);
  write_npy(floats, t);
  ProblemSpec spec;
  spec.seqlen_q = spec.seqlen_k = 8;
  spec.mask = "dense";
  spec.mask_file = good;
  std::string what;
  try {
    spec.build();
  } catch (const Error& e) {
    what = e.what();
  }
  CHECK(what.find("has shape (4, 4); expected (seqlen_q, seqlen_k) = (8, 8)") != std::string::npos);
  spec.seqlen_q = spec.seqlen_k = 4;
  CHECK(spec.build().mask.dense->at(0, 0, 3, 3));
  spec.mask_file = floats;
  what.clear();
  try {
    spec.build();
  } catch (const Error& e) {
    what = e.what();
  }
  CHECK(what.find("dtype '<f4' is not supported; expected '|b1'") != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("GPU implementations take or refuse a mask function by name, with or without a device") {
  Problem p = packed(256, {128, 128}, false);
  p.dtype = DType::bf16;
  for (const auto& impl : harness::implementations()) {
    CAPTURE(impl.name);
    const std::string why = impl.unsupported(p);
    const bool fp8 = impl.name == "gpu-fa3-fp8";  // the FP8 forward takes the window rule's masks only
    if (!fp8 && (impl.name.rfind("gpu-fa2", 0) == 0 || impl.name.rfind("gpu-fa3", 0) == 0))  // interval masks:
      CHECK((why.empty() || why.rfind("skipped: ", 0) == 0));  // run, or say they have no device
    else if (impl.name.rfind("gpu-", 0) == 0)
      CHECK(why.rfind("unsupported: mask kind document", 0) == 0);
    else
      CHECK(why.empty());
  }
}

TEST_CASE("longest_first: the Q blocks by their walk's length, longest first, ties in the causal order") {
  // Documents of 128, 640 and 256 rows at 128 x 128 tiles: Q block 0 walks 1 block, blocks 1-5 walk the
  // middle document's 5, blocks 6-7 the last one's 2. The causal order (7, 6, ... 0) would hand the last
  // document's short tiles out first and leave the long ones for the end.
  const Problem docs = packed(1024, {128, 640, 256}, false);
  CHECK(longest_first(docs, Tiling{128, 128}) == std::vector<int32_t>{5, 4, 3, 2, 1, 7, 6, 0});
  // Causal and prefix-LM walks grow with the Q block: the order is the causal one.
  Problem prefix = docs;
  prefix.mask.kind = MaskKind::prefix_lm;
  prefix.mask.doc_lengths.clear();
  prefix.mask.prefix = {300};
  CHECK(longest_first(prefix, Tiling{128, 128}) == std::vector<int32_t>{7, 6, 5, 4, 3, 2, 1, 0});
  // Per-entry prefixes: the walks are summed over the entries (entry 1's long prefix makes every block
  // as long, so entry 0's causal part decides).
  prefix.batch = 2;
  prefix.mask.prefix = {0, 1024};
  CHECK(longest_first(prefix, Tiling{128, 128}) == std::vector<int32_t>{7, 6, 5, 4, 3, 2, 1, 0});
}

TEST_CASE("longest_first_columns: the K/V blocks by the Q blocks that see them, longest first, ties first to last") {
  // The documents above are symmetric: K/V block j walks what Q block j walks.
  const Problem docs = packed(1024, {128, 640, 256}, false);
  CHECK(longest_first_columns(docs, Tiling{128, 128}) == std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7, 0});
  // Prefix-LM (300 keys of prefix) at 128 x 128: blocks 0-2 hold prefix keys every Q block sees (8 each),
  // block j > 2 is seen from Q block j on (8 - j): the causal order for columns, first to last.
  Problem prefix = docs;
  prefix.mask.kind = MaskKind::prefix_lm;
  prefix.mask.doc_lengths.clear();
  prefix.mask.prefix = {300};
  CHECK(longest_first_columns(prefix, Tiling{128, 128}) == std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7});
  // A dense mask's order from the walks its lists counted (the GPU's DeviceMask reads them back).
  CHECK(longest_first_columns(std::vector<int64_t>{1, 3, 3, 2}) == std::vector<int32_t>{1, 2, 3, 0});
}
