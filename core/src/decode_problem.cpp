#include "flashlab/decode_problem.hpp"

#include <algorithm>
#include <sstream>

#include "flashlab/enum_names.hpp"
#include "flashlab/error.hpp"

namespace flashlab {
namespace {

static const EnumNames<Rotary, 3> kRotaryNames{
    {Rotary::none, "none"}, {Rotary::interleaved, "interleaved"}, {Rotary::half, "half"}};

[[noreturn]] void fail(const std::string& msg) { throw Error("invalid decode problem: " + msg); }
std::string str(int64_t v) { return std::to_string(v); }

}  // namespace

std::string to_string(Rotary r) { return enum_name(kRotaryNames, r); }
Rotary parse_rotary(const std::string& name) { return enum_parse(kRotaryNames, name, "rotary layout"); }

int64_t DecodeProblem::max_seqlen_k() const {
  int64_t m = 0;
  for (int64_t b = 0; b < batch; ++b) m = std::max(m, seqlen_k(b));
  return m;
}

void DecodeProblem::validate() const {
  auto positive = [](int64_t v, const char* name) {
    if (v <= 0) fail(std::string(name) + " must be positive, got " + str(v));
  };
  positive(batch, "batch");
  positive(q_len, "q_len");
  if (new_len < 0) fail("new_len (rows appended) must be >= 0, got " + str(new_len));
  if (num_splits <= 0) fail("num_splits must be positive, got " + str(num_splits));

  // ---- the cache ----
  if (paged()) {
    if (cache_len != 0)
      fail("a paged cache takes its size from num_pages x page_size; cache_len must be 0, got " + str(cache_len));
    positive(num_pages, "num_pages");
    positive(max_pages, "max_pages (block table columns)");
    if (static_cast<int64_t>(block_table.size()) != batch * max_pages)
      fail("the block table has " + str(block_table.size()) + " entries; expected batch x max_pages = " +
           str(batch) + " x " + str(max_pages) + " = " + str(batch * max_pages));
  } else {
    if (page_size < 0) fail("page_size must be positive, or 0 for a contiguous cache; got " + str(page_size));
    positive(cache_len, "cache_len");
    if (!block_table.empty() || num_pages != 0)
      fail("a block table was given for a contiguous cache; set page_size for a paged one");
  }
  if (static_cast<int64_t>(cache_seqlens.size()) != batch)
    fail("cache_seqlens has " + str(cache_seqlens.size()) + " entries; expected one per batch entry (" + str(batch) +
         ")");
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t used = cache_seqlens[b];
    if (used < 0) fail("cache_seqlens[" + str(b) + "] = " + str(used) + " is negative");
    const std::string keys = "cache_seqlens[" + str(b) + "] = " + str(used) +
                             (new_len ? " plus " + str(new_len) + " appended = " + str(seqlen_k(b)) : "") + " keys";
    if (seqlen_k(b) > capacity() && paged())
      fail("the block table is too short: " + keys + " need " + str((seqlen_k(b) + page_size - 1) / page_size) +
           " pages of " + str(page_size) + ", but it has max_pages = " + str(max_pages) + " columns");
    if (seqlen_k(b) > capacity())
      fail(keys + " do not fit in the cache's cache_len = " + str(cache_len) + " rows per entry");
    if (seqlen_k(b) == 0)
      fail("batch entry " + str(b) + " has no keys (cache_seqlens 0 and nothing appended); give it at least one");
    if (!paged()) continue;
    // Every page that holds one of the entry's keys must be a real page.
    const int64_t pages = (seqlen_k(b) + page_size - 1) / page_size;
    for (int64_t p = 0; p < pages; ++p) {
      const int64_t page = block_table[b * max_pages + p];
      if (page < 0 || page >= num_pages)
        fail("block_table[" + str(b) + "][" + str(p) + "] = " + str(page) + " is not a page: expected 0 .. " +
             str(num_pages - 1) + " (num_pages " + str(num_pages) + ")");
    }
  }

  // ---- rotary ----
  if (rotary != Rotary::none) {
    if (new_len == 0) fail("rotary embeds the appended keys and the queries: it needs new_len > 0 (K/V new)");
    if (rot_dim() % 2 != 0 || rot_dim() > head_dim)
      fail("rotary_dim must be even and <= head_dim (" + str(head_dim) + "), got " + str(rot_dim()));
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t last = std::max(new_pos(b, new_len - 1), q_pos(b, q_len - 1));
      if (last >= rope_rows())
        fail("the cos/sin table has " + str(rope_rows()) + " rows but entry " + str(b) + " needs position " +
             str(last) + ": give it at least " + str(last + 1) + " rows");
    }
  } else if (rotary_dim != 0) {
    fail("rotary_dim was set but rotary is off");
  }

  // ---- attention: heads, head_dim, scale, softcap, sizes: the lowered Problem's own rules ----
  attention().validate();
}

Problem DecodeProblem::attention() const {
  Problem p;
  p.batch = batch;
  p.heads_q = heads_q;
  p.heads_kv = heads_kv;
  p.head_dim = head_dim;
  p.seqlen_q = q_len;
  p.seqlen_k = std::max<int64_t>(1, max_seqlen_k());
  p.scale = scale;
  p.causal = causal;
  p.softcap = softcap;
  p.dtype = dtype;
  p.cu_seqlens_q.assign(1, 0);
  p.cu_seqlens_k.assign(1, 0);
  for (int64_t b = 0; b < batch; ++b) {
    p.cu_seqlens_q.push_back(p.cu_seqlens_q.back() + q_len);
    p.cu_seqlens_k.push_back(p.cu_seqlens_k.back() + seqlen_k(b));
  }
  return p;
}

std::string DecodeProblem::describe() const {
  std::ostringstream s;
  s << "decode: batch " << batch << ", heads " << heads_q;
  if (heads_kv != heads_q) s << " (kv " << heads_kv << ")";
  s << ", q_len " << q_len << ", hdim " << head_dim << ", cache ";
  if (paged()) s << num_pages << " pages of " << page_size;
  else s << "len " << cache_len;
  s << ", seqlens";
  for (int64_t b = 0; b < batch && b < 4; ++b) s << (b ? "," : " ") << cache_seqlens[b];
  if (batch > 4) s << ",...";
  if (new_len) s << ", append " << new_len;
  if (rotary != Rotary::none) s << ", rotary " << to_string(rotary);
  s << ", " << to_string(dtype);
  if (causal) s << ", causal";
  if (softcap > 0) s << ", softcap " << softcap;
  s << ", splits " << num_splits;
  return s.str();
}

}  // namespace flashlab
