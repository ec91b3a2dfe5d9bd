#include "flashlab/problem_spec.hpp"

#include <algorithm>
#include <stdexcept>

#include "flashlab/error.hpp"

namespace flashlab {

std::pair<int64_t, int64_t> parse_window(const std::string& text) {
  try {
    const auto comma = text.find(',');
    if (comma == std::string::npos) throw std::invalid_argument("no comma");
    size_t used = 0;
    const int64_t left = std::stoll(text.substr(0, comma), &used);
    if (used != comma) throw std::invalid_argument("junk");
    const std::string right_text = text.substr(comma + 1);
    const int64_t right = std::stoll(right_text, &used);
    if (used != right_text.size()) throw std::invalid_argument("junk");
    return {left, right};
  } catch (const std::exception&) {
    throw Error("--window takes two integers L,R (e.g. 128,0), got '" + text + "'");
  }
}

std::vector<int64_t> parse_int_list(const std::string& text, const char* flag) {
  std::vector<int64_t> out;
  size_t at = 0;
  try {
    while (at <= text.size()) {
      const size_t comma = std::min(text.find(',', at), text.size());
      const std::string item = text.substr(at, comma - at);
      size_t used = 0;
      out.push_back(std::stoll(item, &used));
      if (used != item.size()) throw std::invalid_argument("junk");
      at = comma + 1;
    }
  } catch (const std::exception&) {
    throw Error(std::string(flag) + " takes integers separated by commas (e.g. 300,700,24), got '" + text + "'");
  }
  return out;
}

Problem ProblemSpec::build() const {
  if (kv_heads && *kv_heads <= 0)
    throw Error("invalid problem: kv-heads must be positive, got " + std::to_string(*kv_heads));
  Problem p;
  p.batch = batch;
  p.heads_q = heads;
  p.heads_kv = kv_heads.value_or(heads);
  p.seqlen_q = seqlen_q;
  p.seqlen_k = seqlen_k;
  p.head_dim = hdim;
  p.causal = causal;
  p.window_left = window_left;
  p.window_right = window_right;
  p.softcap = softcap;
  p.alibi = alibi;
  p.dropout_p = dropout;
  p.seed = seed;
  p.dtype = parse_dtype(dtype);
  if (mask == "causal") {
    p.causal = true;
  } else {
    p.mask.kind = parse_mask_kind(mask);
  }
  p.mask.prefix = prefix;
  p.mask.doc_lengths = doc_lengths;
  p.mask.chunk = chunk;
  if (!mask_file.empty()) {
    if (p.mask.kind != MaskKind::dense) throw Error("invalid problem: --mask-file needs --mask dense");
    p.mask.dense = DenseMask::load(mask_file);
  }
  p.validate();
  return p;
}

}  // namespace flashlab
