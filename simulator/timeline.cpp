#include "timeline.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include <nlohmann/json.hpp>

namespace flashlab::sim {
namespace {

// More bars than this make an SVG no browser draws comfortably; the rest are left out and the panel says so.
constexpr size_t kMaxBars = 60000;

std::string head_colour(int64_t head) {
  const double hue = std::fmod(double(head) * 137.508, 360.0);  // the golden angle: neighbours differ
  char buf[48];
  std::snprintf(buf, sizeof buf, "hsl(%.0f,55%%,62%%)", hue);
  return buf;
}

std::string miss_colour(double miss_share) {
  const double hue = 120.0 * (1.0 - std::clamp(miss_share, 0.0, 1.0));  // 120 green .. 0 red
  char buf[48];
  std::snprintf(buf, sizeof buf, "hsl(%.0f,75%%,45%%)", hue);
  return buf;
}

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) out += c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '&' ? "&amp;" : std::string(1, c);
  return out;
}

}  // namespace

std::string timeline_svg(const std::vector<KernelTimeline>& kernels, const std::string& title) {
  const double width = 1100, left = 70, right = 20, panel_h = 420, top = 50, gap = 80;
  std::ostringstream s;
  const double height = top + kernels.size() * (panel_h + gap);
  s << "<svg xmlns='http://www.w3.org/2000/svg' width='" << width << "' height='" << height
    << "' font-family='sans-serif' font-size='12'>\n<rect width='100%' height='100%' fill='white'/>\n";
  s << "<text x='" << width / 2 << "' y='24' text-anchor='middle' font-size='16'>" << escape(title) << "</text>\n";
  double y0 = top;
  for (const KernelTimeline& k : kernels) {
    const double w = width - left - right, seconds = std::max(k.seconds, 1e-12);
    const double row = panel_h / double(std::max<int64_t>(1, k.slots));
    double hit = 0, miss = 0;
    for (const CtaSpan& c : k.ctas) hit += c.hit_bytes, miss += c.miss_bytes;
    char head[256];
    std::snprintf(head, sizeof head, "%s: %zu CTAs on %lld slots (%lld SMs), %.1f us; loads %.1f%% L2 hits, %.3g GB from DRAM",
                  k.name.c_str(), k.ctas.size(), static_cast<long long>(k.slots), static_cast<long long>(k.sms),
                  seconds * 1e6, hit + miss > 0 ? 100 * hit / (hit + miss) : 0.0, miss / 1e9);
    s << "<text x='" << left << "' y='" << y0 - 8 << "'>" << escape(head) << "</text>\n";
    s << "<rect x='" << left << "' y='" << y0 << "' width='" << w << "' height='" << panel_h
      << "' fill='#f8f8f8' stroke='#333'/>\n";
    const size_t bars = std::min(k.ctas.size(), kMaxBars);
    for (size_t n = 0; n < bars; ++n) {
      const CtaSpan& c = k.ctas[n];
      const double x = left + c.start_s / seconds * w, bw = std::max(0.3, (c.end_s - c.start_s) / seconds * w);
      const double y = y0 + double(c.slot) * row, loads = c.hit_bytes + c.miss_bytes;
      s << "<rect x='" << x << "' y='" << y << "' width='" << bw << "' height='" << row * 0.6 << "' fill='"
        << head_colour(c.head) << "'/><rect x='" << x << "' y='" << y + row * 0.6 << "' width='" << bw
        << "' height='" << row * 0.35 << "' fill='" << miss_colour(loads > 0 ? c.miss_bytes / loads : 0) << "'/>\n";
    }
    if (bars < k.ctas.size())
      s << "<text x='" << left + w << "' y='" << y0 + panel_h + 30 << "' text-anchor='end'>first " << bars << " of "
        << k.ctas.size() << " CTAs drawn</text>\n";
    for (int t = 0; t <= 10; ++t) {
      const double x = left + w * t / 10.0;
      s << "<text x='" << x << "' y='" << y0 + panel_h + 16 << "' text-anchor='middle' font-size='11'>"
        << std::round(seconds * 1e6 * t / 10.0 * 10) / 10 << "</text>\n";
    }
    s << "<text x='" << left + w / 2 << "' y='" << y0 + panel_h + 32 << "' text-anchor='middle'>time (us); upper bar: "
      << "(batch, head); lower strip: share of the CTA's loads that missed L2 (green 0%, red 100%)</text>\n";
    s << "<text transform='translate(" << left - 12 << "," << y0 + panel_h / 2
      << ") rotate(-90)' text-anchor='middle'>CTA slot (SM = slot mod SMs)</text>\n";
    y0 += panel_h + gap;
  }
  s << "</svg>\n";
  return s.str();
}

std::string timeline_json(const std::vector<KernelTimeline>& kernels, const std::string& title) {
  nlohmann::json j;
  j["title"] = title;
  j["kernels"] = nlohmann::json::array();
  for (const KernelTimeline& k : kernels) {
    nlohmann::json kj{{"name", k.name}, {"slots", k.slots}, {"sms", k.sms}, {"seconds", k.seconds}};
    kj["ctas"] = nlohmann::json::array();
    for (const CtaSpan& c : k.ctas)
      kj["ctas"].push_back({{"cta", c.cta}, {"slot", c.slot}, {"head", c.head}, {"start_s", c.start_s},
                            {"end_s", c.end_s}, {"l2_hit_bytes", c.hit_bytes}, {"dram_bytes", c.miss_bytes}});
    j["kernels"].push_back(std::move(kj));
  }
  return j.dump(1) + "\n";
}

}  // namespace flashlab::sim
