// One way to name an enum's values: a table of (value, name) pairs, read both ways. Every enum that a
// user types or reads (Pass, DType, Order, TileKind, Algo, Impl) keeps its names in one such table, so
// to_string and parse cannot disagree, and a bad name gets one kind of message:
//   unknown pass 'fwd2': expected fwd, bwd or fwd+bwd
// Aliases (extra spellings a parser accepts, such as "bwd" for Order::backward) follow the canonical
// name of the same value in the table; to_string returns the first name of a value.
#pragma once
#include <string>
#include <string_view>
#include <utility>

#include "flashlab/error.hpp"

namespace flashlab {

template <class E, size_t N>
using EnumNames = std::pair<E, const char*>[N];

template <class E, size_t N>
const char* enum_name(const EnumNames<E, N>& names, E value) {
  for (const auto& [v, name] : names)
    if (v == value) return name;
  return "?";
}

// The canonical names joined as "a, b or c" (an alias, a name whose value appeared earlier, is left out).
template <class E, size_t N>
std::string enum_choices(const EnumNames<E, N>& names) {
  std::string out;
  size_t listed = 0, canonical = 0;
  for (size_t n = 0; n < N; ++n) {
    bool alias = false;
    for (size_t m = 0; m < n; ++m) alias |= names[m].first == names[n].first;
    canonical += !alias;
  }
  for (size_t n = 0; n < N; ++n) {
    bool alias = false;
    for (size_t m = 0; m < n; ++m) alias |= names[m].first == names[n].first;
    if (alias) continue;
    out += (listed == 0 ? "" : listed + 1 == canonical ? " or " : ", ") + std::string(names[n].second);
    ++listed;
  }
  return out;
}

// `what` names the kind in the message: "pass", "dtype", "order", ...
template <class E, size_t N>
E enum_parse(const EnumNames<E, N>& names, std::string_view text, const char* what) {
  for (const auto& [v, name] : names)
    if (text == name) return v;
  throw Error("unknown " + std::string(what) + " '" + std::string(text) + "': expected " + enum_choices(names));
}

}  // namespace flashlab
