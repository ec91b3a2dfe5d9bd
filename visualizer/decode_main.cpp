// flashlab-viz --decode: split-KV decoding a step at a time.
//
//   flashlab-viz --decode --cache-seqlens 40,90,17 --append 2 --page-size 16 --heads 8 --kv-heads 2 --q-len 2
//                --causal --num-splits 3 --bc 16 --walk-batch 1 [--steps 5 --screenshot x.png --dump x.json]
//
// The flags are check --decode's (cli/problem_flags, cli/decode_flags: one parser for both), plus the
// tiling, which entry and kv head to walk, and the viewer's own. The main loop in numbered phases:
//   1. poll input   2. keyboard and play   3. lay out and draw the panels   4. render
//   5. headless: read back, write, exit   6. present
#include "decode_main.hpp"

#include <CLI/CLI.hpp>
#include <Eigen/Core>
#include <GLFW/glfw3.h>
#include <imgui.h>
#include <imgui_impl_glfw.h>
#include <imgui_impl_opengl3.h>

#include <cfloat>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include "decode_flags.hpp"
#include "decode_panels.hpp"
#include "problem_flags.hpp"
#include "screenshot.hpp"
#include "window.hpp"

namespace flashlab::viz {
namespace {

void Place(float x, float y, float w, float h) {
  ImGui::SetNextWindowPos(ImVec2(x, y), ImGuiCond_Always);
  ImGui::SetNextWindowSize(ImVec2(w, h), ImGuiCond_Always);
}

// Controls on the left; the cache (pages, block table, keys by split) above; the splits' partial
// state and the combine below it, side by side.
void DrawDecodeFrame(DecodeSession& s, DecodePlacement& at, ImVec2 display) {
  const float W = display.x, H = display.y, left = 300, top = H * 0.45f, mid = (W - left) * 0.5f;
  Place(0, 0, left, H);
  ShowDecodeControls(s);
  Place(left, 0, W - left, top);
  ShowDecodeCache(s, at);
  Place(left, top, mid, H - top);
  ShowDecodeSplits(s);
  Place(left + mid, top, W - left - mid, H - top);
  ShowDecodeCombine(s);
}

}  // namespace

bool wants_decode(int argc, char** argv) {
  for (int k = 1; k < argc; ++k)
    if (std::strcmp(argv[k], "--decode") == 0) return true;
  return false;
}

int decode_main(int argc, char** argv) {
  cli::ProblemFlags flags;
  cli::DecodeFlags decode;
  DecodeSettings set;
  std::string screenshot, dump;
  int64_t steps = 0;
  int width = 1600, height = 1000;
  double speed = 2;
  CLI::App app{"flashlab-viz --decode: split-KV decoding against a KV cache, one schedule step at a time: the "
               "cache's pages and block table, the key range each split (CTA) walks, each split's m and l, and the "
               "combine's LSE and weights.\nKeys: space play/pause, left/right step.\n"
               "Example: flashlab-viz --decode --cache-seqlens 40,90,17 --append 2 --page-size 16 --heads 8 "
               "--kv-heads 2 --q-len 2 --causal --num-splits 3 --bc 16 --walk-batch 1"};
  flags.add_to(app, /*with_pass=*/false, /*with_seqlen=*/false);
  decode.add_to(app);
  app.add_option("--br", set.tiling.Br, "Br: query rows per tile")->capture_default_str();
  app.add_option("--bc", set.tiling.Bc, "Bc: keys per K/V block")->capture_default_str();
  app.add_option("--walk-batch", set.batch_index, "the batch entry whose walk is shown")->capture_default_str();
  app.add_option("--walk-kv-head", set.kv_head, "the kv head whose packed query rows are shown")->capture_default_str();
  app.add_option("--steps", steps, "start after this many schedule steps");
  app.add_option("--screenshot", screenshot, "render the state after --steps into this PNG and exit");
  app.add_option("--dump", dump, "write the values the panels show (JSON) and exit");
  app.add_option("--speed", speed, "play speed in steps per second")->capture_default_str();
  app.add_option("--width", width, "window width in pixels")->capture_default_str()->check(CLI::Range(1280, 8192));
  app.add_option("--height", height, "window height in pixels")->capture_default_str()->check(CLI::Range(720, 8192));
  CLI11_PARSE(app, argc, argv);
  const bool headless = !screenshot.empty() || !dump.empty();
  Eigen::setNbThreads(1);

  std::unique_ptr<DecodeSession> session;
  try {
    set.problem = decode.problem(flags);
    set.seed = flags.seed;
    session = std::make_unique<DecodeSession>(set);
  } catch (const std::exception& e) {
    std::cerr << "flashlab-viz: error: " << e.what() << "\n";
    return 1;
  }
  DecodeSession& s = *session;
  s.jump(steps);
  s.speed = speed;

  // ---- the window (window.cpp)
  GLFWwindow* win = open_window(width, height, "flashlab-viz --decode", headless, !headless);
  if (!win) return 1;
  const ImVec4 background = ImGui::GetStyle().Colors[ImGuiCol_WindowBg];

  int rc = 0;
  DecodePlacement at;
  const int kHeadlessFrames = 3;  // ImGui measures windows' contents on the first frames
  for (int frame = 0; !glfwWindowShouldClose(win); ++frame) {
    // 1. poll input
    glfwPollEvents();
    ImGui_ImplOpenGL3_NewFrame();
    ImGui_ImplGlfw_NewFrame();
    if (headless) ImGui::GetIO().MousePos = ImVec2(-FLT_MAX, -FLT_MAX);  // no hover highlight in the PNG
    ImGui::NewFrame();
    // 2. keyboard and play: `speed` steps per second
    if (!headless) {
      handle_step_keys(s);
      if (s.playing) {
        s.carry += s.speed * ImGui::GetIO().DeltaTime;
        for (; s.carry >= 1; s.carry -= 1) s.step();
        if (s.position() == s.steps()) s.playing = false;
      }
    }
    // 3. panels
    DrawDecodeFrame(s, at, ImGui::GetIO().DisplaySize);
    // 4. render
    const auto [fw, fh] = render_frame(win, background);
    // 5. headless: read back, write the PNG and the dump, exit
    if (headless && frame + 1 == kHeadlessFrames) {
      try {
        if (!screenshot.empty()) write_png(screenshot, fw, fh);
        if (!dump.empty()) {
          nlohmann::json j = s.to_json();
          j["framebuffer"] = {{"width", fw}, {"height", fh}};
          j["display"] = {{"width", ImGui::GetIO().DisplaySize.x}, {"height", ImGui::GetIO().DisplaySize.y}};
          j["placement"] = at.j;
          const std::string tmp = dump + ".tmp";
          std::ofstream(tmp) << j.dump(1) << "\n";
          std::filesystem::rename(tmp, dump);
        }
        std::cout << "flashlab-viz --decode: " << (screenshot.empty() ? "" : "wrote " + screenshot + " ")
                  << (dump.empty() ? "" : "dumped " + dump + " ") << "after step " << s.position() << " of "
                  << s.steps() << "\n";
      } catch (const std::exception& e) {
        std::cerr << "flashlab-viz: error: " << e.what() << "\n";
        rc = 1;
      }
      break;
    }
    // 6. present
    glfwSwapBuffers(win);
  }
  close_window(win);
  return rc;
}

}  // namespace flashlab::viz
