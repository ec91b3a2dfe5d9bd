// Reads the current OpenGL framebuffer back and writes it as a PNG.
#pragma once
#include <string>

namespace flashlab::viz {

// The back buffer of the bound framebuffer, width x height RGB, top row first.
// Writes to path.tmp and renames, so no half-written PNG is left; throws flashlab::Error.
void write_png(const std::string& path, int width, int height);

}  // namespace flashlab::viz
