// Grading: an answer is right when it lies within the exercise's tolerance of the library's value.
#include <algorithm>
#include <cmath>

#include "flashlab/format.hpp"
#include "lesson.hpp"

namespace flashlab::lessons {

double tolerance_of(const Answer& a) { return std::max(a.abs_tolerance, a.rel_tolerance * std::fabs(a.value)); }

bool is_right(const Answer& a, double given) { return std::isfinite(given) && std::fabs(given - a.value) <= tolerance_of(a); }

std::string describe_tolerance(const Answer& a) {
  if (a.rel_tolerance * std::fabs(a.value) >= a.abs_tolerance)
    return "within " + format_number(a.rel_tolerance * 100, 3) + "%";
  return "within " + format_number(a.abs_tolerance, 3) + (a.unit.empty() ? "" : " " + a.unit);
}

}  // namespace flashlab::lessons
