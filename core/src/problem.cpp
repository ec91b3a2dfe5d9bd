#include "flashlab/problem.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "flashlab/error.hpp"

namespace flashlab {
namespace {

[[noreturn]] void fail(const std::string& msg) { throw Error("invalid problem: " + msg); }

void check_offsets(const std::vector<int64_t>& cu, int64_t batch, int64_t max_len, const char* name,
                   const char* max_name) {
  if (static_cast<int64_t>(cu.size()) != batch + 1)
    fail(std::string(name) + " has " + std::to_string(cu.size()) + " entries; expected batch + 1 = " +
         std::to_string(batch + 1));
  if (cu.front() != 0) fail(std::string(name) + "[0] must be 0, got " + std::to_string(cu.front()));
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t len = cu[b + 1] - cu[b];
    if (len < 0)
      fail(std::string(name) + " must be non-decreasing; entry " + std::to_string(b + 1) + " goes back");
    if (len > max_len)
      fail(std::string(name) + ": sequence " + std::to_string(b) + " has length " + std::to_string(len) +
           " > " + max_name + " = " + std::to_string(max_len));
  }
}

}  // namespace

void Problem::validate() const {
  auto positive = [](int64_t v, const char* name) {
    if (v <= 0) fail(std::string(name) + " must be positive, got " + std::to_string(v));
  };
  positive(batch, "batch");
  positive(heads_q, "heads");
  positive(heads_kv, "kv-heads");
  positive(seqlen_q, "seqlen_q");
  positive(seqlen_k, "seqlen_k");
  positive(head_dim, "head_dim");
  if (head_dim_v < 0) fail("head_dim_v must be positive (or 0 for head_dim), got " + std::to_string(head_dim_v));
  if (heads_q % heads_kv != 0)
    fail("heads (" + std::to_string(heads_q) + ") must be a multiple of kv-heads (" + std::to_string(heads_kv) +
         ") for GQA/MQA");
  if (head_dim > 1024 || dv() > 1024)
    fail("head_dim " + std::to_string(std::max(head_dim, dv())) + " is larger than the supported 1024");
  if (!(scale >= 0.0) || !std::isfinite(scale)) fail("scale must be a finite non-negative number (0: 1/sqrt(d))");
  if (window_left < -1 || window_right < -1)
    fail("window edges must be >= 0, or -1 for unbounded; got (" + std::to_string(window_left) + ", " +
         std::to_string(window_right) + ")");
  if (!(softcap >= 0.0) || !std::isfinite(softcap)) fail("softcap must be >= 0 (0 turns it off)");
  if (!alibi_slopes.empty()) {
    if (!alibi) fail("alibi slopes were given but alibi is off");
    if (static_cast<int64_t>(alibi_slopes.size()) != heads_q)
      fail("alibi needs one slope per query head: got " + std::to_string(alibi_slopes.size()) + " for " +
           std::to_string(heads_q) + " heads");
  }
  if (!(dropout_p >= 0.0 && dropout_p < 1.0))
    fail("dropout probability must be in [0, 1), got " + std::to_string(dropout_p));
  if (cu_seqlens_q.empty() != cu_seqlens_k.empty())
    fail("varlen needs both cu_seqlens_q and cu_seqlens_k");
  if (varlen()) {
    check_offsets(cu_seqlens_q, batch, seqlen_q, "cu_seqlens_q", "max seqlen_q");
    check_offsets(cu_seqlens_k, batch, seqlen_k, "cu_seqlens_k", "max seqlen_k");
  }
  // Sizes must fit comfortably in int64 index arithmetic.
  const double elems = static_cast<double>(batch) * std::max(seqlen_q, seqlen_k) * heads_q * std::max(head_dim, dv());
  if (elems > 0x1p52) fail("the tensors would have more than 2^52 elements");
}

double Problem::softmax_scale() const { return scale > 0.0 ? scale : 1.0 / std::sqrt(static_cast<double>(head_dim)); }

double Problem::alibi_slope(int64_t h) const {
  if (!alibi) return 0.0;
  if (!alibi_slopes.empty()) return alibi_slopes[h];
  // ALiBi (Press et al. 2022): a geometric sequence starting at 2^(-8/heads).
  return std::exp2(-8.0 * static_cast<double>(h + 1) / static_cast<double>(heads_q));
}

