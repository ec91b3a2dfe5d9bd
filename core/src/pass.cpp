#include "flashlab/pass.hpp"

#include "flashlab/enum_names.hpp"

namespace flashlab {

static const EnumNames<Pass, 3> kPassNames{{Pass::fwd, "fwd"}, {Pass::bwd, "bwd"}, {Pass::fwd_bwd, "fwd+bwd"}};

Pass parse_pass(const std::string& name) { return enum_parse(kPassNames, name, "pass"); }
std::string to_string(Pass pass) { return enum_name(kPassNames, pass); }

}  // namespace flashlab
