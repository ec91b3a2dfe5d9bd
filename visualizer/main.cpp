// flashlab-viz: step through FlashAttention's tiles in a window.
//
//   flashlab-viz --seqlen 4096 --hdim 64 --causal --order fa2
//   flashlab-viz --screenshot x.png --steps 12 --seqlen 1024 --hdim 64 --causal [--dump values.json]
//
// The main loop follows Dear ImGui's example_glfw_opengl3, in numbered phases:
//   1. poll input   2. keyboard   3. advance the walk (bounded time per frame)
//   4. lay out and draw the panels   5. render   6. headless: read back, write, exit   7. present
#include <CLI/CLI.hpp>
#include <Eigen/Core>
#include <GLFW/glfw3.h>
#include <imgui.h>
#include <imgui_impl_glfw.h>
#include <imgui_impl_opengl3.h>

#include <algorithm>
#include <cfloat>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <tuple>

#include "flashlab/error.hpp"
#include "decode_main.hpp"
#include "flashlab/problem_spec.hpp"
#include "panels.hpp"
#include "screenshot.hpp"
#include "window.hpp"

namespace {

using namespace flashlab::viz;

// A fixed dashboard layout for the display size: controls on the left, the
// grid and the row statistics in the middle, values, memory and model on the right.
void Layout(const char* name, float x, float y, float w, float h) {
  ImGui::SetNextWindowPos(ImVec2(x, y), ImGuiCond_Always);
  ImGui::SetNextWindowSize(ImVec2(w, h), ImGuiCond_Always);
  (void)name;
}

void DrawFrame(App& app, ImVec2 display) {
  const float W = display.x, H = display.y;
  const float left = 300, mid = std::max(520.0f, (W - left) * 0.45f), right = W - left - mid;
  const float top = H * 0.58f;
  Layout("Controls", 0, 0, left, H);
  ShowControls(app);
  if (!app.session) return;
  Session& s = *app.session;
  Layout("Tile grid", left, 0, mid, top);
  ShowTileGrid(s);
  Layout("Row statistics", left, top, mid, H - top);
  ShowRowStats(s, app.heatmaps);
  const float values_h = H * 0.36f;
  Layout("Tile values", left + mid, 0, right, values_h);
  ShowTileValues(s, app.heatmaps);
  Layout("Memory", left + mid, values_h, right * 0.5f, H - values_h);
  ShowMemory(s);
  Layout("GPU model", left + mid + right * 0.5f, values_h, right * 0.5f, H - values_h);
  ShowModel(s);
}

// --play-frames: each frame's wall time and the share of it each phase took,
// to say what dominates (the walk's tiles, ImGui's layout, or GL rendering).
class FrameClock {
 public:
  static constexpr const char* kPhases[] = {"input", "walk", "panels", "render", "present"};
  static constexpr int kCount = 5;
  void start() { t_ = std::chrono::steady_clock::now(); }
  void lap(int phase) {  // the time since the last lap (or start) belongs to `phase`
    const auto now = std::chrono::steady_clock::now();
    cur_[phase] += std::chrono::duration<double, std::milli>(now - t_).count();
    t_ = now;
  }
  void end_frame(bool keep) {
    double total = 0;
    for (int n = 0; n < kCount; ++n) {
      if (keep) phase_[n].push_back(cur_[n]);
      total += cur_[n];
      cur_[n] = 0;
    }
    if (keep) frame_.push_back(total);
  }
  size_t frames() const { return frame_.size(); }
  // "mean 1.0 ms, median ..." of the frames, then the median of each phase.
  std::string report() {
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v.empty() ? 0.0 : v[v.size() / 2];
    };
    std::vector<double> f = frame_;
    std::sort(f.begin(), f.end());
    double sum = 0;
    for (double x : f) sum += x;
    char b[256];
    std::snprintf(b, sizeof b, "mean %.2f ms, median %.2f ms, 95th %.2f ms, max %.2f ms (medians by phase:",
                  sum / f.size(), f[f.size() / 2], f[f.size() * 95 / 100], f.back());
    std::string out = b;
    for (int n = 0; n < kCount; ++n) {
      std::snprintf(b, sizeof b, " %s %.2f", kPhases[n], median(phase_[n]));
      out += b;
    }
    return out + " ms)";
  }

 private:
  std::chrono::steady_clock::time_point t_;
  double cur_[kCount] = {};
  std::vector<double> phase_[kCount], frame_;
};

}  // namespace

