// Mask functions: which keys a query may attend to, beyond causal and the
// sliding window (problem.hpp). A mask is a function of (batch b, head h,
// query row i, key column j) -> bool, FlexAttention's mask_mod; Problem::visible
// (b, h, i, j) is that function, the one every implementation asks.
//
// Built-in kinds, with diag(i) = i + seqlen_k - seqlen_q (bottom-right, as for causal):
//   none       causal / window alone (problem.hpp), or no mask at all
//   prefix_lm  j < prefix_b  or  j <= diag(i)            full attention within the prefix, causal after
//   document   doc(i) == doc(j)  [and j <= i if causal]   packed sequences; doc(t) from doc_lengths
//   chunked    chunk(diag(i)) == chunk(j) and j <= diag(i)  local attention in chunks of `chunk` keys
//   dense      bits[b, h, i, j] from a user's .npy            (seqlen_q, seqlen_k) or (batch|1, heads|1, sq, sk)
//
// Every built-in kind gives each row one interval of visible keys, [col_begin, col_end), whose two edges
// never move left as the row grows (Problem::col_begin / col_end apply them); the tiled schedule relies on
// that to find each Q block's K/V blocks with two mask evaluations. A dense mask can have holes anywhere:
// it is intersected with that interval (so --causal with a dense mask means both), and its block mask is
// found by reading every bit (tiled_cpu/block_mask.hpp).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "flashlab/npy.hpp"

namespace flashlab {

enum class MaskKind { none, prefix_lm, document, chunked, dense };
std::string to_string(MaskKind kind);
MaskKind parse_mask_kind(const std::string& name);  // "none" | "prefix-lm" | "document" | "chunked" | "dense"

// A user's boolean mask, as read from .npy: true = may attend.
struct DenseMask {
  BoolArray bits;      // (seqlen_q, seqlen_k) or (batch | 1, heads | 1, seqlen_q, seqlen_k)
  std::string source;  // the file it came from, for messages

  static std::shared_ptr<const DenseMask> load(const std::string& path);
  bool at(int64_t b, int64_t h, int64_t i, int64_t j) const {
    const auto& s = bits.shape;
    if (s.size() == 2) return bits.data[i * s[1] + j] != 0;
    const int64_t bb = s[0] == 1 ? 0 : b, hh = s[1] == 1 ? 0 : h;
    return bits.data[((bb * s[1] + hh) * s[2] + i) * s[3] + j] != 0;
  }
  bool varies_by_batch() const { return bits.shape.size() == 4 && bits.shape[0] > 1; }
  bool varies_by_head() const { return bits.shape.size() == 4 && bits.shape[1] > 1; }
};

struct Mask {
  MaskKind kind = MaskKind::none;
  std::vector<int64_t> prefix;       // prefix_lm: one length for every batch entry, or one per entry
  std::vector<int64_t> doc_lengths;  // document: lengths of the packed documents, in order; sum = seqlen
  int64_t chunk = 0;                 // chunked: keys per chunk
  std::shared_ptr<const DenseMask> dense;  // dense

  int64_t prefix_of(int64_t b) const { return prefix.size() == 1 ? prefix[0] : prefix[b]; }
  // The document holding token t: its first token and one past its last.
  struct Span {
    int64_t begin, end;
  };
  Span document_of(int64_t t) const;
  std::string describe() const;  // "document (3 docs)", "prefix-lm 128", ...
};

}  // namespace flashlab
