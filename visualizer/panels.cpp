// [SECTION] index
//   helpers      HelpMarker, number and byte formatting, colours, heatmaps (textures: heatmap.cpp)
//   controls     problem settings, navigation, keyboard
//   tile grid    pending / in SRAM / done / skipped, drawn as O(Tr + Tc) rectangles
//   tile values  S_ij, O_i before and after (backward: P_ij, dS_ij)
//   row stats    m, l, alpha, LSE per query row
//   memory       bytes by tensor so far vs standard attention, SRAM budget
//   model        roofline and speedup vs seqlen from the simulator
#include "panels.hpp"

#include "flashlab/format.hpp"

#include <GLFW/glfw3.h>
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "flashlab/error.hpp"
#include "palette.hpp"

namespace flashlab::viz {

using tiled::Order;
using tiled::TileKind;

// ---------------------------------------------------------------------------
// [SECTION] helpers
// ---------------------------------------------------------------------------
namespace {

// The "(?)" of imgui_demo.cpp: a one-sentence explanation on hover.
void HelpMarker(const char* desc) {
  ImGui::SameLine();
  ImGui::TextDisabled("(?)");
  if (ImGui::IsItemHovered()) {
    ImGui::BeginTooltip();
    ImGui::PushTextWrapPos(ImGui::GetFontSize() * 32.0f);
    ImGui::TextUnformatted(desc);
    ImGui::PopTextWrapPos();
    ImGui::EndTooltip();
  }
}

ImU32 col(Rgb c, int a = 255) { return IM_COL32(c.r, c.g, c.b, a); }

// Numbers, bytes and times as people read them: flashlab/format.hpp (binary byte units everywhere).
std::string num(double x) { return format_number(x, 5); }
std::string bytes(double b) { return format_bytes(b); }
std::string seconds(double t) { return format_seconds(t); }

// A matrix as one texture inside `size` (heatmap.hpp: uploaded only when the
// step changes), with its value under the mouse read from the matrix itself.
// row0/col0 name the first row and column in the tooltip (sequence positions).
void Heatmap(const char* id, const tiled::Tile& m, HeatmapCache& heat, uint64_t version, ImVec2 size, int64_t row0,
             int64_t col0, const char* what) {
  ImGui::PushID(id);
  const ImVec2 p0 = ImGui::GetCursorScreenPos();
  const int64_t R = m.rows(), C = m.cols();
  if (R == 0 || C == 0) {
    ImGui::Dummy(size);
    ImGui::PopID();
    return;
  }
  HeatmapTexture& tex = heat[id];
  tex.update(m, version);
  tex.pos = p0, tex.size = size;
  ImGui::Image(tex.id(), size);
  ImGui::GetWindowDrawList()->AddRect(p0, ImVec2(p0.x + size.x, p0.y + size.y), IM_COL32(150, 150, 150, 255));
  if (ImGui::IsItemHovered()) {
    const float cw = size.x / C, ch = size.y / R;
    const ImVec2 mp = ImGui::GetIO().MousePos;
    const int64_t c = std::clamp<int64_t>(static_cast<int64_t>((mp.x - p0.x) / cw), 0, C - 1);
    const int64_t r = std::clamp<int64_t>(static_cast<int64_t>((mp.y - p0.y) / ch), 0, R - 1);
    ImGui::SetTooltip("%s[%lld, %lld] = %s\n(query row %lld, %s %lld)", id, (long long)r, (long long)c,
                      num(m(r, c)).c_str(), (long long)(row0 + r), what, (long long)(col0 + c));
  }
  ImGui::PopID();
}

const char* kOrders[] = {"fa1", "fa2", "bwd", "fa1-bwd"};
const char* kDtypes[] = {"fp16", "bf16", "fp32"};

}  // namespace

// ---------------------------------------------------------------------------
// [SECTION] controls
// ---------------------------------------------------------------------------
void App::apply() {
  try {
    auto next = std::make_unique<Session>(edit);
    session = std::move(next);
    error.clear();
  } catch (const Error& e) {
    error = e.what();
  }
}

void ShowControls(App& app) {
  Settings& e = app.edit;
  ImGui::Begin("Controls");
  ImGui::TextUnformatted("Problem (one head is walked)");
  ImGui::SetNextItemWidth(120);
  ImGui::InputScalar("seqlen N", ImGuiDataType_S64, &e.seqlen);
  HelpMarker("Sequence length of queries and keys; the grid has ceil(N/Br) x ceil(N/Bc) tiles.");
  ImGui::SetNextItemWidth(120);
  ImGui::InputScalar("head dim d", ImGuiDataType_S64, &e.hdim);
  HelpMarker("Length of each query, key and value vector.");
  ImGui::SetNextItemWidth(120);
  ImGui::InputScalar("Br", ImGuiDataType_S64, &e.br);
  HelpMarker("Query rows per tile: Q_i holds Br rows of Q.");
  ImGui::SetNextItemWidth(120);
  ImGui::InputScalar("Bc", ImGuiDataType_S64, &e.bc);
  HelpMarker("Key rows per tile: K_j and V_j hold Bc rows of K and V.");
  if (ImGui::Button("Br, Bc from GPU SRAM")) {
    try {
      const sim::GpuSpec g = sim::load_gpu(e.gpu);
      const int64_t elems = static_cast<int64_t>(g.sram_per_sm_bytes) / bytes_per_element(parse_dtype(e.dtype));
      const tiled::Tiling t = tiled::Tiling::from_sram(elems, e.hdim);
      e.br = t.Br, e.bc = t.Bc;
    } catch (const Error& err) {
      app.error = err.what();
    }
  }
  HelpMarker("Algorithm 1 of FlashAttention: Bc = ceil(M/4d), Br = min(Bc, d) for the preset's on-chip memory M.");
  ImGui::Checkbox("causal", &e.causal);
  HelpMarker("Row i sees keys 0..i only; tiles above the diagonal are skipped without loading K_j, V_j.");
  ImGui::SetNextItemWidth(120);
  ImGui::InputScalar("window left", ImGuiDataType_S64, &e.window_left);
  HelpMarker("Sliding window: row i sees keys from i - left on (-1: unbounded); tiles outside the band are skipped.");
  ImGui::SetNextItemWidth(120);
  ImGui::InputScalar("window right", ImGuiDataType_S64, &e.window_right);
  HelpMarker("Row i sees keys up to i + right (-1: unbounded; causal is 0).");
  int order = static_cast<int>(std::find(std::begin(kOrders), std::end(kOrders), e.order) - std::begin(kOrders));
  ImGui::SetNextItemWidth(120);
  if (ImGui::Combo("order", &order, kOrders, IM_ARRAYSIZE(kOrders))) e.order = kOrders[order];
  HelpMarker("fa1: K_j outer, Q_i inner (O_i re-read every step); fa2: Q_i outer (O_i stays on chip); bwd: the "
             "FA2 backward, K_j outer with dK_j, dV_j on chip; fa1-bwd: Algorithm 4.");
  ImGui::Checkbox("compare FA1 | FA2", &e.compare);
  HelpMarker("Walk the other loop order of the same pass side by side, step for step.");
  int dt = static_cast<int>(std::find(std::begin(kDtypes), std::end(kDtypes), e.dtype) - std::begin(kDtypes));
  ImGui::SetNextItemWidth(120);
  if (ImGui::Combo("dtype", &dt, kDtypes, IM_ARRAYSIZE(kDtypes))) e.dtype = kDtypes[dt];
  HelpMarker("Storage type of Q, K, V, O in HBM: sets the bytes per element and the GPU's tensor-core peak.");
  static const std::vector<std::string> presets = [] {
    try {
      return sim::list_presets();
    } catch (const Error&) {
      return std::vector<std::string>{};
    }
  }();
  ImGui::SetNextItemWidth(120);
  if (ImGui::BeginCombo("GPU", e.gpu.c_str())) {
    for (const std::string& name : presets)
      if (ImGui::Selectable(name.c_str(), name == e.gpu)) e.gpu = name;
    ImGui::EndCombo();
  }
  HelpMarker("Hardware preset (presets/*.json) for the simulator's bytes, time and SRAM size.");
  ImGui::SetNextItemWidth(120);
  ImGui::InputScalar("seed", ImGuiDataType_U64, &e.seed);
  HelpMarker("Seed of the random Q, K, V (and dO): same seed, same numbers.");
  ImGui::Checkbox("skip masked tiles", &e.skip_masked);
  HelpMarker("A step goes to the next tile with visible elements, as a GPU kernel's loop bounds do; off: every "
             "tile of the schedule is a step.");
  ImGui::SetNextItemWidth(120);
  ImGui::InputScalar("model batch", ImGuiDataType_S64, &e.model_batch);
  HelpMarker("Batch size the simulator models (the walk shows batch 0, head 0).");
  ImGui::SetNextItemWidth(120);
  ImGui::InputScalar("model heads", ImGuiDataType_S64, &e.model_heads);
  HelpMarker("Heads the simulator models: with batch, how many CTAs fill the GPU.");
  if (ImGui::Button("Apply (R)", ImVec2(120, 0))) app.apply();
  HelpMarker("Rebuild the walk from these settings and go back to step 0.");
  if (!app.error.empty()) {
    ImGui::PushTextWrapPos(0);
    ImGui::TextColored(ImVec4(1, 0.4f, 0.4f, 1), "%s", app.error.c_str());
    ImGui::PopTextWrapPos();
  }

  ImGui::Separator();
  if (app.session) {
    Session& s = *app.session;
    ImGui::TextUnformatted("Walk");
    if (ImGui::Button("|<")) s.jump(0);
    ImGui::SameLine();
    if (ImGui::Button("<")) s.back();
    ImGui::SameLine();
    if (ImGui::Button(s.playing ? "pause" : "play", ImVec2(50, 0))) s.playing = !s.playing;
    ImGui::SameLine();
    if (ImGui::Button(">")) s.step();
    ImGui::SameLine();
    if (ImGui::Button(">|")) s.jump(s.steps());
    float speed = static_cast<float>(s.speed);
    ImGui::SetNextItemWidth(160);
    if (ImGui::SliderFloat("tiles/s", &speed, 1, 20000, "%.0f", ImGuiSliderFlags_Logarithmic)) s.speed = speed;
    HelpMarker("Play speed; each tile is one Stepper step (O(Br Bc d) work), at most 10 ms of them per frame.");
    ImGui::SetNextItemWidth(120);
    ImGui::InputScalar("##jump", ImGuiDataType_S64, &app.jump_to);
    ImGui::SameLine();
    if (ImGui::Button("jump to step")) s.jump(app.jump_to);
    HelpMarker("Go to the state after this many schedule steps (masked tiles count); far jumps run over frames.");
    const float frac = s.steps() ? static_cast<float>(s.position()) / s.steps() : 0;
    char label[96];
    std::snprintf(label, sizeof label, "%lld / %lld", (long long)s.position(), (long long)s.steps());
    ImGui::ProgressBar(frac, ImVec2(-1, 0), label);
    if (s.seeking()) ImGui::Text("moving to step %lld ...", (long long)s.target());
    ImGui::TextDisabled("space: play/pause   <- ->: step");
    ImGui::TextDisabled("R: apply settings, restart");
    ImGui::TextDisabled("model: %s of CPU time", seconds(s.estimate_seconds()).c_str());
    ImGui::TextDisabled("%.0f frames/s", ImGui::GetIO().Framerate);
  }
  ImGui::End();
}

void HandleKeys(Session& s) {
  const ImGuiIO& io = ImGui::GetIO();
  if (io.WantTextInput) return;
  if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Space), false)) s.playing = !s.playing;
  if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_RightArrow))) s.step();
  if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_LeftArrow))) s.back();
}

