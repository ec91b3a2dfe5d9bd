// Session: everything the visualizer shows, with no drawing in it.
//
// A Session owns the problem the user picked, its random inputs and one
// tiled::Stepper per walked order (two when FA1 and FA2 are compared side by
// side). Every step goes through the Stepper, so each costs one tile of work
// (O(Br Bc d)); a jump moves toward its target a bounded number of tiles per
// frame, and the panels only read the events of the last step (TileView).
// The simulator's estimates are computed once per settings change.
//
// The same object is written to JSON by --dump (to_json), which the test
// compares with its own Stepper run of the same problem.
#pragma once
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "check.hpp"
#include "gpu_spec.hpp"
#include "model.hpp"
#include "stepper.hpp"

namespace flashlab::viz {

struct Settings {
  int64_t seqlen = 1024;        // seqlen_q = seqlen_k
  int64_t hdim = 64;
  int64_t br = 64, bc = 64;     // Br: query rows per tile, Bc: key rows per tile
  bool q_from_end = false;      // Q blocks counted from the last row, a ragged block first (tiled::Tiling)
  bool causal = false;
  int64_t window_left = -1, window_right = -1;  // sliding window (-1: unbounded)
  std::string mask = "none";    // mask function: none | prefix-lm | document | chunked | dense (flashlab/mask.hpp)
  std::string prefix, doc_lengths, mask_file;  // its parameter: "128", "300,700,24", a .npy
  int64_t chunk = 0;
  std::string order = "fa2";    // fa1 | fa2 | bwd | fa1-bwd
  std::string dtype = "fp16";   // storage dtype: bytes per element, the GPU's tensor peak
  std::string gpu = "h100-sxm"; // a presets/ name
  uint64_t seed = 0;
  bool compare = false;         // walk the other order of the same pass side by side
  bool skip_masked = true;      // a step moves to the next tile with visible elements, as a GPU kernel does
  int64_t model_batch = 8, model_heads = 16;  // the simulator's batch x heads (the walk shows one head)

  Problem problem() const;      // validated; throws flashlab::Error
};

// The events of the last tile step of one walk, ready to draw.
struct TileView {
  bool valid = false;                       // false before the first step
  tiled::TileStep step;
  const tiled::Tile* S = nullptr;           // S_ij (Br, Bc), -inf where masked
  const tiled::Tile* O_before = nullptr;    // O_i before the step (Br, dv)
  const tiled::Tile* O_after = nullptr;     // O_i after rescale-and-add (Br, dv)
  const tiled::Tile* P = nullptr;           // backward: P_ij (Br, Bc)
  const tiled::Tile* dS = nullptr;          // backward: dS_ij (Br, Bc)
  const std::vector<tiled::RowStat>* rows = nullptr;  // per-row m, l, alpha
  std::vector<tiled::Transfer> transfers;   // this step's loads and stores
};
TileView view_of(const tiled::Stepper& st);

// Where the grid panel drew a walk's grid in the last frame (screen pixels,
// origin top-left): what the screenshot test reads back.
struct GridPlacement {
  bool drawn = false;
  float x0 = 0, y0 = 0;       // top-left of tile (0, 0)
  float cell_w = 0, cell_h = 0;
};

struct Walk {
  tiled::Order order;
  std::unique_ptr<tiled::Stepper> stepper;
  GridPlacement grid;
};

class Session {
 public:
  explicit Session(Settings s);  // throws flashlab::Error on a bad problem

  const Settings& settings() const { return settings_; }
  const Problem& problem() const { return problem_; }
  const std::vector<Walk>& walks() const { return walks_; }
  std::vector<Walk>& walks() { return walks_; }
  const Walk& primary() const { return walks_.front(); }
  int64_t position() const { return primary().stepper->position(); }
  int64_t steps() const { return primary().stepper->schedule().steps(); }

  // Navigation. step()/back() set the target to the next / previous tile (the
  // next computed one with skip_masked); jump() to any schedule position;
  // advance() approaches the target, at most `budget` of wall time per call.
  void step();
  void back();
  void jump(int64_t tile);             // back: undone within the Stepper's history, else replayed from 0
  void jump_computed(int64_t n);      // to the state after the n-th computed (non-skipped) tile
  int64_t computed() const { return computed_; }  // non-skipped tiles done by the primary walk
  bool seeking() const { return target_ != position(); }
  int64_t target() const { return target_; }
  int64_t keyframe_interval() const { return primary().stepper->keyframe_interval(); }
  int64_t undo_depth() const { return undo_depth_; }  // a jump back this far (less one) undoes instead of replaying
  void advance(std::chrono::duration<double> budget);
  // Changes whenever a walk moves (and differs between sessions): what the
  // heatmaps key their uploaded textures on.
  uint64_t version() const { return version_; }

  // Play: tiles per second, moved in advance().
  bool playing = false;
  double speed = 8;

  const sim::GpuSpec& gpu() const { return gpu_; }
  const std::vector<sim::Estimate>& estimates() const { return estimates_; }  // standard, fa1, fa2, fa3
  struct CurvePoint {
    int64_t seqlen;
    double speedup_fa1, speedup_fa2, speedup_fa3;
  };
  const std::vector<CurvePoint>& speedup_curve() const { return curve_; }
  double estimate_seconds() const { return estimate_seconds_; }  // CPU time the model took
  // The simulator's L2 replay of FA2's forward on this GPU, at the walk's tiles and the model's batch x
  // heads: which K/V blocks of (batch 0, head 0) were in L2 as each of its Q-block CTAs read its next
  // block. Empty for backward walks or tiles the GPU cannot hold.
  const sim::Residency& l2_residency() const { return residency_; }

  nlohmann::json to_json() const;

 private:
  void move_all(bool forward);
  int64_t next_stop(int64_t pos) const;
  int64_t prev_stop(int64_t pos) const;
  bool skipped_at(int64_t pos) const;  // is the tile current after `pos` steps a skipped one

  Settings settings_;
  Problem problem_;
  harness::Inputs in_;
  std::vector<Walk> walks_;
  int64_t target_ = 0;
  int64_t computed_ = 0;
  uint64_t version_ = 0;
  int64_t undo_capacity_ = 0;  // steps the Steppers' undo history surely holds (history cap / a bound per step)
  int64_t undo_depth_ = 0;     // of those, how many the walks have made since they last started over
  double play_debt_ = 0;  // fractional tiles owed by play
  std::chrono::steady_clock::time_point last_advance_{};
  sim::GpuSpec gpu_;
  std::vector<sim::Estimate> estimates_;
  std::vector<CurvePoint> curve_;
  sim::Residency residency_;
  double estimate_seconds_ = 0;
};

// Bytes an executor pass keeps on chip at once for this tiling (fp32 arrays of
// tiled::Sram plus the S_ij tile), by name: for the SRAM budget panel.
struct SramItem {
  std::string name;
  int64_t bytes;
};
std::vector<SramItem> sram_footprint(const tiled::Stepper& st);

// Largest sequence length the backward walk accepts: it first runs the whole
// forward pass on the CPU (O(N^2 d)) to get O and LSE.
inline constexpr int64_t kMaxBackwardSeqlen = 16384;

}  // namespace flashlab::viz
