#include "window.hpp"

#include <imgui.h>
#include <imgui_impl_glfw.h>
#include <imgui_impl_opengl3.h>

#include <cstdio>

namespace flashlab::viz {
namespace {

void glfw_error(int code, const char* msg) { std::fprintf(stderr, "flashlab-viz: GLFW error %d: %s\n", code, msg); }

}  // namespace

GLFWwindow* open_window(int width, int height, const char* title, bool fixed_size, bool vsync) {
  glfwSetErrorCallback(glfw_error);
  if (!glfwInit()) {
    std::fprintf(stderr, "flashlab-viz: error: cannot open a display (is DISPLAY set?); headless, run it under "
                         "xvfb-run -a -s \"-screen 0 1600x1000x24\"\n");
    return nullptr;
  }
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
  glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
  glfwWindowHint(GLFW_OPENGL_FORWARD_COMPAT, GLFW_TRUE);
  if (fixed_size) glfwWindowHint(GLFW_RESIZABLE, GLFW_FALSE);
  GLFWwindow* win = glfwCreateWindow(width, height, title, nullptr, nullptr);
  if (!win) {
    std::fprintf(stderr, "flashlab-viz: error: cannot create a %dx%d OpenGL 3.3 window\n", width, height);
    glfwTerminate();
    return nullptr;
  }
  glfwMakeContextCurrent(win);
  glfwSwapInterval(vsync ? 1 : 0);
  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGui::GetIO().IniFilename = nullptr;  // the layout is fixed; write no imgui.ini
  ImGui::StyleColorsDark();
  ImGui::GetStyle().WindowRounding = 0;
  ImGui_ImplGlfw_InitForOpenGL(win, true);
  ImGui_ImplOpenGL3_Init("#version 330 core");
  return win;
}

FrameSize render_frame(GLFWwindow* win, const ImVec4& background) {
  ImGui::Render();
  int fw = 0, fh = 0;
  glfwGetFramebufferSize(win, &fw, &fh);
  glViewport(0, 0, fw, fh);
  glClearColor(background.x, background.y, background.z, 1);
  glClear(GL_COLOR_BUFFER_BIT);
  ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
  return {fw, fh};
}

void close_window(GLFWwindow* win) {
  ImGui_ImplOpenGL3_Shutdown();
  ImGui_ImplGlfw_Shutdown();
  ImGui::DestroyContext();
  glfwDestroyWindow(win);
  glfwTerminate();
}

}  // namespace flashlab::viz