// ---------------------------------------------------------------------------
// [SECTION] tile grid
// ---------------------------------------------------------------------------
namespace {

// One walk's Tr x Tc grid. The state of tile (i, j) follows from its mask class
// and its place in the order relative to the current step, so each outer line
// (a Q row block for fa2, a K/V column block otherwise) is at most five
// rectangles: O(Tr + Tc) per frame whatever the number of tiles, and no more
// lines than the grid has pixels across.
void DrawGrid(Walk& w, ImVec2 avail) {
  const tiled::Stepper& st = *w.stepper;
  const tiled::Schedule& s = st.schedule();
  const int64_t Tr = s.Tr(), Tc = s.Tc();
  const bool q_outer = s.q_outer();  // which axis the walk's outer loop takes: the Schedule says
  const float margin = 28;  // room for the axis labels
  const float cell = std::max(0.05f, std::min((avail.x - margin) / Tc, (avail.y - margin) / Tr));
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const ImVec2 p0(origin.x + margin, origin.y + margin);
  ImGui::InvisibleButton("grid", ImVec2(margin + cell * Tc, margin + cell * Tr));
  const bool hovered = ImGui::IsItemHovered();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  w.grid = {true, p0.x, p0.y, cell, cell};

  const int64_t pos = st.position();
  const bool started = pos > 0;
  const tiled::TileStep cur = started ? s.step(pos - 1) : tiled::TileStep{};
  const int64_t co = started ? (q_outer ? cur.i : cur.j) : -1;  // current outer line
  const int64_t ci = started ? (q_outer ? cur.j : cur.i) : -1;  // current place in it
  const int64_t outer = s.outer_blocks(), inner = s.inner_blocks();

  // Lines [o0, o1) from a to z along the line, in colour c.
  auto rect = [&](int64_t o0, int64_t o1, int64_t a, int64_t z, Rgb c) {
    if (a >= z) return;
    const ImVec2 lo = q_outer ? ImVec2(p0.x + a * cell, p0.y + o0 * cell) : ImVec2(p0.x + o0 * cell, p0.y + a * cell);
    const ImVec2 hi = q_outer ? ImVec2(p0.x + z * cell, p0.y + o1 * cell) : ImVec2(p0.x + o1 * cell, p0.y + z * cell);
    dl->AddRectFilled(lo, hi, col(c));
  };
  // A line is three ranges, visible [b, e) between masked ones, each split where
  // the walk is (before it "done", after it "pending"): (b, e, split) says it all.
  struct Line {
    int64_t b, e, split;
    bool operator==(const Line&) const = default;
  };
  auto line_at = [&](int64_t o) {
    const auto [b, end] = s.visible(o);
    const int64_t e = std::max(b, end);
    return Line{b, e, o < co ? inner : (o == co ? ci + 1 : 0)};
  };
  auto range = [&](int64_t o0, int64_t o1, int64_t a, int64_t z, int64_t split, Rgb done, Rgb pending) {
    rect(o0, o1, a, std::min(z, split), done);
    rect(o0, o1, std::max(a, split), z, pending);
  };
  // A pixel takes the colour of the line holding its centre, so below one pixel
  // per cell only those lines are looked at (at most one per pixel row), and a
  // run of lines that look the same is one set of rectangles: a causal 1024 x
  // 1024 grid is ~3 rectangles per pixel row, a full one 4 in all.
  const float P = q_outer ? p0.y : p0.x;                   // where line 0 starts on screen
  auto next_line = [&](int64_t o) {                        // the first line after o holding a pixel centre
    const float centre = std::ceil(P + (o + 1) * cell - 0.5f) + 0.5f;
    return std::max(o + 1, static_cast<int64_t>(std::floor((centre - P) / cell)));
  };
  for (int64_t o = 0; o < outer;) {
    const Line l = line_at(o);
    int64_t end = next_line(o);
    while (end < outer && line_at(end) == l) end = next_line(end);
    end = std::min(end, outer);
    range(o, end, 0, l.b, l.split, kSkippedDone, kSkipped);
    range(o, end, l.b, l.e, l.split, kDone, kPending);
    range(o, end, l.e, inner, l.split, kSkippedDone, kSkipped);
    o = end;
  }
  // Tile borders where they are wide enough to see.
  if (cell >= 6) {
    const ImU32 line = IM_COL32(15, 15, 18, 255);
    for (int64_t j = 0; j <= Tc; ++j) dl->AddLine(ImVec2(p0.x + j * cell, p0.y), ImVec2(p0.x + j * cell, p0.y + Tr * cell), line);
    for (int64_t i = 0; i <= Tr; ++i) dl->AddLine(ImVec2(p0.x, p0.y + i * cell), ImVec2(p0.x + Tc * cell, p0.y + i * cell), line);
  }
  // The resident line (Q_i, O_i, m_i, l_i for fa2; K_j, V_j (and dK_j, dV_j) otherwise) and the current tile.
  if (started) {
    const float t = std::max(2.0f, std::min(4.0f, cell / 6));
    if (q_outer)
      dl->AddRect(ImVec2(p0.x - t / 2, p0.y + co * cell - t / 2),
                  ImVec2(p0.x + Tc * cell + t / 2, p0.y + (co + 1) * cell + t / 2), col(kResident), 0, 0, t);
    else
      dl->AddRect(ImVec2(p0.x + co * cell - t / 2, p0.y - t / 2),
                  ImVec2(p0.x + (co + 1) * cell + t / 2, p0.y + Tr * cell + t / 2), col(kResident), 0, 0, t);
    const float grow = std::max(0.0f, (5 - cell) / 2);  // a tile stays at least 5 px wide
    dl->AddRectFilled(ImVec2(p0.x + cur.j * cell - grow, p0.y + cur.i * cell - grow),
                      ImVec2(p0.x + (cur.j + 1) * cell + grow, p0.y + (cur.i + 1) * cell + grow),
                      col(cur.kind == TileKind::skipped ? kCurrentSkipped : kCurrent));
    // Axis marks for the current Q_i (left) and K_j (top).
    dl->AddRectFilled(ImVec2(p0.x - 8, p0.y + cur.i * cell), ImVec2(p0.x - 2, p0.y + (cur.i + 1) * cell + 1), col(kCurrent));
    dl->AddRectFilled(ImVec2(p0.x + cur.j * cell, p0.y - 8), ImVec2(p0.x + (cur.j + 1) * cell + 1, p0.y - 2), col(kCurrent));
  }
  dl->AddText(ImVec2(p0.x, origin.y), IM_COL32(200, 200, 200, 255), "K/V blocks j ->");
  dl->AddText(ImVec2(origin.x, p0.y + 4), IM_COL32(200, 200, 200, 255), "Q");
  dl->AddText(ImVec2(origin.x, p0.y + 18), IM_COL32(200, 200, 200, 255), "i");

  if (hovered) {
    const ImVec2 mp = ImGui::GetIO().MousePos;
    const int64_t j = static_cast<int64_t>((mp.x - p0.x) / cell), i = static_cast<int64_t>((mp.y - p0.y) / cell);
    if (i >= 0 && i < Tr && j >= 0 && j < Tc) {
      const int64_t k = s.step_of(i, j);
      const TileKind kind = s.classify(i, j);
      const char* state = k == pos - 1 ? "current (in SRAM)" : (k < pos - 1 ? "done" : "pending");
      ImGui::SetTooltip("tile (i=%lld, j=%lld): query rows %lld..%lld x keys %lld..%lld\n%s, step %lld of the "
                        "schedule, %s",
                        (long long)i, (long long)j, (long long)(i * s.tiling().Br),
                        (long long)(i * s.tiling().Br + s.q_rows(i) - 1), (long long)(j * s.tiling().Bc),
                        (long long)(j * s.tiling().Bc + s.kv_rows(j) - 1), tiled::to_string(kind).c_str(),
                        (long long)k, state);
    }
  }
}

void Legend(Rgb c, const char* label, const char* help) {
  const ImVec2 p = ImGui::GetCursorScreenPos();
  const float h = ImGui::GetTextLineHeight();
  ImGui::GetWindowDrawList()->AddRectFilled(p, ImVec2(p.x + h, p.y + h), col(c));
  ImGui::Dummy(ImVec2(h, h));
  ImGui::SameLine();
  ImGui::TextUnformatted(label);
  HelpMarker(help);
  ImGui::SameLine(0, 14);
}

}  // namespace

