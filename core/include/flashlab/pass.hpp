// Which passes of attention a command runs or models.
#pragma once
#include <string>

namespace flashlab {

enum class Pass { fwd, bwd, fwd_bwd };
Pass parse_pass(const std::string& name);  // fwd | bwd | fwd+bwd; throws Error otherwise
std::string to_string(Pass pass);
inline bool has_fwd(Pass p) { return p != Pass::bwd; }
inline bool has_bwd(Pass p) { return p != Pass::fwd; }

}  // namespace flashlab
