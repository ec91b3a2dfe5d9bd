// flashlab viz: runs flashlab-viz (visualizer/), built next to this binary, with the same arguments.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "commands.hpp"
#include "flashlab/error.hpp"

namespace flashlab::cli {

void add_viz(CLI::App& app) {
  auto* cmd = app.add_subcommand("viz", "open the visualizer (flashlab-viz): the tile grid, S_ij, per-row m, l, "
                                        "alpha, bytes moved and the GPU model; every argument goes to flashlab-viz");
  cmd->footer("Example: flashlab viz --seqlen 1024 --hdim 64 --causal   (flashlab viz --help: its options)");
  cmd->prefix_command();  // pass everything after `viz` through, --help included
  cmd->set_help_flag();
  cmd->callback([cmd] {
    const std::filesystem::path viz = std::filesystem::read_symlink("/proc/self/exe").parent_path() / "flashlab-viz";
    if (!std::filesystem::exists(viz))
      throw Error("the visualizer is not built: " + viz.string() +
                  " is missing (it needs GLFW, OpenGL and libimgui-dev; run scripts/setup.sh, then rebuild)");
    std::vector<std::string> args{viz.string()};
    for (const std::string& a : cmd->remaining()) args.push_back(a);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    throw Error("cannot run " + viz.string() + ": " + std::strerror(errno));
  });
}

}  // namespace flashlab::cli
