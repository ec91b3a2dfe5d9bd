// flashlab-viz --decode's windows, one function each (decode_panel_*.cpp), drawn from a DecodeSession.
#pragma once
#include <imgui.h>
#include <nlohmann/json.hpp>

#include "decode_session.hpp"

namespace flashlab::viz {

// Where the cache panel drew what, for --dump and the screenshot test's pixel checks.
struct DecodePlacement {
  nlohmann::json j = nlohmann::json::object();
};

void ShowDecodeControls(DecodeSession& s);                      // problem, step, navigation, legend
void ShowDecodeCache(const DecodeSession& s, DecodePlacement& at);  // pages, block table, keys by split
void ShowDecodeSplits(const DecodeSession& s);                  // m^(s), l^(s) per packed query row
void ShowDecodeCombine(const DecodeSession& s);                 // LSE^(s), weights exp(LSE^(s) - LSE), LSE

}  // namespace flashlab::viz
