#include "flashlab/format.hpp"

#include <cmath>
#include <cstdio>

namespace flashlab {

std::string format_number(double x, int significant) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x < 0 ? "-inf" : "inf";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.*g", significant, x);
  return buf;
}

std::string format_bytes(double b) {
  static const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  if (std::fabs(b) < 1024) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.0f B", b);
    return buf;
  }
  int u = 0;
  double v = b / 1024;
  while (std::fabs(v) >= 1024 && u < 3) v /= 1024, ++u;
  char buf[40];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.1f %s" : "%.2f %s", v, units[u]);
  return buf;
}

std::string format_seconds(double t) {
  char buf[40];
  if (t >= 1) std::snprintf(buf, sizeof buf, "%.2f s", t);
  else if (t >= 1e-3) std::snprintf(buf, sizeof buf, "%.2f ms", t * 1e3);
  else std::snprintf(buf, sizeof buf, "%.1f us", t * 1e6);
  return buf;
}

}  // namespace flashlab