void ShowTileGrid(Session& s) {
  ImGui::Begin("Tile grid");
  const auto& walks = s.walks();
  const tiled::Schedule& sc = s.primary().stepper->schedule();
  ImGui::TextWrapped("Tr = %lld Q blocks x Tc = %lld K/V blocks (Br = %lld, Bc = %lld), %lld of %lld tiles masked",
              (long long)sc.Tr(), (long long)sc.Tc(), (long long)sc.tiling().Br, (long long)sc.tiling().Bc,
              (long long)sc.tiles_skipped(), (long long)sc.steps());
  Legend(kPending, "pending", "Not visited yet.");
  Legend(kCurrent, "current", "The tile in SRAM now: S_ij = Q_i K_j^T is computed from it.");
  Legend(kResident, "stays in SRAM", "The block kept on chip across the inner loop: Q_i, O_i, m_i, l_i in FA2; K_j, V_j (and dK_j, dV_j) in FA1 and the backward.");
  ImGui::NewLine();
  Legend(kDone, "done", "Visited: its contribution is in O_i (backward: in dK_j, dV_j and dQ_i).");
  Legend(kSkipped, "skipped", "Every element masked (causal or window): never loaded, never computed.");
  ImGui::NewLine();
  const float gap = 12;
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float each = (avail.x - gap * (walks.size() - 1)) / walks.size();
  for (size_t n = 0; n < walks.size(); ++n) {
    Walk& w = s.walks()[n];
    if (n) ImGui::SameLine(0, gap);
    ImGui::PushID(static_cast<int>(n));
    ImGui::BeginChild("walk", ImVec2(each, 0), false, ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse);
    const tiled::Stepper& st = *w.stepper;
    const TileView v = view_of(st);
    ImGui::Text("%s order", tiled::to_string(w.order).c_str());
    if (walks.size() == 1) ImGui::SameLine();
    if (v.valid)
      ImGui::Text("step %lld/%lld, tile (i=%lld, j=%lld) %s", (long long)st.position(),
                  (long long)st.schedule().steps(), (long long)v.step.i, (long long)v.step.j,
                  tiled::to_string(v.step.kind).c_str());
    else
      ImGui::Text(": before the first step");
    ImGui::Text("HBM: read %s, wrote %s", bytes(st.bytes().total_load()).c_str(),
                bytes(st.bytes().total_store()).c_str());
    HelpMarker("Bytes this head has moved between HBM and SRAM up to this step, prologue included.");
    DrawGrid(w, ImGui::GetContentRegionAvail());
    ImGui::EndChild();
    ImGui::PopID();
  }
  ImGui::End();
}

