#include "problem_flags.hpp"

#include "flashlab/error.hpp"

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
  g->add_option("--softcap", softcap, "tanh softcap of the scores (0: off)");
  g->add_flag("--alibi", alibi, "ALiBi bias with the standard slopes 2^(-8(h+1)/heads)");
  g->add_option("--dropout", dropout, "dropout probability in [0, 1)");
  g->add_option("--seed", seed, "seed of the random inputs and of dropout")->capture_default_str();
  g->add_option("--dtype", dtype, "fp32 | fp16 | bf16")->capture_default_str();
  if (with_pass) g->add_option("--pass", pass, "fwd | bwd | fwd+bwd")->capture_default_str();
}

Problem ProblemFlags::problem() const {
  Problem p;
  p.batch = batch;
  p.heads_q = heads;
  p.heads_kv = kv_heads > 0 ? kv_heads : heads;
  if (kv_heads < 0) throw Error("invalid problem: kv-heads must be positive, got " + std::to_string(kv_heads));
  const int64_t s = seqlen != 0 ? seqlen : default_seqlen;
  p.seqlen_q = seqlen_q != 0 ? seqlen_q : s;
  p.seqlen_k = seqlen_k != 0 ? seqlen_k : s;
  p.head_dim = hdim;
  p.causal = causal;
  if (!window.empty()) {
    const auto comma = window.find(',');
    try {
      if (comma == std::string::npos) throw std::invalid_argument("no comma");
      size_t used = 0;
      p.window_left = std::stoll(window.substr(0, comma), &used);
      if (used != comma) throw std::invalid_argument("junk");
      const std::string right = window.substr(comma + 1);
      p.window_right = std::stoll(right, &used);
      if (used != right.size()) throw std::invalid_argument("junk");
    } catch (const std::exception&) {
      throw Error("--window takes two integers L,R (e.g. 128,0), got '" + window + "'");
    }
  }
  p.softcap = softcap;
  p.alibi = alibi;
  p.dropout_p = dropout;
  p.seed = seed;
  p.dtype = parse_dtype(dtype);
  p.validate();
  return p;
}

}  // namespace flashlab::cli
