// The visualizer's panels, one function each (Dear ImGui's examples' habit):
// each draws one window from the Session and changes nothing but navigation.
#pragma once
#include <memory>
#include <string>

#include "heatmap.hpp"
#include "session.hpp"

namespace flashlab::viz {

// The app's state besides the session: settings being edited, the last error.
struct App {
  Settings edit;                      // the controls edit this; Apply rebuilds the session from it
  std::unique_ptr<Session> session;
  std::string error;                  // why the last Apply failed, shown in red
  int64_t jump_to = 0;
  HeatmapCache heatmaps;              // GL textures of the heatmaps: clear() while the GL context is current

  void apply();                       // rebuild the session from `edit`
};

void ShowControls(App& app);
void ShowTileGrid(Session& s);
void ShowTileValues(Session& s, HeatmapCache& heat);    // S_ij heatmap, O_i before/after (backward: P_ij, dS_ij)
void ShowRowStats(Session& s, HeatmapCache& heat);    // per-row m, l, alpha, LSE
void ShowMemory(Session& s);          // bytes by tensor vs standard attention, SRAM budget
void ShowModel(Session& s);           // roofline and speedup vs seqlen from the simulator
void DrawL2Residency(const Session& s);  // inside ShowModel: the K/V blocks the simulated L2 holds (panel_l2.cpp)

// Keyboard: space play/pause, right/left step, R restart.

}  // namespace flashlab::viz