// ---------------------------------------------------------------------------
// [SECTION] tile values
// ---------------------------------------------------------------------------
void ShowTileValues(Session& s, HeatmapCache& heat) {
  ImGui::Begin("Tile values");
  const TileView v = view_of(*s.primary().stepper);
  if (!v.valid) {
    ImGui::TextUnformatted("Press -> (or space to play) to run the first tile.");
    ImGui::End();
    return;
  }
  if (v.step.kind == TileKind::skipped || !v.S) {
    ImGui::Text("Tile (%lld, %lld) is masked everywhere: skipped, nothing loaded.", (long long)v.step.i,
                (long long)v.step.j);
    ImGui::End();
    return;
  }
  const float w = (ImGui::GetContentRegionAvail().x - 16) / 3;
  const float h = std::min(w, ImGui::GetContentRegionAvail().y - 5 * ImGui::GetTextLineHeightWithSpacing());
  const bool bwd = tiled::is_backward(s.primary().order);
  const auto box = [&](const tiled::Tile* m, const char* name, const char* what, int64_t col0, const char* help) {
    ImGui::BeginGroup();
    ImGui::Text("%s (%lld x %lld)", name, m ? (long long)m->rows() : 0LL, m ? (long long)m->cols() : 0LL);
    HelpMarker(help);
    if (m)
      Heatmap(name, *m, heat, s.version(), ImVec2(w, h * m->rows() / std::max<float>(m->rows(), m->cols())),
              v.step.row0, col0, what);
    ImGui::EndGroup();
  };
  box(v.S, "S_ij", "key", v.step.col0,
      "The scores scale * Q_i K_j^T of this tile (after softcap, ALiBi and mask; masked = -inf, dark); hover a cell for its value.");
  ImGui::SameLine(0, 8);
  if (bwd) {
    box(v.P, "P_ij", "key", v.step.col0, "Probabilities recomputed from the forward's LSE: P = exp(S - LSE).");
    ImGui::SameLine(0, 8);
    box(v.dS, "dS_ij", "key", v.step.col0, "Gradient of the scores: dS = P o (dP - D), with dP = dO_i V_j^T and D = rowsum(dO o O).");
  } else {
    box(v.O_before, "O_i before", "dim", 0,
        s.primary().order == Order::fa2 ? "The accumulator before this tile (FA2: unnormalized, divided by l at the end)."
                                        : "O_i as read from HBM before this tile (FA1: kept normalized).");
    ImGui::SameLine(0, 8);
    box(v.O_after, "O_i after", "dim", 0, "O_i after the rescale by alpha and the add of P_ij V_j.");
  }
  std::string moved;
  for (const tiled::Transfer& t : v.transfers)
    moved += std::string(t.store ? "store " : "load ") + tiled::to_string(t.tensor) + " " + bytes(t.bytes) + ", ";
  if (!moved.empty()) moved.resize(moved.size() - 2);
  ImGui::TextWrapped("this step: %s", moved.empty() ? "no transfers (the blocks were already on chip)" : moved.c_str());
  HelpMarker("Loads (HBM -> SRAM) and stores (SRAM -> HBM) this tile step made, one head.");
  ImGui::End();
}

