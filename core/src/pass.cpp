#include "flashlab/pass.hpp"

#include "flashlab/error.hpp"

namespace flashlab {

Pass parse_pass(const std::string& name) {
  if (name == "fwd") return Pass::fwd;
  if (name == "bwd") return Pass::bwd;
  if (name == "fwd+bwd") return Pass::fwd_bwd;
  throw Error("unknown pass '" + name + "': expected fwd, bwd or fwd+bwd");
}

std::string to_string(Pass pass) {
  switch (pass) {
    case Pass::fwd: return "fwd";
    case Pass::bwd: return "bwd";
    case Pass::fwd_bwd: return "fwd+bwd";
  }
  return "?";
}

}  // namespace flashlab
