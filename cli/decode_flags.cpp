#include "decode_flags.hpp"

#include <algorithm>
#include <sstream>
#include <string>
#include <utility>

#include "decode_check.hpp"
#include "flashlab/error.hpp"

namespace flashlab::cli {
namespace {

std::vector<int64_t> parse_list(const std::string& text, const char* flag) {
  std::vector<int64_t> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    try {
      size_t used = 0;
      out.push_back(std::stoll(item, &used));
      if (used != item.size()) throw std::invalid_argument(item);
    } catch (const std::exception&) {
      throw Error(std::string(flag) + " takes comma-separated integers like 5,900,17; got '" + text + "'");
    }
  }
  if (out.empty()) throw Error(std::string(flag) + " is empty; give one length per batch entry, e.g. 5,900,17");
  return out;
}

}  // namespace

void DecodeFlags::add_to(CLI::App& app) {
  app.add_flag("--decode", decode, "decoding against a KV cache (flash_attn_with_kvcache) instead of plain attention");
  app.add_option("--q-len", q_len, "decode: queries per batch entry")->capture_default_str();
  app.add_option("--cache-len", cache_len, "decode: cache rows per entry (default: the largest seqlen + append)");
  app.add_option("--cache-seqlens", cache_seqlens, "decode: keys already cached per entry, e.g. 5,900,17 "
                                                   "(default: a full cache)");
  app.add_option("--page-size", page_size, "decode: paged cache with pages of this many rows (0: contiguous)");
  app.add_option("--max-pages", max_pages, "decode: block table columns (default: ceil(cache-len / page-size))");
  app.add_option("--num-pages", num_pages, "decode: physical pages (default: batch x max-pages)");
  app.add_option("--num-splits", num_splits, "decode: split-KV splits of the key blocks")->capture_default_str();
  app.add_option("--rotary", rotary, "decode: rotary layout none | interleaved | half")->capture_default_str();
  app.add_option("--rotary-dim", rotary_dim, "decode: rotated dims (default: hdim)");
  app.add_option("--append", append, "decode: new K/V rows appended at cache_seqlens before attending");
}

DecodeProblem DecodeFlags::problem(const ProblemFlags& shared, bool zero_splits_choose) const {
  const Problem base = shared.problem();  // batch, heads, kv heads, hdim, causal, softcap, dtype: validated there
  if (base.window_left >= 0 || base.window_right >= 0 || base.alibi || base.dropout_p > 0 ||
      base.mask.kind != MaskKind::none)
    throw Error("--decode supports --causal and --softcap; --window, --mask, --alibi and --dropout are not implemented "
                "for it");
  DecodeProblem d;
  d.batch = base.batch;
  d.heads_q = base.heads_q;
  d.heads_kv = base.heads_kv;
  d.head_dim = base.head_dim;
  d.causal = base.causal;
  d.softcap = base.softcap;
  d.dtype = base.dtype;
  d.q_len = q_len;
  d.new_len = append;
  d.num_splits = num_splits;
  d.rotary = parse_rotary(rotary);
  d.rotary_dim = rotary_dim;
  if (!cache_seqlens.empty()) {
    d.cache_seqlens = parse_list(cache_seqlens, "--cache-seqlens");
    const int64_t n = static_cast<int64_t>(d.cache_seqlens.size());
    if (d.batch == 1 && n > 1) d.batch = n;
    if (n == 1 && d.batch > 1) d.cache_seqlens.assign(static_cast<size_t>(d.batch), d.cache_seqlens[0]);
  }
  const int64_t longest = d.cache_seqlens.empty() ? 0 : *std::max_element(d.cache_seqlens.begin(), d.cache_seqlens.end());
  if (cache_len && *cache_len <= 0) throw Error("--cache-len must be positive, got " + std::to_string(*cache_len));
  const int64_t rows = cache_len ? *cache_len : (d.cache_seqlens.empty() ? 1024 : longest + append);
  if (d.cache_seqlens.empty()) d.cache_seqlens.assign(static_cast<size_t>(d.batch), std::max<int64_t>(0, rows - append));
  if (page_size > 0) {
    d.page_size = page_size;
    for (const auto& [flag, given] : {std::pair{"--max-pages", max_pages}, std::pair{"--num-pages", num_pages}})
      if (given && *given <= 0) throw Error(std::string(flag) + " must be positive, got " + std::to_string(*given));
    d.max_pages = max_pages.value_or((rows + page_size - 1) / page_size);
    d.num_pages = num_pages.value_or(d.batch * d.max_pages);
    d.block_table = harness::shuffled_block_table(d.batch, d.max_pages, shared.seed);
  } else {
    if (max_pages || num_pages) throw Error("--max-pages and --num-pages need --page-size (a paged cache)");
    d.page_size = page_size;  // a negative one is refused by validate()
    d.cache_len = rows;
  }
  const bool choose = zero_splits_choose && num_splits == 0;
  if (choose) d.num_splits = 1;
  d.validate();
  if (choose) d.num_splits = 0;
  return d;
}

}  // namespace flashlab::cli
