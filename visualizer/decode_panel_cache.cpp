// The KV cache window of --decode: (1) the physical pages, each filled with its
// entry's colour up to the rows cached and white for the rows this call appends;
// (2) the block table, logical page -> physical page per entry; (3) the keys of
// the walked entry in key blocks of Bc, coloured by the split (CTA) that walks
// them, the current block orange. Pages the current block reads are outlined orange.
#include <algorithm>
#include <cstdio>

#include "decode_palette.hpp"
#include "decode_panels.hpp"
#include "panel_widgets.hpp"

namespace flashlab::viz {
namespace {

const ImU32 kText = IM_COL32(230, 230, 230, 255);

// The rows of a page (or contiguous entry) of `rows` rows whose logical rows start at `first`:
// cached [.., cached_end), appended [cached_end, seq_end), unused after.
void DrawRows(ImDrawList* dl, ImVec2 p0, ImVec2 p1, int64_t first, int64_t rows, int64_t cached_end, int64_t seq_end,
              Rgb owner) {
  const float h = p1.y - p0.y;
  auto band = [&](int64_t a, int64_t b, Rgb c) {
    a = std::clamp(a - first, int64_t{0}, rows), b = std::clamp(b - first, int64_t{0}, rows);
    if (a < b) dl->AddRectFilled(ImVec2(p0.x, p0.y + h * a / rows), ImVec2(p1.x, p0.y + h * b / rows), col(c));
  };
  dl->AddRectFilled(p0, p1, col(kUnusedRow));
  band(first, cached_end, owner);
  band(cached_end, seq_end, kAppended);
}

void DrawPages(const DecodeSession& s, DecodePlacement& at, const std::vector<int64_t>& reading) {
  const DecodeProblem& d = s.problem();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const int64_t boxes = d.paged() ? d.num_pages : d.batch;
  const float avail = ImGui::GetContentRegionAvail().x;
  // The largest boxes (at most 72 px high) whose lines fit `budget`: the rest of the window keeps the block
  // table and the keys. Below 56 px wide the labels go (hover names the page).
  const float budget = std::max(90.0f, ImGui::GetContentRegionAvail().y - (d.paged() ? 130 + 20 * d.batch : 130));
  float w = 60, h = 72, gap = 8, label = 14;
  int64_t per_line = 1;
  for (; h > 3; h -= 1) {
    w = d.paged() ? h * 0.83f : std::min(160.0f, avail / boxes - 8);
    gap = h >= 20 ? 8.0f : 1.0f;
    label = w >= 56 ? 14.0f : 0.0f;
    per_line = std::max<int64_t>(1, static_cast<int64_t>((avail + gap) / (w + gap)));
    if (((boxes + per_line - 1) / per_line) * (h + gap + label) <= budget) break;
  }
  const ImVec2 o = ImGui::GetCursorScreenPos();
  for (int64_t p = 0; p < boxes; ++p) {
    const ImVec2 p0(o.x + (p % per_line) * (w + gap), o.y + (p / per_line) * (h + gap + label));
    const ImVec2 p1(p0.x + w, p0.y + h);
    const int64_t e = d.paged() ? s.owner_of_page(p) : p;
    char text[48];
    if (e < 0) {
      dl->AddRectFilled(p0, p1, col(kFreePage));
      std::snprintf(text, sizeof text, "P%lld free", (long long)p);
    } else {
      const int64_t rows = d.paged() ? d.page_size : d.cache_len;
      const int64_t first = d.paged() ? s.logical_page_of(p) * d.page_size : 0;
      DrawRows(dl, p0, p1, first, rows, d.cache_seqlens[e], d.seqlen_k(e), entry_colour(e));
      if (d.paged()) std::snprintf(text, sizeof text, "P%lld b%lld:%lld", (long long)p, (long long)e,
                                   (long long)s.logical_page_of(p));
      else std::snprintf(text, sizeof text, "entry %lld", (long long)e);
      at.j["pages"].push_back({{"page", p}, {"entry", e}, {"x0", p0.x}, {"y0", p0.y}, {"x1", p1.x}, {"y1", p1.y}});
    }
    const bool read = std::find(reading.begin(), reading.end(), d.paged() ? p : e) != reading.end() &&
                      (d.paged() || e == s.b());
    if (read || gap > 1) dl->AddRect(p0, p1, read ? col(kCurrent) : IM_COL32(110, 110, 120, 255), 0, 0, read ? 3.0f : 1.0f);
    if (label > 0) dl->AddText(ImVec2(p0.x, p1.y + 1), kText, text);
    if (ImGui::IsMouseHoveringRect(p0, p1)) {
      if (e < 0) ImGui::SetTooltip("physical page %lld: not mapped by any block table entry", (long long)p);
      else if (d.paged())
        ImGui::SetTooltip("physical page %lld = logical page %lld of entry %lld: keys %lld..%lld\n"
                          "entry %lld has %lld cached keys + %lld appended (white)",
                          (long long)p, (long long)s.logical_page_of(p), (long long)e,
                          (long long)(s.logical_page_of(p) * d.page_size),
                          (long long)((s.logical_page_of(p) + 1) * d.page_size - 1), (long long)e,
                          (long long)d.cache_seqlens[e], (long long)d.new_len);
      else ImGui::SetTooltip("entry %lld: %lld cached keys + %lld appended (white) of %lld rows", (long long)e,
                             (long long)d.cache_seqlens[e], (long long)d.new_len, (long long)d.cache_len);
    }
  }
  const int64_t lines = (boxes + per_line - 1) / per_line;
  ImGui::Dummy(ImVec2(avail, lines * (h + gap + label)));
}

void DrawBlockTable(const DecodeSession& s) {
  const DecodeProblem& d = s.problem();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float h = 18, w = std::min(34.0f, (ImGui::GetContentRegionAvail().x - 44) / d.max_pages - 2);
  const bool numbers = w >= 20;  // narrower cells name their physical page on hover only
  const ImVec2 o = ImGui::GetCursorScreenPos();
  for (int64_t e = 0; e < d.batch; ++e) {
    char label[32];
    std::snprintf(label, sizeof label, "b%lld%s", (long long)e, e == s.b() ? " *" : "");
    dl->AddText(ImVec2(o.x, o.y + e * (h + 2) + 2), kText, label);
    const int64_t used = (d.seqlen_k(e) + d.page_size - 1) / d.page_size;
    for (int64_t p = 0; p < d.max_pages; ++p) {
      const ImVec2 p0(o.x + 44 + p * (w + 2), o.y + e * (h + 2)), p1(p0.x + w, p0.y + h);
      const Rgb c = p < used ? entry_colour(e) : dimmed(entry_colour(e));
      dl->AddRectFilled(p0, p1, col(c));
      std::snprintf(label, sizeof label, "%lld", (long long)d.block_table[e * d.max_pages + p]);
      if (numbers) dl->AddText(ImVec2(p0.x + 4, p0.y + 2), kText, label);
      if (ImGui::IsMouseHoveringRect(p0, p1))
        ImGui::SetTooltip("block_table[%lld][%lld] = %lld: logical page %lld of entry %lld lives in physical page %lld%s",
                          (long long)e, (long long)p, (long long)d.block_table[e * d.max_pages + p], (long long)p,
                          (long long)e, (long long)d.block_table[e * d.max_pages + p],
                          p < used ? "" : " (beyond seqlen_k: never read)");
    }
  }
  ImGui::Dummy(ImVec2(44 + d.max_pages * (w + 2), d.batch * (h + 2)));
}

// The walked entry's keys 0 .. seqlen_k in Tc blocks of Bc, each coloured by its split; returns nothing,
// records the current block's rectangle.
void DrawKeyBlocks(const DecodeSession& s, DecodePlacement& at) {
  const DecodeProblem& d = s.problem();
  const tiled::SplitSchedule& sc = s.schedule();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const int64_t Tc = sc.tiles().Tc(), Bc = sc.tiles().tiling().Bc, sk = d.seqlen_k(s.b());
  const float avail = ImGui::GetContentRegionAvail().x, h = 56;
  const float w = std::max(2.0f, (avail - 4) / std::max<int64_t>(Tc, 1));
  const ImVec2 o(ImGui::GetCursorScreenPos().x, ImGui::GetCursorScreenPos().y + 16);
  const bool has = s.has_current();
  const tiled::SplitSchedule::Step cur = has ? s.current() : tiled::SplitSchedule::Step{};
  for (int64_t sp = 0; sp < sc.splits(); ++sp) {  // "split s: CTA s" above its range
    const auto r = sc.split_blocks(sp);
    if (r.begin == r.end) continue;
    const float x0 = o.x + r.begin * w, x1 = o.x + r.end * w;
    dl->AddLine(ImVec2(x0 + 1, o.y - 3), ImVec2(x1 - 1, o.y - 3), col(split_colour(sp)), 3);
    char label[64];
    std::snprintf(label, sizeof label, "split %lld (CTA %lld)", (long long)sp, (long long)sp);
    dl->AddText(ImVec2(x0 + 2, o.y - 17), col(split_colour(sp)), label);
  }
  for (int64_t j = 0; j < Tc; ++j) {
    const int64_t sp = std::min(j / sc.blocks_per_split(), sc.splits() - 1);
    const ImVec2 p0(o.x + j * w, o.y), p1(p0.x + w - (w > 6 ? 2 : 0), o.y + h);
    // Done: a tile step of this block (any Q block) has run; the current step's block is orange.
    const bool done = s.block_walked(j);
    const bool now = has && cur.kind == tiled::SplitSchedule::Kind::tile && cur.tile.j == j;
    dl->AddRectFilled(p0, p1, col(now ? kCurrent : done ? split_colour(sp) : dimmed(split_colour(sp))));
    // The appended keys of this block: a white bar under it.
    const int64_t a = std::max(j * Bc, d.cache_seqlens[s.b()]), b = std::min((j + 1) * Bc, sk);
    if (a < b)
      dl->AddRectFilled(ImVec2(p0.x + (p1.x - p0.x) * (a - j * Bc) / Bc, p1.y + 2),
                        ImVec2(p0.x + (p1.x - p0.x) * (b - j * Bc) / Bc, p1.y + 7), col(kAppended));
    if (d.paged() && w > 40) {  // the physical pages this block's keys live in (DecodeProblem::cache_row)
      std::string pages = "P";
      for (int64_t c = j * Bc, last = -1; c < std::min((j + 1) * Bc, sk); ++c) {
        const int64_t p = s.page_of(s.b(), c);
        if (p == last) continue;
        if (last >= 0) pages.push_back(',');
        pages.append(std::to_string(p));
        last = p;
      }
      dl->AddText(ImVec2(p0.x + 3, p1.y + 9), kText, pages.c_str());
    }
    if (now) at.j["current_block"] = {{"j", j}, {"x0", p0.x}, {"y0", p0.y}, {"x1", p1.x}, {"y1", p1.y}};
    if (w > 22) {
      char label[32];
      std::snprintf(label, sizeof label, "K%lld", (long long)j);
      dl->AddText(ImVec2(p0.x + 3, p0.y + 3), now ? IM_COL32(0, 0, 0, 255) : kText, label);
    }
    if (ImGui::IsMouseHoveringRect(p0, p1))
      ImGui::SetTooltip("K_%lld, V_%lld: keys %lld..%lld of entry %lld, walked by split %lld%s", (long long)j,
                        (long long)j, (long long)(j * Bc), (long long)(std::min((j + 1) * Bc, sk) - 1),
                        (long long)s.b(), (long long)sp, d.paged() ? "; pages from the block table" : "");
  }
  if (has && cur.kind == tiled::SplitSchedule::Kind::combine)
    dl->AddText(ImVec2(o.x, o.y + h + 24), col(kCurrent),
                "combine: each split's O^(s), LSE^(s) of this Q block read back and merged (table below)");
  ImGui::Dummy(ImVec2(avail, h + 40));
}

}  // namespace

void ShowDecodeCache(const DecodeSession& s, DecodePlacement& at) {
  const DecodeProblem& d = s.problem();
  at.j = nlohmann::json::object();
  ImGui::Begin("KV cache");
  // The pages (or contiguous entries) the current step's K_j, V_j rows come from: DecodeProblem::cache_row.
  std::vector<int64_t> reading;
  if (s.has_current() && s.current().kind == tiled::SplitSchedule::Kind::tile) {
    const tiled::TileStep t = s.current().tile;
    for (int64_t c = t.col0; c < t.col0 + t.cols; ++c) {
      const int64_t p = d.paged() ? s.page_of(s.b(), c) : s.b();
      if (std::find(reading.begin(), reading.end(), p) == reading.end()) reading.push_back(p);
    }
  }
  if (d.paged()) {
    ImGui::Text("Physical pages: %lld pages of %lld rows (K and V alike); label P<page> b<entry>:<logical page>", (long long)d.num_pages, (long long)d.page_size);
    HelpMarker("The cache tensors are (num_pages, page_size, heads_kv, d). Each box is one physical page, filled "
               "in its entry's colour up to the keys already cached; white rows are appended by this call "
               "(K_new, V_new at cache_seqlens); orange outline: the pages the current K_j, V_j is read from.");
  } else {
    ImGui::Text("Contiguous cache: %lld entries of %lld rows", (long long)d.batch, (long long)d.cache_len);
    HelpMarker("The cache tensors are (batch, cache_len, heads_kv, d): entry b's keys are rows b*cache_len + j. "
               "White rows are appended by this call; orange outline: the entry being read.");
  }
  DrawPages(s, at, reading);
  if (d.paged()) {
    ImGui::Text("Block table (batch x max_pages): logical page -> physical page");
    HelpMarker("block_table[b][p] names the physical page holding keys p*page_size .. (p+1)*page_size-1 of entry b; "
               "DecodeProblem::cache_row is this lookup. Dim cells lie beyond seqlen_k and are never read. "
               "* marks the walked entry.");
    DrawBlockTable(s);
  }
  ImGui::Spacing();
  ImGui::Text("Keys of entry %lld (seqlen_k = %lld cached + %lld appended) in blocks of Bc = %lld, by split",
              (long long)s.b(), (long long)d.cache_seqlens[s.b()], (long long)d.new_len,
              (long long)s.schedule().tiles().tiling().Bc);
  HelpMarker("Split-KV: the Tc key blocks are cut into num_splits ranges of ceil(Tc/num_splits) blocks; each range "
             "is walked by its own CTA (a separate thread block on the GPU), all at once. Bright: walked, dim: "
             "pending, orange: the current K_j, V_j. White bars: appended keys.");
  DrawKeyBlocks(s, at);
  ImGui::End();
}

}  // namespace flashlab::viz
