// The visualizer's window, for both of its modes (main.cpp, decode_main.cpp): GLFW with an OpenGL 3.3
// core context and Dear ImGui on it (dark style, square windows, no imgui.ini). open_window prints why
// and returns null when there is no display or no OpenGL 3.3; close_window undoes it all.
#pragma once
#include <GLFW/glfw3.h>

namespace flashlab::viz {

// fixed_size: not resizable (headless screenshots); vsync: swap on the display's refresh.
GLFWwindow* open_window(int width, int height, const char* title, bool fixed_size, bool vsync);
void close_window(GLFWwindow* win);

}  // namespace flashlab::viz