// ---------------------------------------------------------------------------
// [SECTION] row stats
// ---------------------------------------------------------------------------
void ShowRowStats(Session& s, HeatmapCache& heat) {
  ImGui::Begin("Row statistics");
  const Walk& w = s.primary();
  const TileView v = view_of(*w.stepper);
  if (v.valid && tiled::is_backward(w.order) && v.step.kind != TileKind::skipped) {
    // Backward: the accumulators of the resident K/V block and the rows' inputs from the forward.
    const tiled::Sram& m = w.stepper->sram();
    ImGui::Text("K/V block j=%lld accumulating on chip; Q block i=%lld adds its dQ_i to HBM", (long long)v.step.j,
                (long long)v.step.i);
    const float side = std::min((ImGui::GetContentRegionAvail().x - 8) / 2, ImGui::GetContentRegionAvail().y * 0.55f);
    const auto box = [&](const tiled::Tile& t, const char* name, const char* help) {
      ImGui::BeginGroup();
      ImGui::Text("%s (%lld x %lld)", name, (long long)t.rows(), (long long)t.cols());
      HelpMarker(help);
      Heatmap(name, t, heat, s.version(), ImVec2(side, side * t.rows() / std::max<float>(t.rows(), t.cols())), v.step.col0,
              0, "dim");
      ImGui::EndGroup();
    };
    box(m.dK, "dK_j", "dK_j += scale * dS_ij^T Q_i over the Q blocks so far; written to HBM once, after the last one.");
    ImGui::SameLine(0, 8);
    box(m.dV, "dV_j", "dV_j += P_ij^T dO_i over the Q blocks so far; written to HBM once, after the last one.");
    std::string lse, d;
    for (int64_t r = 0; r < std::min<int64_t>(4, m.lse.size()); ++r) lse += num(m.lse[r]) + " ", d += num(m.D[r]) + " ";
    ImGui::TextWrapped("LSE_i (from the forward) %s...   D_i = rowsum(dO o O) %s...", lse.c_str(), d.c_str());
    HelpMarker("P_ij = exp(S_ij - LSE_i) needs no running max; D_i enters dS = P o (dP - D).");
    ImGui::End();
    return;
  }
  if (!v.valid || !v.rows) {
    ImGui::TextWrapped("%s", !v.valid ? "Before the first step." : "A skipped tile changes no statistics.");
    ImGui::End();
    return;
  }
  const tiled::Schedule& sc = w.stepper->schedule();
  const bool last = v.step.j + 1 >= sc.kv_end(v.step.i);
  ImGui::Text("Q block i=%lld, rows %lld..%lld, after K/V block j=%lld%s", (long long)v.step.i, (long long)v.step.row0,
              (long long)(v.step.row0 + v.step.rows - 1), (long long)v.step.j,
              last ? ": the row block's last visible tile, LSE final" : "");
  ImGui::TextUnformatted("m");
  HelpMarker("Running row max of the scores: m_new = max(m_old, rowmax(S_ij)).");
  ImGui::SameLine(0, 16);
  ImGui::TextUnformatted("l");
  HelpMarker("Running softmax denominator: l_new = alpha * l_old + rowsum(exp(S_ij - m_new)).");
  ImGui::SameLine(0, 16);
  ImGui::TextUnformatted("alpha");
  HelpMarker("Rescale factor exp(m_old - m_new) applied to l and O_i; below 1 (highlighted) when this tile raised the max.");
  ImGui::SameLine(0, 16);
  ImGui::TextUnformatted("LSE");
  HelpMarker("Log-sum-exp m_new + log(l_new) so far; stored for the backward pass after the row's last visible tile.");
  const ImGuiTableFlags flags = ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY |
                                ImGuiTableFlags_SizingStretchSame;
  if (ImGui::BeginTable("rows", 7, flags)) {
    ImGui::TableSetupScrollFreeze(0, 1);
    for (const char* h : {"row", "m_old", "m_new", "alpha", "l_old", "l_new", "LSE"}) ImGui::TableSetupColumn(h);
    ImGui::TableHeadersRow();
    ImGuiListClipper clip;
    clip.Begin(static_cast<int>(v.rows->size()));
    while (clip.Step())
      for (int r = clip.DisplayStart; r < clip.DisplayEnd; ++r) {
        const tiled::RowStat& x = (*v.rows)[r];
        ImGui::TableNextRow();
        if (x.alpha < 1) ImGui::TableSetBgColor(ImGuiTableBgTarget_RowBg1, IM_COL32(120, 80, 20, 110));
        const double lse = x.m_new + std::log(static_cast<double>(x.l_new));
        const double cells[] = {double(x.row), x.m_old, x.m_new, x.alpha, x.l_old, x.l_new, lse};
        for (double c : cells) {
          ImGui::TableNextColumn();
          ImGui::TextUnformatted(num(c).c_str());
        }
      }
    ImGui::EndTable();
  }
  ImGui::End();
}

