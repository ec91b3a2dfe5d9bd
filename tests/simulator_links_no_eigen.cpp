// Built with flashlab_simulator's usage requirements alone: the simulator's library must reach neither
// Eigen nor OpenMP (it needs the schedule, not the tiled executor). If a change makes it link either,
// this file stops compiling.
#include "model.hpp"
#include "replay.hpp"
#include "schedule.hpp"

#if __has_include(<Eigen/Dense>)
#error "flashlab_simulator's include path reaches Eigen: it must link flashlab_schedule, not flashlab_tiled"
#endif
#if defined(_OPENMP)
#error "flashlab_simulator is compiled with OpenMP: it must not link flashlab_core's OpenMP part"
#endif

int main() { return flashlab::sim::to_string(flashlab::sim::Algo::fa2) == "fa2" ? 0 : 1; }