int64_t Problem::len_q(int64_t b) const { return varlen() ? cu_seqlens_q[b + 1] - cu_seqlens_q[b] : seqlen_q; }
int64_t Problem::len_k(int64_t b) const { return varlen() ? cu_seqlens_k[b + 1] - cu_seqlens_k[b] : seqlen_k; }
int64_t Problem::start_q(int64_t b) const { return varlen() ? cu_seqlens_q[b] : b * seqlen_q; }
int64_t Problem::start_k(int64_t b) const { return varlen() ? cu_seqlens_k[b] : b * seqlen_k; }

int64_t Problem::col_begin(int64_t b, int64_t i) const {
  if (left() < 0) return 0;
  const int64_t diag = i + len_k(b) - len_q(b);
  return std::clamp<int64_t>(diag - left(), 0, len_k(b));
}

int64_t Problem::col_end(int64_t b, int64_t i) const {
  if (right() < 0) return len_k(b);
  const int64_t diag = i + len_k(b) - len_q(b);
  return std::clamp<int64_t>(diag + right() + 1, 0, len_k(b));
}

std::vector<int64_t> Problem::q_shape() const {
  return varlen() ? std::vector<int64_t>{total_q(), heads_q, head_dim}
                  : std::vector<int64_t>{batch, seqlen_q, heads_q, head_dim};
}
std::vector<int64_t> Problem::k_shape() const {
  return varlen() ? std::vector<int64_t>{total_k(), heads_kv, head_dim}
                  : std::vector<int64_t>{batch, seqlen_k, heads_kv, head_dim};
}
std::vector<int64_t> Problem::v_shape() const {
  return varlen() ? std::vector<int64_t>{total_k(), heads_kv, dv()}
                  : std::vector<int64_t>{batch, seqlen_k, heads_kv, dv()};
}
std::vector<int64_t> Problem::o_shape() const {
  return varlen() ? std::vector<int64_t>{total_q(), heads_q, dv()}
                  : std::vector<int64_t>{batch, seqlen_q, heads_q, dv()};
}
std::vector<int64_t> Problem::lse_shape() const {
  return varlen() ? std::vector<int64_t>{heads_q, total_q()} : std::vector<int64_t>{batch, heads_q, seqlen_q};
}
int64_t Problem::lse_offset(int64_t b, int64_t h, int64_t i) const {
  return varlen() ? h * total_q() + start_q(b) + i : (b * heads_q + h) * seqlen_q + i;
}

int64_t Problem::visible_pairs() const {
  int64_t pairs = 0;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < len_q(b); ++i) pairs += std::max<int64_t>(0, col_end(b, i) - col_begin(b, i));
  return pairs * heads_q;
}

double Problem::forward_flops() const {
  const double per_pair = 2.0 * static_cast<double>(head_dim + dv());  // QK^T and PV: a multiply-add each
  const bool plain_or_causal = window_left < 0 && (window_right < 0 || causal);
  if (!varlen() && plain_or_causal) {
    // The anchors' convention: full matrix, halved for causal.
    const double full = static_cast<double>(batch) * heads_q * seqlen_q * seqlen_k * per_pair;
    return causal ? 0.5 * full : full;
  }
  return static_cast<double>(visible_pairs()) * per_pair;
}

std::string Problem::describe() const {
  std::ostringstream s;
  s << "batch " << batch << ", heads " << heads_q;
  if (heads_kv != heads_q) s << " (kv " << heads_kv << ")";
  s << ", seqlen " << seqlen_q;
  if (seqlen_k != seqlen_q) s << "x" << seqlen_k;
  if (varlen()) s << " (varlen max)";
  s << ", hdim " << head_dim;
  if (dv() != head_dim) s << "/" << dv();
  s << ", " << to_string(dtype);
  if (causal) s << ", causal";
  if (window_left >= 0 || window_right >= 0) s << ", window (" << window_left << "," << window_right << ")";
  if (softcap > 0) s << ", softcap " << softcap;
  if (alibi) s << ", alibi";
  if (dropout_p > 0) s << ", dropout " << dropout_p << " seed " << seed;
  return s.str();
}

}  // namespace flashlab
