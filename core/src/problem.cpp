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

std::string list(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t n = 0; n < v.size(); ++n) {
    if (n) s += ',';
    s += std::to_string(v[n]);
  }
  return s;
}

// The mask function's own fields, and how they combine with the rest of the problem.
void check_mask(const Problem& p) {
  const Mask& m = p.mask;
  const std::string kind = to_string(m.kind);
  if (m.kind != MaskKind::prefix_lm && !m.prefix.empty()) fail("a prefix length was given but the mask is " + kind + "; use --mask prefix-lm");
  if (m.kind != MaskKind::document && !m.doc_lengths.empty())
    fail("document lengths were given but the mask is " + kind + "; use --mask document");
  if (m.kind != MaskKind::chunked && m.chunk != 0) fail("a chunk size was given but the mask is " + kind + "; use --mask chunked");
  if (m.kind != MaskKind::dense && m.dense) fail("a mask file was given but the mask is " + kind + "; use --mask dense");
  const bool windowed = p.causal || p.window_left >= 0 || p.window_right >= 0;
  switch (m.kind) {
    case MaskKind::none: break;
    case MaskKind::prefix_lm:
      if (windowed) fail("prefix-lm is already causal after the prefix; it does not combine with --causal or --window");
      if (m.prefix.size() != 1 && static_cast<int64_t>(m.prefix.size()) != p.batch)
        fail("prefix-lm needs one prefix length, or one per batch entry (" + std::to_string(p.batch) + "); got " +
             std::to_string(m.prefix.size()));
      for (int64_t b = 0; b < p.batch; ++b) {
        const int64_t len = m.prefix_of(b);
        if (len < 0 || len > p.len_k(b))
          fail("prefix " + std::to_string(len) + " of batch entry " + std::to_string(b) +
               " must be in [0, seqlen_k = " + std::to_string(p.len_k(b)) + "]");
      }
      break;
    case MaskKind::document: {
      if (p.varlen()) fail("document masking packs sequences itself; it does not combine with varlen offsets");
      if (p.seqlen_q != p.seqlen_k)
        fail("document masking needs seqlen_q == seqlen_k (one packed sequence), got " + std::to_string(p.seqlen_q) +
             " and " + std::to_string(p.seqlen_k));
      if (m.doc_lengths.empty()) fail("document masking needs the document lengths (--doc-lengths 300,700,24)");
      int64_t sum = 0;
      for (int64_t len : m.doc_lengths) {
        if (len <= 0) fail("document lengths must be positive, got " + list(m.doc_lengths));
        sum += len;
      }
      if (sum != p.seqlen_q)
        fail("document lengths " + list(m.doc_lengths) + " sum to " + std::to_string(sum) + ", but seqlen is " +
             std::to_string(p.seqlen_q) + "; they must cover the packed sequence exactly");
      break;
    }
    case MaskKind::chunked:
      if (windowed) fail("chunked attention is already causal within each chunk; it does not combine with --causal or --window");
      if (m.chunk <= 0) fail("chunked attention needs a positive chunk size (--chunk 256), got " + std::to_string(m.chunk));
      break;
    case MaskKind::dense: {
      if (!m.dense) fail("dense masking needs a mask file (--mask-file m.npy)");
      if (p.varlen()) fail("a dense mask does not combine with varlen offsets");
      const std::vector<int64_t>& s = m.dense->bits.shape;
      const bool two = s.size() == 2 && s[0] == p.seqlen_q && s[1] == p.seqlen_k;
      const bool four = s.size() == 4 && (s[0] == 1 || s[0] == p.batch) && (s[1] == 1 || s[1] == p.heads_q) &&
                        s[2] == p.seqlen_q && s[3] == p.seqlen_k;
      if (!two && !four)
        fail("the dense mask (" + m.dense->source + ") has shape " + shape_string(s) + "; expected (seqlen_q, seqlen_k) = (" +
             std::to_string(p.seqlen_q) + ", " + std::to_string(p.seqlen_k) + ") or (batch, heads, seqlen_q, seqlen_k) = (" +
             std::to_string(p.batch) + ", " + std::to_string(p.heads_q) + ", " + std::to_string(p.seqlen_q) + ", " +
             std::to_string(p.seqlen_k) + "), batch and heads may be 1");
      break;
    }
  }
}

}  // namespace

bool Problem::mask_varies_by_batch() const {
  if (mask.kind == MaskKind::dense) return mask.dense && mask.dense->varies_by_batch();
  if (mask.kind == MaskKind::prefix_lm)
    for (int64_t v : mask.prefix)
      if (v != mask.prefix.front()) return true;
  return false;
}

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
  check_mask(*this);
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

// Both edges are the window's, narrowed by the mask kind; each is non-decreasing in i (mask.hpp).
int64_t Problem::col_begin(int64_t b, int64_t i) const {
  const int64_t diag = i + len_k(b) - len_q(b);
  int64_t begin = left() < 0 ? 0 : diag - left();
  if (mask.kind == MaskKind::document) begin = std::max(begin, mask.document_of(i).begin);
  if (mask.kind == MaskKind::chunked && diag >= 0) begin = std::max(begin, diag / mask.chunk * mask.chunk);
  return std::clamp<int64_t>(begin, 0, len_k(b));
}

int64_t Problem::col_end(int64_t b, int64_t i) const {
  const int64_t diag = i + len_k(b) - len_q(b);
  int64_t end = right() < 0 ? len_k(b) : diag + right() + 1;
  if (mask.kind == MaskKind::document) end = std::min(end, mask.document_of(i).end);
  if (mask.kind == MaskKind::chunked) end = std::min(end, diag + 1);
  if (mask.kind == MaskKind::prefix_lm) end = std::max(mask.prefix_of(b), diag + 1);
  return std::clamp<int64_t>(end, 0, len_k(b));
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
  if (!interval_mask()) {  // a dense mask: every bit, every head
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t h = 0; h < heads_q; ++h)
        for (int64_t i = 0; i < len_q(b); ++i)
          for (int64_t j = col_begin(b, i); j < col_end(b, i); ++j) pairs += visible(b, h, i, j);
    return pairs;
  }
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < len_q(b); ++i) pairs += std::max<int64_t>(0, col_end(b, i) - col_begin(b, i));
  return pairs * heads_q;
}

double Problem::forward_flops() const {
  const double per_pair = 2.0 * static_cast<double>(head_dim + dv());  // QK^T and PV: a multiply-add each
  const bool plain_or_causal = window_left < 0 && (window_right < 0 || causal) && mask.kind == MaskKind::none;
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
  if (mask.kind != MaskKind::none) s << ", mask " << mask.describe();
  if (alibi) s << ", alibi";
  if (dropout_p > 0) s << ", dropout " << dropout_p << " seed " << seed;
  return s.str();
}

}  // namespace flashlab
