#include "problem_flags.hpp"

#include "commands.hpp"

#include <tuple>

#include "flashlab/error.hpp"
#include "flashlab/problem_spec.hpp"

namespace flashlab::cli {

void ProblemFlags::add_to(CLI::App& app, bool with_pass, bool with_seqlen) {
  auto* g = &app;
  g->add_option("--batch", batch, "batch size")->capture_default_str();
  g->add_option("--heads", heads, "query heads")->capture_default_str();
  g->add_option("--kv-heads", kv_heads, "key/value heads (GQA/MQA; default: --heads)");
  if (with_seqlen) g->add_option("--seqlen", seqlen, "sequence length of queries and keys (default " + std::to_string(default_seqlen) + ")");
  g->add_option("--seqlen-q", seqlen_q, "query length (overrides --seqlen)");
  g->add_option("--seqlen-k", seqlen_k, "key length (overrides --seqlen)");
  g->add_option("--hdim", hdim, "head dimension")->capture_default_str();
  g->add_flag("--causal", causal, "causal mask, bottom-right aligned when seqlen_q != seqlen_k");
  g->add_option("--window", window, "sliding window L,R (-1: unbounded side)");
  g->add_option("--mask", mask, "mask function: none | causal | prefix-lm | document | chunked | dense")
      ->capture_default_str();
  g->add_option("--prefix", prefix, "prefix-lm: prefix length, or one per batch entry (128 or 128,64)");
  g->add_option("--doc-lengths", doc_lengths, "document: lengths of the packed documents, summing to seqlen (300,700,24)");
  g->add_option("--chunk", chunk, "chunked: keys per chunk of local attention");
  g->add_option("--mask-file", mask_file, "dense: .npy of bool/uint8, (seqlen_q, seqlen_k) or (batch, heads, seqlen_q, seqlen_k)");
  g->add_option("--softcap", softcap, "tanh softcap of the scores (0: off)");
  g->add_flag("--alibi", alibi, "ALiBi bias with the standard slopes 2^(-8(h+1)/heads)");
  g->add_option("--dropout", dropout, "dropout probability in [0, 1)");
  g->add_option("--seed", seed, "seed of the random inputs and of dropout")->capture_default_str();
  g->add_option("--dtype", dtype, "fp32 | fp16 | bf16")->capture_default_str();
  if (with_pass) g->add_option("--pass", pass, "fwd | bwd | fwd+bwd")->capture_default_str();
}

void WalkFlags::add_to(CLI::App& app) {
  app.add_option("--order", order, "fa1 | fa2 | bwd | fa1-bwd | bwd-dkdv | bwd-dq (the deterministic backward's passes)")
      ->capture_default_str();
  app.add_option("--br", br, "Br: query rows per tile")->capture_default_str();
  app.add_option("--bc", bc, "Bc: key rows per tile")->capture_default_str();
  app.add_flag("--q-from-end", q_from_end,
               "count Q blocks from the last row: where Br does not divide seqlen_q the ragged block is the first "
               "(flashlab's fa3 forward tiles so: under a causal mask its padding rides the shortest walk)");
}

Problem ProblemFlags::problem() const {
  ProblemSpec spec;
  spec.batch = batch;
  spec.heads = heads;
  spec.kv_heads = kv_heads;
  const int64_t s = seqlen.value_or(default_seqlen);
  spec.seqlen_q = seqlen_q.value_or(s);
  spec.seqlen_k = seqlen_k.value_or(s);
  spec.hdim = hdim;
  spec.causal = causal;
  if (!window.empty()) std::tie(spec.window_left, spec.window_right) = parse_window(window);
  spec.softcap = softcap;
  spec.alibi = alibi;
  spec.dropout = dropout;
  spec.seed = seed;
  spec.dtype = dtype;
  spec.mask = mask;
  if (!prefix.empty()) spec.prefix = parse_int_list(prefix, "--prefix");
  if (!doc_lengths.empty()) spec.doc_lengths = parse_int_list(doc_lengths, "--doc-lengths");
  spec.chunk = chunk;
  spec.mask_file = mask_file;
  return spec.build();
}

WalkSetup walk_setup(const ProblemFlags& flags, const WalkFlags& walk) {
  Problem p = flags.problem();
  harness::Inputs in = harness::random_inputs(p, p.seed);
  return {std::move(p), walk.parsed_order(), walk.tiling(), std::move(in)};
}

}  // namespace flashlab::cli
