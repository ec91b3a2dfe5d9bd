// The controls window: problem settings, Apply, navigation; and the keyboard.
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "flashlab/error.hpp"
#include "panel_widgets.hpp"
#include "panels.hpp"
#include "gpu_spec.hpp"

namespace flashlab::viz {

using tiled::Order;
using tiled::TileKind;

namespace {
const char* kOrders[] = {"fa1", "fa2", "bwd", "fa1-bwd", "bwd-dkdv", "bwd-dq"};
const char* kDtypes[] = {"fp16", "bf16", "fp32"};
}  // namespace

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
  ImGui::Checkbox("Q blocks from the end", &e.q_from_end);
  HelpMarker("Count Q blocks from the last row, so that where Br does not divide N the ragged block is the first. "
             "Under a causal mask the first block's walk is the shortest: its padded rows then cost the fewest "
             "tiles (flashlab's fa3 forward tiles so where Br > Bc).");
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
             "FA2 backward, K_j outer with dK_j, dV_j on chip; fa1-bwd: Algorithm 4; bwd-dkdv and bwd-dq: the "
             "deterministic backward's two passes (dK_j, dV_j without dQ; then Q_i outer, dQ_i summed on chip).");
  ImGui::Checkbox("compare FA1 | FA2", &e.compare);
  HelpMarker("Walk the other loop order of the same pass side by side, step for step (bwd-dkdv beside bwd-dq).");
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

}  // namespace flashlab::viz
