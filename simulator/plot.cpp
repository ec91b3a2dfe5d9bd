#include "plot.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

namespace flashlab::sim {
namespace {

const std::map<std::string, const char*> kColor = {
    {"standard", "#888888"}, {"fa1", "#e07b39"}, {"fa2", "#3a7dc9"}, {"fa3", "#2f9e44"}};

// A log-log panel mapping data coordinates to pixels.
struct Panel {
  double x0, y0, w, h;          // pixels
  double lx0, lx1, ly0, ly1;    // log10 of the data ranges
  double px(double x) const { return x0 + (std::log10(x) - lx0) / (lx1 - lx0) * w; }
  double py(double y) const { return y0 + h - (std::log10(y) - ly0) / (ly1 - ly0) * h; }
};

void axes(std::ostringstream& s, const Panel& p, const char* title, const char* xlabel, const char* ylabel) {
  s << "<rect x='" << p.x0 << "' y='" << p.y0 << "' width='" << p.w << "' height='" << p.h
    << "' fill='none' stroke='#333'/>\n";
  s << "<text x='" << p.x0 + p.w / 2 << "' y='" << p.y0 - 12 << "' text-anchor='middle' font-size='15'>" << title
    << "</text>\n";
  s << "<text x='" << p.x0 + p.w / 2 << "' y='" << p.y0 + p.h + 36 << "' text-anchor='middle'>" << xlabel << "</text>\n";
  s << "<text transform='translate(" << p.x0 - 46 << "," << p.y0 + p.h / 2 << ") rotate(-90)' text-anchor='middle'>"
    << ylabel << "</text>\n";
  for (int e = static_cast<int>(std::ceil(p.lx0)); e <= static_cast<int>(std::floor(p.lx1)); ++e) {
    const double x = p.px(std::pow(10.0, e));
    s << "<line x1='" << x << "' y1='" << p.y0 + p.h << "' x2='" << x << "' y2='" << p.y0 << "' stroke='#eee'/>"
      << "<text x='" << x << "' y='" << p.y0 + p.h + 16 << "' text-anchor='middle' font-size='11'>1e" << e << "</text>\n";
  }
  for (int e = static_cast<int>(std::ceil(p.ly0)); e <= static_cast<int>(std::floor(p.ly1)); ++e) {
    const double y = p.py(std::pow(10.0, e));
    s << "<line x1='" << p.x0 << "' y1='" << y << "' x2='" << p.x0 + p.w << "' y2='" << y << "' stroke='#eee'/>"
      << "<text x='" << p.x0 - 6 << "' y='" << y + 4 << "' text-anchor='end' font-size='11'>1e" << e << "</text>\n";
  }
}

}  // namespace

std::string plot_svg(const GpuSpec& gpu, DType dtype, const std::vector<Estimate>& est) {
  std::ostringstream s;
  s << "<svg xmlns='http://www.w3.org/2000/svg' width='1100' height='460' font-family='sans-serif' font-size='12'>\n"
    << "<rect width='100%' height='100%' fill='white'/>\n";

  // Left: roofline. x = FLOPs per HBM byte, y = FLOP/s. Ceilings: tensor peak x path, and bandwidth x intensity.
  const double peak = gpu.tensor_peak(dtype), bw = gpu.hbm_effective();
  const Panel roof{80, 50, 420, 340, -1, 5, std::log10(peak) - 4, std::log10(peak) + 0.3};
  axes(s, roof, ("Roofline: " + gpu.display_name).c_str(), "arithmetic intensity (FLOP / HBM byte)", "FLOP/s");
  for (auto [frac, label] : {std::pair{1.0, "tensor peak"}, {gpu.mma_sync_fraction, "mma.sync"},
                             {gpu.wgmma_fraction, "wgmma"}}) {
    if (frac <= 0 || (frac == 1.0 && std::string(label) != "tensor peak")) continue;
    const double ceiling = peak * frac, knee = ceiling / bw;
    s << "<polyline fill='none' stroke='#000' stroke-dasharray='" << (frac == 1.0 ? "0" : "4,3") << "' points='"
      << roof.px(0.1) << "," << roof.py(std::max(0.1 * bw, std::pow(10.0, roof.ly0))) << " " << roof.px(knee) << ","
      << roof.py(ceiling) << " " << roof.px(1e5) << "," << roof.py(ceiling) << "'/>"
      << "<text x='" << roof.px(1e5) - 4 << "' y='" << roof.py(ceiling) - 4 << "' text-anchor='end' font-size='11'>"
      << label << "</text>\n";
  }
  // One point per algorithm at the first sequence length.
  std::map<std::string, bool> drawn;
  for (const auto& e : est) {
    if (drawn[e.algo]) continue;
    drawn[e.algo] = true;
    const double bytes = e.hbm_read_bytes + e.hbm_write_bytes;
    const double ai = e.flops / bytes, rate = e.flops / e.time_s;
    if (!(ai > 0 && rate > 0)) continue;
    const double x = roof.px(std::clamp(ai, 0.11, 9e4)), y = roof.py(std::max(rate, std::pow(10.0, roof.ly0 + 0.05)));
    s << "<circle cx='" << x << "' cy='" << y << "' r='6' fill='" << kColor.at(e.algo) << "'/><text x='" << x + 9
      << "' y='" << y + 4 << "'>" << e.algo << " (N=" << e.seqlen_q << ")</text>\n";
  }

  // Right: speedup over standard against sequence length.
  double smin = 1e300, smax = 0, vmax = 1;
  for (const auto& e : est) {
    smin = std::min(smin, double(e.seqlen_q));
    smax = std::max(smax, double(e.seqlen_q));
    vmax = std::max(vmax, e.speedup_vs_standard);
  }
  if (smax <= smin) smax = smin * 2;
  const Panel sp{620, 50, 420, 340, std::log10(smin), std::log10(smax), -0.3, std::log10(vmax) + 0.2};
  axes(s, sp, "Speedup over standard attention", "sequence length", "speedup (x)");
  int legend = 0;
  for (const auto& [algo, color] : kColor) {
    std::ostringstream pts;
    int n = 0;
    for (const auto& e : est)
      if (e.algo == algo && e.speedup_vs_standard > 0) pts << sp.px(e.seqlen_q) << "," << sp.py(e.speedup_vs_standard) << " ", ++n;
    if (n == 0) continue;
    s << "<polyline fill='none' stroke='" << color << "' stroke-width='2' points='" << pts.str() << "'/>\n"
      << "<rect x='" << sp.x0 + 10 << "' y='" << sp.y0 + 10 + 18 * legend << "' width='12' height='12' fill='" << color
      << "'/><text x='" << sp.x0 + 28 << "' y='" << sp.y0 + 21 + 18 * legend << "'>" << algo << "</text>\n";
    ++legend;
  }
  s << "</svg>\n";
  return s.str();
}

}  // namespace flashlab::sim
