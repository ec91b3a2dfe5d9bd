// The one case list the shared harness runs every implementation over.
#pragma once
#include <string>
#include <vector>

#include "flashlab/problem.hpp"

namespace flashlab::testing {

struct Case {
  std::string name;
  Problem problem;
  double logit_scale = 1.0;
  bool check_backward = true;
};

std::vector<Case> harness_cases();

}  // namespace flashlab::testing
