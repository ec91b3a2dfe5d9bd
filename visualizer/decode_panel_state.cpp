// --decode's number windows: the controls (problem, step, navigation), each
// split's partial state m^(s), l^(s) per packed query row, and the combine.
#include <cmath>
#include <cstdio>

#include "decode_palette.hpp"
#include "decode_panels.hpp"
#include "panel_widgets.hpp"

namespace flashlab::viz {
namespace {

using Kind = tiled::SplitSchedule::Kind;

std::string fmt(float x) {
  if (std::isinf(x)) return x < 0 ? "-inf" : "inf";
  char b[32];
  std::snprintf(b, sizeof b, "%.4f", x);
  return b;
}

// Row label: query head h, query i (the GPU packs the heads of one kv head into one tile's rows).
void RowLabel(const DecodeSession& s, int64_t r) {
  ImGui::Text("h%lld q%lld", (long long)s.head_of(r), (long long)s.query_of(r));
}

const char* kStateNames[] = {"pending", "walking", "done"};

}  // namespace

void ShowDecodeControls(DecodeSession& s) {
  const DecodeProblem& d = s.problem();
  ImGui::Begin("Decode");
  ImGui::TextWrapped("%s", d.describe().c_str());
  ImGui::Separator();
  ImGui::Text("Walked: entry b = %lld, kv head g = %lld", (long long)s.b(), (long long)s.g());
  HelpMarker("One batch entry's SplitSchedule is drawn; its query rows are the q_len queries of every query head "
             "sharing kv head g (GQA), as the GPU kernel packs them into one tile. --walk-batch, --walk-kv-head choose.");
  ImGui::Text("Query rows: q_len %lld x %lld heads = %lld", (long long)d.q_len, (long long)s.group(),
              (long long)s.rows());
  ImGui::Text("Key blocks Tc = %lld of Bc = %lld", (long long)s.schedule().tiles().Tc(),
              (long long)s.schedule().tiles().tiling().Bc);
  ImGui::Text("Splits: %lld of %lld blocks each", (long long)s.schedule().splits(),
              (long long)s.schedule().blocks_per_split());
  ImGui::Separator();
  ImGui::Text("Step %lld of %lld", (long long)s.position(), (long long)s.steps());
  HelpMarker("A step is one step of SplitSchedule: a tile (Q_i against one K_j, V_j of a split), an empty split "
             "(nothing visible: O^(s) = 0, LSE^(s) = -inf), or the combine of a Q block.");
  if (ImGui::Button("<")) s.back();
  ImGui::SameLine();
  if (ImGui::Button(s.playing ? "pause" : "play")) s.playing = !s.playing;
  ImGui::SameLine();
  if (ImGui::Button(">")) s.step();
  int64_t pos = s.position(), lo = 0, hi = s.steps();
  ImGui::SetNextItemWidth(-1);
  if (ImGui::SliderScalar("##pos", ImGuiDataType_S64, &pos, &lo, &hi)) s.jump(pos);
  if (!s.has_current()) {
    ImGui::TextWrapped("Before the first step: every split's CTA is about to load Q_i.");
  } else {
    const auto st = s.current();
    if (st.kind == Kind::tile)
      ImGui::TextColored(ImVec4(1, 0.67f, 0.12f, 1), "split %lld (CTA %lld): Q_%lld x K_%lld, keys %lld..%lld",
                         (long long)st.split, (long long)st.split, (long long)st.tile.i, (long long)st.tile.j,
                         (long long)st.tile.col0, (long long)(st.tile.col0 + st.tile.cols - 1));
    else if (st.kind == Kind::empty)
      ImGui::Text("split %lld sees no key of Q_%lld: writes O = 0, LSE = -inf", (long long)st.split,
                  (long long)st.tile.i);
    else
      ImGui::TextColored(ImVec4(1, 0.67f, 0.12f, 1), "combine of Q_%lld: the splits merged", (long long)st.tile.i);
  }
  ImGui::Separator();
  ImGui::TextWrapped("Keys: space play/pause, right/left one step");
  ImGui::Spacing();
  ImGui::TextUnformatted("Legend");
  auto swatch = [](Rgb c, const char* text) {
    const ImVec2 p = ImGui::GetCursorScreenPos();
    ImGui::GetWindowDrawList()->AddRectFilled(p, ImVec2(p.x + 14, p.y + 14), col(c));
    ImGui::Dummy(ImVec2(16, 14));
    ImGui::SameLine();
    ImGui::TextUnformatted(text);
  };
  for (int64_t e = 0; e < std::min<int64_t>(d.batch, kEntryCount); ++e)
    swatch(entry_colour(e), ("pages of entry " + std::to_string(e)).c_str());
  swatch(kAppended, "rows appended by this call");
  swatch(kUnusedRow, "rows beyond seqlen_k");
  swatch(kCurrent, "current K_j, V_j and its pages");
  ImGui::End();
}

void ShowDecodeSplits(const DecodeSession& s) {
  const tiled::SplitSchedule& sc = s.schedule();
  const int64_t S = sc.splits(), Bc = sc.tiles().tiling().Bc, sk = s.problem().seqlen_k(s.b());
  ImGui::Begin("Splits: partial state");
  ImGui::TextUnformatted("Each split's running m^(s), l^(s) per query row");
  HelpMarker("Within split s the CTA runs FA2's online softmax over its key blocks alone: m^(s) = running max of the "
             "scores, l^(s) = sum exp(S - m^(s)). At its last block it stores O^(s) = O~/l^(s) and "
             "LSE^(s) = m^(s) + log l^(s) (fp32 partials). Values are the executor's on_row_stats events.");
  // Up to three splits share the width; more scroll sideways at a readable column width.
  const ImGuiTableFlags fit = S > 3 ? ImGuiTableFlags_ScrollX | ImGuiTableFlags_SizingFixedSame : ImGuiTableFlags_SizingStretchSame;
  if (ImGui::BeginTable("splits", static_cast<int>(1 + 2 * S), ImGuiTableFlags_Borders | ImGuiTableFlags_ScrollY | fit)) {
    ImGui::TableSetupScrollFreeze(1, 2);
    ImGui::TableSetupColumn("row");
    for (int64_t sp = 0; sp < S; ++sp) {
      ImGui::TableSetupColumn(("m^(" + std::to_string(sp) + ")").c_str());
      ImGui::TableSetupColumn(("l^(" + std::to_string(sp) + ")").c_str());
    }
    ImGui::TableHeadersRow();
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::TextUnformatted("keys");
    for (int64_t sp = 0; sp < S; ++sp) {
      const auto r = sc.split_blocks(sp);
      ImGui::TableNextColumn();
      ImGui::TextColored(ImVec4(split_colour(sp).r / 255.f, split_colour(sp).g / 255.f, split_colour(sp).b / 255.f, 1),
                         "%lld..%lld", (long long)(r.begin * Bc), (long long)(std::min(r.end * Bc, sk) - 1));
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(kStateNames[static_cast<int>(s.split_state(sp))]);
    }
    for (int64_t r = 0; r < s.rows(); ++r) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      RowLabel(s, r);
      for (int64_t sp = 0; sp < S; ++sp) {
        const DecodeSession::RowState& x = s.state(sp, r);
        ImGui::TableNextColumn();
        if (s.split_state(sp) == DecodeSession::SplitState::walking)
          ImGui::TableSetBgColor(ImGuiTableBgTarget_CellBg, IM_COL32(90, 60, 10, 255));
        ImGui::TextUnformatted(!x.started ? "." : x.empty ? "-inf" : fmt(x.m).c_str());
        ImGui::TableNextColumn();
        if (s.split_state(sp) == DecodeSession::SplitState::walking)
          ImGui::TableSetBgColor(ImGuiTableBgTarget_CellBg, IM_COL32(90, 60, 10, 255));
        ImGui::TextUnformatted(!x.started ? "." : x.empty ? "0" : fmt(x.l).c_str());
      }
    }
    ImGui::EndTable();
  }
  ImGui::End();
}

