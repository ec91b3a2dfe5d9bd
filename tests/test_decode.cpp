// Decoding against a KV cache: the problem's validation, every decode implementation over the decode
// case list by the official rule, the split-KV schedule's bytes and events, and checks that fail when
// the cache is read wrong.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>

#include "cases.hpp"
#include "decode_check.hpp"
#include "decode_executor.hpp"
#include "decode_reference.hpp"
#include "flashlab/error.hpp"
#include "stepper.hpp"

using namespace flashlab;
using namespace flashlab::harness;

namespace {

DecodeProblem paged_problem() {
  DecodeProblem d;
  d.batch = 2;
  d.heads_q = 4;
  d.heads_kv = 2;
  d.head_dim = 32;
  d.q_len = 2;
  d.causal = true;
  d.page_size = 16;
  d.max_pages = 8;
  d.num_pages = 16;
  d.block_table = shuffled_block_table(2, 8, 3);
  d.cache_seqlens = {37, 100};
  d.new_len = 2;
  d.rotary = Rotary::half;
  d.num_splits = 3;
  d.dtype = DType::bf16;
  return d;
}

std::string error_of(const DecodeProblem& d) {
  try {
    d.validate();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void check_all_fields(const CheckResult& r) {
  REQUIRE(!r.fields.empty());
  for (const auto& f : r.fields) {
    CAPTURE(f.field);
    CAPTURE(f.error);
    CAPTURE(f.tolerance);
    CHECK(f.pass);
  }
}

}  // namespace

TEST_CASE("a decode problem is validated in one place, with errors that say what to fix") {
  CHECK(error_of(paged_problem()).empty());
  DecodeProblem d = paged_problem();
  d.block_table[1] = 16;  // entry 0's second page: out of range
  CHECK(error_of(d).find("block_table[0][1] = 16 is not a page: expected 0 .. 15") != std::string::npos);
  d = paged_problem();
  d.block_table[15] = -3;  // entry 1's last column: never used by 102 keys in pages of 16, so not an error
  CHECK(error_of(d).empty());
  d = paged_problem();
  d.cache_seqlens[1] = 127;  // 127 + 2 appended > 8 pages x 16
  CHECK(error_of(d).find("block table is too short") != std::string::npos);
  CHECK(error_of(d).find("need 9 pages of 16") != std::string::npos);
  d = paged_problem();
  d.block_table.pop_back();
  CHECK(error_of(d).find("expected batch x max_pages = 2 x 8 = 16") != std::string::npos);
  d = paged_problem();
  d.page_size = 0;
  d.cache_len = 64;
  d.max_pages = d.num_pages = 0;
  d.block_table.clear();
  d.cache_seqlens = {10, 63};  // 63 + 2 > 64
  CHECK(error_of(d).find("do not fit in the cache's cache_len = 64") != std::string::npos);
  d.cache_seqlens = {10, -1};
  CHECK(error_of(d).find("cache_seqlens[1] = -1 is negative") != std::string::npos);
  d = paged_problem();
  d.new_len = 0;
  CHECK(error_of(d).find("needs new_len > 0") != std::string::npos);
  d = paged_problem();
  d.rotary_seqlen = 50;  // entry 1 needs position 101
  CHECK(error_of(d).find("needs position 101") != std::string::npos);
  d = paged_problem();
  d.heads_kv = 3;  // the attention rules come from Problem::validate()
  CHECK(error_of(d).find("multiple of kv-heads") != std::string::npos);
  d = paged_problem();
  DecodeTensors in = random_decode_inputs(d, 1);
  in.k_cache.shape[0] = 15;
  CHECK_THROWS_WITH_AS(tiled::decode(d, in), doctest::Contains("the K cache has shape (15, 16, 2, 32)"), Error);
}

TEST_CASE("the lowered problem is the attention the cache holds: varlen keys, bottom-right causal") {
  const DecodeProblem d = paged_problem();
  const Problem p = d.attention();
  CHECK(p.varlen());
  CHECK(p.len_q(1) == 2);
  CHECK(p.len_k(0) == 39);
  CHECK(p.len_k(1) == 102);
  CHECK(p.col_end(1, 0) == 101);  // query row 0 sits at key position 100 (the first appended key)
  CHECK(p.col_end(1, 1) == 102);
  // The cache's indexing rule: logical key j of entry b lives in page block_table[b][j / 16].
  CHECK(d.cache_row(1, 37) == d.block_table[8 + 2] * 16 + 5);
}

TEST_CASE("every decode implementation passes every decode case") {
  uint64_t seed = 1;
  for (const auto& c : testing::decode_cases()) {
    const DecodeTensors in = random_decode_inputs(c.problem, seed++);
    const DecodeBaseline base = decode_baseline(c.problem, in);
    for (const auto& impl : decode_implementations()) {
      CAPTURE(c.name);
      CAPTURE(impl.name);
      const CheckResult r = check_decode(impl, c.problem, in, base);
      if (!r.skipped.empty()) {  // the GPU kernel without a device, or an fp32 case
        MESSAGE(impl.name << " " << r.skipped << " (" << c.name << ")");
        continue;
      }
      CHECK(r.fields.size() == (c.problem.new_len > 0 ? 4u : 2u));
      check_all_fields(r);
    }
  }
}

TEST_CASE("split-KV passes every decode case with tiles of 2 x 16: empty splits, fully masked Q blocks, many blocks") {
  uint64_t seed = 100;
  const DecodeImplementation small{"tiled 2x16", "", [](const DecodeProblem& p, const DecodeTensors& t) {
                                     return tiled::decode(p, t, tiled::Tiling{2, 16});
                                   }};
  for (const auto& c : testing::decode_cases()) {
    const DecodeTensors in = random_decode_inputs(c.problem, seed++);
    CAPTURE(c.name);
    check_all_fields(check_decode(small, c.problem, in, decode_baseline(c.problem, in)));
  }
}

TEST_CASE("split-KV passes with small tiles and any number of splits, and agrees with one split") {
  DecodeProblem d = paged_problem();
  const DecodeTensors in = random_decode_inputs(d, 11);
  const DecodeBaseline base = decode_baseline(d, in);
  for (int64_t splits : {1, 2, 3, 7, 20}) {
    d.num_splits = splits;
    const DecodeImplementation impl{"tiled 2x16", "", [](const DecodeProblem& p, const DecodeTensors& t) {
                                      return tiled::decode(p, t, tiled::Tiling{2, 16});
                                    }};
    CAPTURE(splits);
    check_all_fields(check_decode(impl, d, in, base));
  }
}

TEST_CASE("the check fails an implementation that reads the cache wrong") {
  const DecodeProblem d = paged_problem();
  const DecodeTensors in = random_decode_inputs(d, 5);
  const DecodeBaseline base = decode_baseline(d, in);
  // Ignores the block table's order: reads logical page p from physical page p.
  const DecodeImplementation no_table{"no block table", "", [](const DecodeProblem& p, const DecodeTensors& t) {
                                        DecodeProblem wrong = p;
                                        std::sort(wrong.block_table.begin(), wrong.block_table.end());
                                        return tiled::decode(wrong, t);
                                      }};
  CHECK_FALSE(check_decode(no_table, d, in, base).pass());
  // Rotates with the other layout.
  const DecodeImplementation other_rotary{"interleaved", "", [](const DecodeProblem& p, const DecodeTensors& t) {
                                            DecodeProblem wrong = p;
                                            wrong.rotary = Rotary::interleaved;
                                            return tiled::decode(wrong, t);
                                          }};
  CHECK_FALSE(check_decode(other_rotary, d, in, base).pass());
  // Drops the last split's keys from the combine.
  const DecodeImplementation short_cache{"one key short", "", [](const DecodeProblem& p, const DecodeTensors& t) {
                                           DecodeProblem wrong = p;
                                           wrong.cache_seqlens[1] -= 1;
                                           DecodeOutputs<float> out = tiled::decode(wrong, t);
                                           return out;
                                         }};
  CHECK_FALSE(check_decode(short_cache, d, in, base).pass());
  const auto split_kv = std::find_if(decode_implementations().begin(), decode_implementations().end(),
                                     [](const DecodeImplementation& i) { return i.name == "tiled-split-kv"; });
  REQUIRE(split_kv != decode_implementations().end());
  CHECK(check_decode(*split_kv, d, in, base).pass());
}

TEST_CASE("a paged cache gives the same answer as the contiguous one with the same keys") {
  DecodeProblem paged = paged_problem();
  paged.num_splits = 4;
  const DecodeTensors pin = random_decode_inputs(paged, 9);
  DecodeProblem flat = paged;
  flat.page_size = flat.num_pages = flat.max_pages = 0;
  flat.block_table.clear();
  flat.cache_len = paged.capacity();
  DecodeTensors fin = pin;
  fin.k_cache = Tensor(flat.cache_shape());
  fin.v_cache = Tensor(flat.cache_shape());
  const int64_t row = paged.heads_kv * paged.head_dim;
  for (int64_t b = 0; b < paged.batch; ++b)
    for (int64_t j = 0; j < paged.capacity(); ++j) {
      if (j >= paged.seqlen_k(b)) continue;  // rows past the keys may sit in unmapped pages
      std::copy_n(pin.k_cache.ptr() + paged.cache_row(b, j) * row, row, fin.k_cache.ptr() + flat.cache_row(b, j) * row);
      std::copy_n(pin.v_cache.ptr() + paged.cache_row(b, j) * row, row, fin.v_cache.ptr() + flat.cache_row(b, j) * row);
    }
  const DecodeOutputs<float> a = tiled::decode(paged, pin), c = tiled::decode(flat, fin);
  CHECK(a.o.data == c.o.data);
  CHECK(a.lse.data == c.lse.data);
}

TEST_CASE("split-KV: the walk's bytes equal the schedule's closed form; each key is read once per head") {
  DecodeProblem d = paged_problem();
  const DecodeTensors in = random_decode_inputs(d, 2);
  const tiled::Tiling tiling{2, 16};
  int64_t k_bytes_one_split = 0;
  for (int64_t splits : {1, 3, 20}) {
    d.num_splits = splits;
    tiled::ByteCounter counter;
    tiled::decode(d, in, tiling, &counter);
    tiled::ByteCounts expected;
    for (int64_t b = 0; b < d.batch; ++b) {
      const tiled::SplitSchedule s(d, b, tiling);
      const tiled::ByteCounts c = s.closed_form();
      for (int t = 0; t < tiled::kTensorCount; ++t) {
        expected.load[t] += c.load[t] * d.heads_q;
        expected.store[t] += c.store[t] * d.heads_q;
      }
      for (const tiled::Transfer& t : s.prologue()) expected.add(tiled::Transfer{t.tensor, t.store, 0, 0, t.bytes * d.heads_kv});
    }
    CAPTURE(splits);
    CHECK(counter.counts == expected);
    const int64_t k_bytes = counter.counts.load[static_cast<int>(tiled::TensorId::K)];
    // Q block 0 (rows 0, 1) sees every key of the entry: (39 + 102) keys x 32 dims x 2 bytes x 4 heads.
    CHECK(k_bytes == (39 + 102) * 32 * 2 * 4);
    if (splits == 1) k_bytes_one_split = k_bytes;
    CHECK(k_bytes == k_bytes_one_split);
    const int64_t combine_reads = counter.counts.load[static_cast<int>(tiled::TensorId::Oaccum)];
    CHECK(combine_reads == (splits > 1 ? splits * 2 * 32 * 4 * d.batch * d.heads_q : 0));
  }
}

TEST_CASE("the decode walk shows each split and the combine as events") {
  DecodeProblem d = paged_problem();
  d.batch = 1;
  d.cache_seqlens = {37};
  d.block_table.resize(8);
  d.num_splits = 3;
  const DecodeTensors in = random_decode_inputs(d, 4);
  tiled::Recorder rec;
  tiled::decode(d, in, tiled::Tiling{2, 16}, &rec);
  // 39 keys: Tc = 3 blocks of 16, one per split.
  std::set<int64_t> splits_seen;
  int combines = 0, oaccum_stores = 0;
  for (const auto& e : rec.events) {
    if (e.where.h != 0) continue;
    if (e.where.split >= 0) splits_seen.insert(e.where.split);
    if (e.kind == tiled::Event::Kind::combine) {
      ++combines;
      CHECK(e.a.cols() == 3);  // each row's LSE of every split
    }
    if (e.kind == tiled::Event::Kind::transfer && e.transfer.tensor == tiled::TensorId::Oaccum && e.transfer.store)
      ++oaccum_stores;
  }
  CHECK(splits_seen == std::set<int64_t>{0, 1, 2});
  CHECK(combines == 1);
  CHECK(oaccum_stores == 3);
  // The recorded combine's O equals the output the run stored.
  const DecodeOutputs<float> out = tiled::decode(d, in, tiled::Tiling{2, 16});
  for (const auto& e : rec.events)
    if (e.kind == tiled::Event::Kind::combine && e.where.h == 0)
      CHECK(e.b(1, 5) == doctest::Approx(out.o[d.q_offset(0, 1, 0) + 5]).epsilon(1e-2));
}
