// Estimates printed for people (a table) and for programs (JSON, CSV).
#pragma once
#include <string>
#include <vector>

#include "model.hpp"

namespace flashlab::sim {

std::string to_table(const std::vector<Estimate>& estimates);
std::string to_json(const std::vector<Estimate>& estimates);
std::string to_csv(const std::vector<Estimate>& estimates);

}  // namespace flashlab::sim