int main(int argc, char** argv) {
  if (wants_decode(argc, argv)) return decode_main(argc, argv);  // --decode: decode_main.cpp
  Settings set;
  std::string window, screenshot, dump;
  int64_t steps = 0;
  int width = 1600, height = 1000;
  int play_frames = 0;
  double speed = 8;
  CLI::App cli{"flashlab-viz: step through FlashAttention's tiles: the grid, S_ij, per-row m, l, alpha, the bytes "
               "moved and the GPU model.\nKeys: space play/pause, left/right step, R restart.\n"
               "Example: flashlab-viz --seqlen 1024 --hdim 64 --causal --order fa2"};
  cli.add_option("--seqlen", set.seqlen, "sequence length of queries and keys")->capture_default_str();
  cli.add_option("--hdim", set.hdim, "head dimension")->capture_default_str();
  cli.add_option("--br", set.br, "Br: query rows per tile")->capture_default_str();
  cli.add_option("--bc", set.bc, "Bc: key rows per tile")->capture_default_str();
  cli.add_flag("--q-from-end", set.q_from_end, "count Q blocks from the last row: a ragged block first");
  cli.add_flag("--causal", set.causal, "causal mask");
  cli.add_option("--window", window, "sliding window L,R (-1: unbounded side)");
  cli.add_option("--mask", set.mask, "mask function: none | prefix-lm | document | chunked | dense")->capture_default_str();
  cli.add_option("--prefix", set.prefix, "prefix-lm: prefix length");
  cli.add_option("--doc-lengths", set.doc_lengths, "document: lengths of the packed documents (300,700,24)");
  cli.add_option("--chunk", set.chunk, "chunked: keys per chunk");
  cli.add_option("--mask-file", set.mask_file, "dense: .npy of bool, (seqlen, seqlen)");
  cli.add_option("--order", set.order, "fa1 | fa2 | bwd | fa1-bwd | bwd-dkdv | bwd-dq")->capture_default_str();
  cli.add_option("--dtype", set.dtype, "fp16 | bf16 | fp32 (bytes per element, GPU peak)")->capture_default_str();
  cli.add_option("--gpu", set.gpu, "GPU preset for the model and the SRAM budget")->capture_default_str();
  cli.add_option("--seed", set.seed, "seed of the random inputs")->capture_default_str();
  cli.add_flag("--compare", set.compare, "walk FA1 and FA2 (or both backward orders) side by side");
  cli.add_flag("!--count-skipped", set.skip_masked, "a step also stops at masked tiles (default: only computed tiles)");
  cli.add_option("--model-batch", set.model_batch, "batch the simulator models")->capture_default_str();
  cli.add_option("--model-heads", set.model_heads, "heads the simulator models")->capture_default_str();
  cli.add_option("--steps", steps, "start after this many steps (computed tiles unless --count-skipped)");
  cli.add_option("--screenshot", screenshot, "render the state after --steps into this PNG and exit");
  cli.add_option("--dump", dump, "write the values the panels show (JSON) and exit");
  cli.add_option("--speed", speed, "play speed in tiles per second")->capture_default_str();
  cli.add_option("--play-frames", play_frames,
                 "play for this many frames (no vsync), print the frame times and tiles stepped, exit");
  cli.add_option("--width", width, "window width in pixels")->capture_default_str()->check(CLI::Range(1280, 8192));
  cli.add_option("--height", height, "window height in pixels")->capture_default_str()->check(CLI::Range(720, 8192));
  CLI11_PARSE(cli, argc, argv);
  const bool headless = !screenshot.empty() || !dump.empty();
  const bool timing = play_frames > 0;

  // The walk runs one tile at a time on this thread. Eigen would split each
  // tile's small GEMMs over OpenMP threads whose barriers stall for tens of
  // milliseconds when the rasterizer's threads hold the cores; the backward
  // walk's forward pre-pass still uses every core (parallel_for, not Eigen).
  Eigen::setNbThreads(1);

  App app;
  try {
    if (!window.empty()) std::tie(set.window_left, set.window_right) = flashlab::parse_window(window);
    app.edit = set;
    app.session = std::make_unique<Session>(set);
  } catch (const std::exception& e) {
    std::cerr << "flashlab-viz: error: " << e.what() << "\n";
    return 1;
  }
  Session* s = app.session.get();
  s->jump_computed(steps);
  if (headless) s->advance(std::chrono::hours(1));  // reach --steps before the first frame
  app.jump_to = s->position();
  s->speed = speed;
  s->playing = timing;

  // ---- the window (window.cpp). The panels tile the display without overlap, so their background is
  // the glClear colour below: a full-screen blended quad per frame less for a software rasterizer
  // (llvmpipe: ~4 ms of 17 at 1600x1000, 2026-11-22).
  GLFWwindow* win = open_window(width, height, "flashlab-viz", headless, !(headless || timing));
  if (!win) return 1;
  const ImVec4 background = ImGui::GetStyle().Colors[ImGuiCol_WindowBg];
  ImGui::GetStyle().Colors[ImGuiCol_WindowBg] = ImVec4(0, 0, 0, 0);

  int rc = 0;
  FrameClock clock;
  const int64_t start_position = s->position();
  clock.start();
  // Headless: a few frames let ImGui settle its layout (windows measure their contents on the first).
  const int kHeadlessFrames = 3;
  for (int frame = 0; !glfwWindowShouldClose(win); ++frame) {
    // 1. poll input
    glfwPollEvents();
    ImGui_ImplOpenGL3_NewFrame();
    ImGui_ImplGlfw_NewFrame();
    // Headless there is no mouse: Xvfb's pointer rests mid-screen, and a hover tooltip drawn there would
    // cover the picture the screenshot shows (and its checks read).
    if (headless) ImGui::GetIO().MousePos = ImVec2(-FLT_MAX, -FLT_MAX);
    ImGui::NewFrame();
    clock.lap(0);
    // 2. keyboard (R rebuilds from the edited settings: also how a settings change applies)
    if (!headless) {
      if (!ImGui::GetIO().WantTextInput && ImGui::IsKeyPressed(GLFW_KEY_R, false)) app.apply();
      if (app.session) handle_step_keys(*app.session);
    }
    // 3. advance the walk: at most 10 ms of tile steps per frame keeps 60 frames/s while playing
    if (app.session && !headless) app.session->advance(std::chrono::milliseconds(10));
    clock.lap(1);
    // 4. panels
    DrawFrame(app, ImGui::GetIO().DisplaySize);
    clock.lap(2);
    // 5. render
    const auto [fw, fh] = render_frame(win, background);
    clock.lap(3);
    // 6. headless: read the frame back, write the PNG and the dump, exit
    if (headless && frame + 1 == kHeadlessFrames) {
      try {
        if (!screenshot.empty()) write_png(screenshot, fw, fh);
        if (!dump.empty()) {
          nlohmann::json j = app.session->to_json();
          j["framebuffer"] = {{"width", fw}, {"height", fh}};
          const ImVec2 d = ImGui::GetIO().DisplaySize;
          j["display"] = {{"width", d.x}, {"height", d.y}};
          for (const auto& [name, h] : app.heatmaps)
            j["heatmaps"][name] = {{"x0", h.pos.x}, {"y0", h.pos.y}, {"width", h.size.x}, {"height", h.size.y},
                                   {"rows", h.rows()}, {"cols", h.cols()}, {"vmax", h.vmax()}};
          const std::string tmp = dump + ".tmp";
          std::ofstream(tmp) << j.dump(1) << "\n";
          std::filesystem::rename(tmp, dump);
        }
        std::cout << "flashlab-viz: " << (screenshot.empty() ? "" : "wrote " + screenshot + " (" +
                                                                    std::to_string(fw) + "x" + std::to_string(fh) + ") ")
                  << (dump.empty() ? "" : "dumped " + dump + " ") << "after step " << app.session->position()
                  << " of " << app.session->steps() << "\n";
      } catch (const std::exception& e) {
        std::cerr << "flashlab-viz: error: " << e.what() << "\n";
        rc = 1;
      }
      break;
    }
    // 7. present
    glfwSwapBuffers(win);
    clock.lap(4);
    clock.end_frame(timing && frame > 0);  // kept only for --play-frames; the first frame builds the fonts
    if (timing && static_cast<int>(clock.frames()) >= play_frames) {
      std::printf("flashlab-viz: %zu frames playing at %.0f tiles/s: %s; %lld tiles stepped (Tr x Tc = %lld x %lld)\n",
                  clock.frames(), speed, clock.report().c_str(),
                  (long long)(app.session->position() - start_position),
                  (long long)app.session->primary().stepper->schedule().Tr(),
                  (long long)app.session->primary().stepper->schedule().Tc());
      break;
    }
  }

  app.heatmaps.clear();  // their textures, while the context is current
  close_window(win);
  return rc;
}
