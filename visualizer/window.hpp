// The visualizer's window, for both of its modes (main.cpp, decode_main.cpp): GLFW with an OpenGL 3.3
// core context and Dear ImGui on it (dark style, square windows, no imgui.ini). open_window prints why
// and returns null when there is no display or no OpenGL 3.3; close_window undoes it all.
#pragma once
#include <GLFW/glfw3.h>
#include <imgui.h>

namespace flashlab::viz {

// fixed_size: not resizable (headless screenshots); vsync: swap on the display's refresh.
GLFWwindow* open_window(int width, int height, const char* title, bool fixed_size, bool vsync);
void close_window(GLFWwindow* win);
// The frame's render phase: ImGui's draw data over a clear of `background`; returns the framebuffer's
// width and height (what a headless screenshot reads back).
struct FrameSize {
  int width = 0, height = 0;
};
FrameSize render_frame(GLFWwindow* win, const ImVec4& background);

// The stepping keys both modes share: space plays or pauses, right and left step (S: Session or
// DecodeSession, each with playing, step() and back()).
template <class S>
void handle_step_keys(S& s) {
  const ImGuiIO& io = ImGui::GetIO();
  if (io.WantTextInput) return;
  if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Space), false)) s.playing = !s.playing;
  if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_RightArrow))) s.step();
  if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_LeftArrow))) s.back();
}

}  // namespace flashlab::viz