void ShowDecodeCombine(const DecodeSession& s) {
  const int64_t S = s.schedule().splits();
  ImGui::Begin("Combine");
  if (!s.schedule().combines()) {
    ImGui::TextWrapped("num_splits = 1: the one split writes O and LSE itself; there is no combine.");
    ImGui::End();
    return;
  }
  ImGui::TextUnformatted("LSE = log sum_s exp(LSE^(s)),  O = sum_s w_s O^(s),  w_s = exp(LSE^(s) - LSE)");
  HelpMarker("The combine reads every split's partial LSE^(s) and O^(s) and merges them with the online-softmax "
             "rule. LSE^(s) are the executor's on_combine values, LSE its output; each weight is the share of the "
             "row's softmax mass its split's keys hold (the weights of a row sum to 1).");
  const ImGuiTableFlags fit = S > 3 ? ImGuiTableFlags_ScrollX | ImGuiTableFlags_SizingFixedSame : ImGuiTableFlags_SizingStretchSame;
  if (ImGui::BeginTable("combine", static_cast<int>(2 + 2 * S), ImGuiTableFlags_Borders | ImGuiTableFlags_ScrollY | fit)) {
    ImGui::TableSetupScrollFreeze(1, 1);
    ImGui::TableSetupColumn("row");
    for (int64_t sp = 0; sp < S; ++sp) {
      ImGui::TableSetupColumn(("LSE^(" + std::to_string(sp) + ")").c_str());
      ImGui::TableSetupColumn(("w_" + std::to_string(sp)).c_str());
    }
    ImGui::TableSetupColumn("LSE");
    ImGui::TableHeadersRow();
    for (int64_t r = 0; r < s.rows(); ++r) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      RowLabel(s, r);
      const bool done = s.combined(r);
      const tiled::Schedule& tiles = s.schedule().tiles();
      if (s.has_current() && s.current().kind == Kind::combine &&
          s.current().tile.i == tiles.tiling().q_block_of(s.query_of(r), tiles.seqlen_q()))
        ImGui::TableSetBgColor(ImGuiTableBgTarget_RowBg0, IM_COL32(90, 60, 10, 255));  // combined by this step
      for (int64_t sp = 0; sp < S; ++sp) {
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(done ? fmt(s.lse_split(sp, r)).c_str() : ".");
        ImGui::TableNextColumn();
        if (done) {
          const float w = s.weight(sp, r);  // a bar of the weight's share behind the number
          const ImVec2 p = ImGui::GetCursorScreenPos();
          const float width = ImGui::GetContentRegionAvail().x;
          const Rgb c = split_colour(sp);
          ImGui::GetWindowDrawList()->AddRectFilled(p, ImVec2(p.x + width * w, p.y + ImGui::GetTextLineHeight()),
                                                    col(c, 110));
          ImGui::TextUnformatted(fmt(w).c_str());
        } else {
          ImGui::TextUnformatted(".");
        }
      }
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(done ? fmt(s.lse(r)).c_str() : ".");
    }
    ImGui::EndTable();
  }
  ImGui::End();
}


}  // namespace flashlab::viz