// ---------------------------------------------------------------------------
// [SECTION] memory
// ---------------------------------------------------------------------------
void ShowMemory(Session& s) {
  ImGui::Begin("Memory");
  const tiled::Stepper& st = *s.primary().stepper;
  const tiled::ByteCounts& b = st.bytes();
  const double frac = s.steps() ? double(st.position()) / s.steps() : 0;
  const tiled::NaiveBytes naive = tiled::naive_bytes(s.problem(), 0);
  const tiled::ByteCounts whole = st.schedule().closed_form();
  const double bw = s.gpu().hbm_effective();
  ImGui::Text("HBM <-> SRAM, one head, %s order", tiled::to_string(s.primary().order).c_str());
  HelpMarker("Every load (HBM -> SRAM) and store (SRAM -> HBM) the walk has made, by tensor; on a GPU they pass through L2.");
  if (ImGui::BeginTable("bytes", 3, ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingStretchSame)) {
    ImGui::TableSetupColumn("tensor");
    ImGui::TableSetupColumn("read so far");
    ImGui::TableSetupColumn("written so far");
    ImGui::TableHeadersRow();
    for (int t = 0; t < tiled::kTensorCount; ++t) {
      if (!whole.load[t] && !whole.store[t] && !b.load[t] && !b.store[t]) continue;
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(tiled::to_string(static_cast<tiled::TensorId>(t)).c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(bytes(b.load[t]).c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(bytes(b.store[t]).c_str());
    }
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::TextUnformatted("total");
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(bytes(b.total_load()).c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(bytes(b.total_store()).c_str());
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::TextUnformatted("standard");
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(bytes(naive.read * frac).c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(bytes(naive.write * frac).c_str());
    ImGui::EndTable();
  }
  HelpMarker("standard: attention that writes S and P to HBM (Algorithm 0), prorated by the share of steps done.");
  const double so_far = double(b.total_load() + b.total_store());
  ImGui::TextWrapped("whole pass: tiled %s, standard %s (standard / tiled = %.2f)", bytes(whole.total_load() + whole.total_store()).c_str(),
              bytes(naive.read + naive.write).c_str(),
              double(naive.read + naive.write) / std::max<double>(1, whole.total_load() + whole.total_store()));
  ImGui::TextWrapped("at %s's %.2f TB/s: so far %s, standard %s", s.gpu().name.c_str(), bw / 1e12,
              seconds(so_far / bw).c_str(), seconds((naive.read + naive.write) * frac / bw).c_str());
  HelpMarker("Time these bytes take at the preset's achievable HBM bandwidth (one head, no overlap).");

  ImGui::Separator();
  const std::vector<SramItem> items = sram_footprint(st);
  int64_t used = 0;
  for (const SramItem& i : items) used += i.bytes;
  const double budget = s.gpu().smem_per_block_bytes;
  ImGui::TextWrapped("SRAM: %s of %s shared memory per block (%.0f%%)", bytes(used).c_str(), bytes(budget).c_str(),
              100.0 * used / budget);
  HelpMarker("The executor's on-chip tiles (fp32) against the preset's shared memory per thread block; over 100% would not fit.");
  const ImVec2 p = ImGui::GetCursorScreenPos();
  const float W = ImGui::GetContentRegionAvail().x, H = 22;
  ImGui::Dummy(ImVec2(W, H));
  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->AddRectFilled(p, ImVec2(p.x + W, p.y + H), IM_COL32(40, 40, 46, 255));
  const ImU32 colours[] = {IM_COL32(230, 120, 60, 255), IM_COL32(80, 160, 220, 255), IM_COL32(90, 200, 140, 255),
                           IM_COL32(200, 90, 200, 255), IM_COL32(230, 200, 70, 255), IM_COL32(160, 160, 160, 255)};
  float x = p.x;
  for (size_t n = 0; n < items.size(); ++n) {
    const float ww = static_cast<float>(W * items[n].bytes / std::max(budget, double(used)));
    dl->AddRectFilled(ImVec2(x, p.y), ImVec2(x + ww, p.y + H), colours[n % 6]);
    if (ww > ImGui::CalcTextSize(items[n].name.c_str()).x + 4)
      dl->AddText(ImVec2(x + 2, p.y + 4), IM_COL32(0, 0, 0, 255), items[n].name.c_str());
    x += ww;
  }
  for (size_t n = 0; n < items.size(); ++n) {
    if (n % 4) ImGui::SameLine();
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colours[n % 6]), "%s %s", items[n].name.c_str(),
                       bytes(items[n].bytes).c_str());
  }
  ImGui::End();
}

// ---------------------------------------------------------------------------
// [SECTION] model
// ---------------------------------------------------------------------------
namespace {

const ImU32 kAlgoColour[] = {IM_COL32(220, 80, 80, 255), IM_COL32(240, 190, 60, 255), IM_COL32(80, 180, 240, 255),
                             IM_COL32(120, 220, 120, 255)};  // standard, fa1, fa2, fa3

// Roofline: achieved FLOP/s against arithmetic intensity (FLOPs per HBM byte), log-log.
void Roofline(const Session& s, ImVec2 size) {
  const ImVec2 p = ImGui::GetCursorScreenPos();
  ImGui::Dummy(size);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const double peak = s.gpu().tensor_peak(s.problem().dtype), bw = s.gpu().hbm_effective();
  const double x_lo = 1, x_hi = 1e5, y_lo = peak / 1e3, y_hi = peak * 2;
  const float L = 44, B = 18;  // axis margins
  auto px = [&](double ai) { return p.x + L + float((std::log10(ai) - std::log10(x_lo)) / (std::log10(x_hi) - std::log10(x_lo))) * (size.x - L - 4); };
  auto py = [&](double f) { return p.y + size.y - B - float((std::log10(f) - std::log10(y_lo)) / (std::log10(y_hi) - std::log10(y_lo))) * (size.y - B - 4); };
  dl->AddRectFilled(p, ImVec2(p.x + size.x, p.y + size.y), IM_COL32(28, 28, 34, 255));
  const double ridge = peak / bw;
  dl->AddLine(ImVec2(px(x_lo), py(std::max(y_lo, x_lo * bw))), ImVec2(px(ridge), py(peak)), IM_COL32(200, 200, 200, 255), 2);
  dl->AddLine(ImVec2(px(ridge), py(peak)), ImVec2(px(x_hi), py(peak)), IM_COL32(200, 200, 200, 255), 2);
  char t[64];
  std::snprintf(t, sizeof t, "%.0f TFLOP/s", peak / 1e12);
  dl->AddText(ImVec2(p.x + 2, py(peak) - 7), IM_COL32(180, 180, 180, 255), t);
  std::snprintf(t, sizeof t, "%.0f", y_lo / 1e12);
  dl->AddText(ImVec2(p.x + 2, py(y_lo) - 14), IM_COL32(180, 180, 180, 255), t);
  for (double ai : {1.0, 10.0, 100.0, 1000.0, 10000.0}) {
    std::snprintf(t, sizeof t, "%g", ai);
    dl->AddText(ImVec2(px(ai) - 4, p.y + size.y - B + 2), IM_COL32(150, 150, 150, 255), t);
  }
  dl->AddText(ImVec2(px(x_lo) + 4, p.y + 4), IM_COL32(150, 150, 150, 255), "FLOP/s vs FLOP per HBM byte");
  const auto& es = s.estimates();
  for (size_t n = 0; n < es.size(); ++n) {
    const sim::Estimate& e = es[n];
    const double hbm = e.hbm_read_bytes + e.hbm_write_bytes;
    if (hbm <= 0 || e.time_s <= 0) continue;
    const double ai = std::clamp(e.flops / hbm, x_lo, x_hi), f = std::clamp(e.flops / e.time_s, y_lo, y_hi);
    dl->AddCircleFilled(ImVec2(px(ai), py(f)), 5, kAlgoColour[n % 4]);
    const ImVec2 offset[] = {{8, -7}, {-30, 2}, {8, -2}, {8, -16}};  // keeps fa2 and fa3 (same bytes) apart
    dl->AddText(ImVec2(px(ai) + offset[n % 4].x, py(f) + offset[n % 4].y), kAlgoColour[n % 4], e.algo.c_str());
  }
}

// Speedup over standard attention against seqlen (log2 axis), one line per algorithm.
void SpeedupCurve(const Session& s, ImVec2 size) {
  const auto& c = s.speedup_curve();
  const ImVec2 p = ImGui::GetCursorScreenPos();
  ImGui::Dummy(size);
  if (c.size() < 2) return;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  double ymax = 1;
  for (const auto& q : c) ymax = std::max({ymax, q.speedup_fa1, q.speedup_fa2, q.speedup_fa3});
  ymax *= 1.1;
  const float L = 30, B = 18;
  const double x0 = std::log2(double(c.front().seqlen)), x1 = std::log2(double(c.back().seqlen));
  auto px = [&](double n) { return p.x + L + float((std::log2(n) - x0) / (x1 - x0)) * (size.x - L - 6); };
  auto py = [&](double y) { return p.y + size.y - B - float(y / ymax) * (size.y - B - 4); };
  dl->AddRectFilled(p, ImVec2(p.x + size.x, p.y + size.y), IM_COL32(28, 28, 34, 255));
  dl->AddLine(ImVec2(px(double(c.front().seqlen)), py(1)), ImVec2(px(double(c.back().seqlen)), py(1)), IM_COL32(220, 80, 80, 160));
  char t[32];
  for (double y = 0; y <= ymax; y += ymax > 12 ? 5 : (ymax > 6 ? 2 : 1)) {
    std::snprintf(t, sizeof t, "%gx", y);
    dl->AddText(ImVec2(p.x + 2, py(y) - 7), IM_COL32(150, 150, 150, 255), t);
  }
  for (size_t n = 0; n < c.size(); n += 2) {
    std::snprintf(t, sizeof t, c[n].seqlen >= 1024 ? "%lldk" : "%lld",
                  (long long)(c[n].seqlen >= 1024 ? c[n].seqlen / 1024 : c[n].seqlen));
    dl->AddText(ImVec2(std::min(px(double(c[n].seqlen)) - 8, p.x + size.x - ImGui::CalcTextSize(t).x - 2),
                       p.y + size.y - B + 2), IM_COL32(150, 150, 150, 255), t);
  }
  for (int a = 1; a <= 3; ++a) {
    std::vector<ImVec2> pts;
    for (const auto& q : c) {
      const double y = a == 1 ? q.speedup_fa1 : (a == 2 ? q.speedup_fa2 : q.speedup_fa3);
      pts.push_back(ImVec2(px(double(q.seqlen)), py(y)));
    }
    dl->AddPolyline(pts.data(), static_cast<int>(pts.size()), kAlgoColour[a], 0, 2);
  }
  const double n = double(s.problem().seqlen_q);
  if (n >= c.front().seqlen && n <= c.back().seqlen)
    dl->AddLine(ImVec2(px(n), p.y), ImVec2(px(n), p.y + size.y - B), IM_COL32(255, 255, 255, 120));
}

}  // namespace

void ShowModel(Session& s) {
  ImGui::Begin("GPU model");
  const Problem& p = s.problem();
  ImGui::TextWrapped("%s, batch %lld x heads %lld, N=%lld, d=%lld, %s, %s pass", s.gpu().name.c_str(),
                     (long long)s.settings().model_batch, (long long)s.settings().model_heads, (long long)p.seqlen_q,
                     (long long)p.head_dim, std::string(to_string(p.dtype)).c_str(),
                     tiled::is_backward(s.primary().order) ? "backward" : "forward");
  HelpMarker("The simulator's estimate for this problem on the preset GPU (simulator/README.md): FLOPs, HBM bytes after L2, time.");
  if (ImGui::BeginTable("est", 5, ImGuiTableFlags_Borders | ImGuiTableFlags_SizingStretchSame)) {
    for (const char* h : {"algo", "time", "HBM bytes", "bound", "speedup"}) ImGui::TableSetupColumn(h);
    ImGui::TableHeadersRow();
    for (size_t n = 0; n < s.estimates().size(); ++n) {
      const sim::Estimate& e = s.estimates()[n];
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(kAlgoColour[n % 4]), "%s", e.algo.c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(seconds(e.time_s).c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(bytes(e.hbm_read_bytes + e.hbm_write_bytes).c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(e.bound.c_str());
      ImGui::TableNextColumn();
      ImGui::Text("%.2fx", e.speedup_vs_standard);
    }
    ImGui::EndTable();
  }
  DrawL2Residency(s);
  const float W = ImGui::GetContentRegionAvail().x;
  const float H = (ImGui::GetContentRegionAvail().y - 2 * ImGui::GetTextLineHeightWithSpacing()) / 2;
  ImGui::TextUnformatted("roofline");
  HelpMarker("Each point is one algorithm; under the slanted roof it is limited by HBM bandwidth, under the flat one by tensor cores.");
  Roofline(s, ImVec2(W, H));
  ImGui::TextUnformatted("speedup over standard vs seqlen:");
  for (int a = 1; a <= 3; ++a) {
    ImGui::SameLine();
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(kAlgoColour[a]), "%s", a == 1 ? "fa1" : (a == 2 ? "fa2" : "fa3"));
  }
  HelpMarker("Modelled time of standard attention divided by each algorithm's, for these settings at each sequence length; the vertical line is the current N.");
  SpeedupCurve(s, ImVec2(W, H));
  ImGui::End();
}

}  // namespace flashlab::viz
