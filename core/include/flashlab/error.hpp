// flashlab::Error: the one exception type flashlab throws for bad input.
// Its message says what was wrong, what was expected and, where it helps,
// what to do; the CLI prints it on one line and exits non-zero.
#pragma once
#include <stdexcept>
#include <string>

namespace flashlab {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace flashlab
