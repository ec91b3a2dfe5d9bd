// flashlab: understand, predict and measure FlashAttention.
#include <CLI/CLI.hpp>
#include <iostream>

#include "commands.hpp"
#include "flashlab/error.hpp"

int main(int argc, char** argv) {
  CLI::App app{"flashlab: FlashAttention you can step through, check and measure.\n"
               "Example: flashlab check --seqlen-q 333 --seqlen-k 1000 --hdim 80 --heads 8 --kv-heads 2 --causal"};
  app.require_subcommand(1);
  flashlab::cli::add_tour(app);
  flashlab::cli::add_check(app);
  flashlab::cli::add_run(app);
  flashlab::cli::add_step(app);
  flashlab::cli::add_trace(app);
  flashlab::cli::add_estimate(app);
  flashlab::cli::add_viz(app);
  flashlab::cli::add_shapes(app);
  flashlab::cli::add_lesson(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const flashlab::Error& e) {
    std::cerr << "flashlab: error: " << e.what() << "\n";
    return 1;
  } catch (const std::bad_alloc&) {
    std::cerr << "flashlab: error: out of memory; try a smaller problem\n";
    return 1;
  }
  return 0;
}
