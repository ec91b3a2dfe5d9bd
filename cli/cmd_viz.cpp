// flashlab viz: runs flashlab-viz (visualizer/), built next to this binary, with the same arguments;
// `--lesson N` stands for lesson N's problem (lessons/exercises/), the other arguments follow it.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "commands.hpp"
#include "flashlab/error.hpp"
#include "lesson.hpp"

namespace flashlab::cli {
namespace {

// The arguments with `--lesson N` (or `--lesson=N`) replaced by lesson N's visualizer arguments.
std::vector<std::string> expand_lesson(const std::vector<std::string>& in) {
  std::vector<std::string> out;
  for (size_t k = 0; k < in.size(); ++k) {
    std::string value;
    if (in[k] == "--lesson") {
      if (k + 1 == in.size()) throw Error("--lesson needs a lesson number (flashlab lesson --list)");
      value = in[++k];
    } else if (in[k].rfind("--lesson=", 0) == 0) {
      value = in[k].substr(9);
    } else {
      out.push_back(in[k]);
      continue;
    }
    size_t used = 0;
    int number = 0;
    try {
      number = std::stoi(value, &used);
    } catch (const std::exception&) {
    }
    if (used == 0 || used != value.size()) throw Error("--lesson: '" + value + "' is not a lesson number");
    const lessons::PathStep& step = lessons::step(number);  // throws outside 1..14
    const lessons::Lesson* lesson = lessons::find(number);
    if (!lesson) throw Error("lesson " + std::to_string(number) + " (\"" + step.title + "\") is not written yet (flashlab lesson --list)");
    if (lesson->viz.empty()) throw Error("lesson " + std::to_string(number) + " has no visualizer problem; its commands are in " +
                                         lessons::file_of(*lesson));
    out.insert(out.end(), lesson->viz.begin(), lesson->viz.end());
  }
  return out;
}

}  // namespace

void add_viz(CLI::App& app) {
  auto* cmd = app.add_subcommand("viz", "open the visualizer (flashlab-viz): the tile grid, S_ij, per-row m, l, "
                                        "alpha, bytes moved and the GPU model; every argument goes to flashlab-viz");
  cmd->footer("Example: flashlab viz --seqlen 1024 --hdim 64 --causal   (flashlab viz --help: its options)\n"
              "         flashlab viz --lesson 4                       (lesson 4's problem; --steps, --screenshot may follow)\n"
              "         flashlab viz --decode --cache-seqlens 40,90,17 --page-size 16 --num-splits 3 --bc 16\n"
              "                                                       (split-KV decoding: check --decode's flags)");
  cmd->prefix_command();  // pass everything after `viz` through, --help included
  cmd->set_help_flag();
  cmd->callback([cmd] {
    const std::vector<std::string> rest = expand_lesson(cmd->remaining());
    const std::filesystem::path viz = std::filesystem::read_symlink("/proc/self/exe").parent_path() / "flashlab-viz";
    if (!std::filesystem::exists(viz))
      throw Error("the visualizer is not built: " + viz.string() +
                  " is missing (it needs GLFW, OpenGL and libimgui-dev; run scripts/setup.sh, then rebuild)");
    std::vector<std::string> args{viz.string()};
    for (const std::string& a : rest) args.push_back(a);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    throw Error("cannot run " + viz.string() + ": " + std::strerror(errno));
  });
}

}  // namespace flashlab::cli
