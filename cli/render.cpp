#include "render.hpp"

#include "flashlab/format.hpp"

#include <cmath>
#include <cstdio>
#include <sstream>

namespace flashlab::cli {
namespace {

std::string num(double x) { return format_number(x, 4); }
std::string bytes_str(double b) { return format_bytes(b); }

}  // namespace

std::string render_grid(const tiled::Stepper& st) {
  const tiled::Schedule& s = st.schedule();
  const int64_t current = st.position() - 1;
  std::ostringstream o;
  const int64_t shown_r = std::min<int64_t>(s.Tr(), 32), shown_c = std::min<int64_t>(s.Tc(), 64);
  o << "tile grid (rows: Q blocks i, columns: K/V blocks j; # done, @ current, . pending, blank skipped;\n"
       "           a partial tile, its element mask applied: % done, : pending)\n";
  for (int64_t i = 0; i < shown_r; ++i) {
    o << "  ";
    for (int64_t j = 0; j < shown_c; ++j) {
      const int64_t k = s.step_of(i, j);
      const tiled::TileKind kind = s.classify(i, j);
      const bool partial = kind == tiled::TileKind::partial;
      if (kind == tiled::TileKind::skipped) o << ' ';
      else if (k == current) o << '@';
      else if (k < current) o << (partial ? '%' : '#');
      else o << (partial ? ':' : '.');
    }
    o << (shown_c < s.Tc() ? " ..." : "") << "\n";
  }
  if (shown_r < s.Tr()) o << "  ...\n";
  return o.str();
}

std::string render_step(const Problem& p, const tiled::Stepper& st, int max_rows, int max_cols) {
  using tiled::Event;
  const tiled::Schedule& s = st.schedule();
  std::ostringstream o;
  if (st.tile_events().empty()) return "(before the first step)\n";
  const tiled::TileStep& step = st.tile_events().front().step;
  o << "step " << step.index + 1 << "/" << s.steps() << " (" << tiled::to_string(s.order()) << " order): tile (i="
    << step.i << ", j=" << step.j << ")  rows " << step.row0 << ".." << step.row0 + step.rows - 1 << " x keys "
    << step.col0 << ".." << step.col0 + step.cols - 1 << "  [" << tiled::to_string(step.kind) << "]\n";
  for (const Event& e : st.tile_events()) {
    switch (e.kind) {
      case Event::Kind::transfer:
        o << "  " << (e.transfer.store ? "store " : "load  ") << tiled::to_string(e.transfer.tensor) << " rows "
          << e.transfer.row0 << ".." << e.transfer.row0 + e.transfer.rows - 1 << "  " << bytes_str(e.transfer.bytes)
          << (e.transfer.store ? "  SRAM -> HBM" : "  HBM -> SRAM") << "\n";
        break;
      case Event::Kind::skip: o << "  skipped: every element of this tile is masked\n"; break;
      case Event::Kind::scores: {
        o << "  S_ij = scale * Q_i K_j^T (masked: -inf), first " << std::min<int64_t>(max_rows, e.a.rows()) << "x"
          << std::min<int64_t>(max_cols, e.a.cols()) << ":\n";
        for (int64_t r = 0; r < std::min<int64_t>(max_rows, e.a.rows()); ++r) {
          o << "    ";
          for (int64_t c = 0; c < std::min<int64_t>(max_cols, e.a.cols()); ++c) {
            char buf[16];
            std::snprintf(buf, sizeof buf, " %9s", num(e.a(r, c)).c_str());
            o << buf;
          }
          o << "\n";
        }
        break;
      }
      case Event::Kind::row_stats:
        o << "  online softmax per row: m_new = max(m_old, rowmax S), alpha = exp(m_old - m_new), l = alpha l + rowsum "
             "exp(S - m_new)\n";
        o << "    row      m_old      m_new      alpha      l_old      l_new\n";
        for (size_t r = 0; r < std::min<size_t>(max_rows, e.rows.size()); ++r) {
          const auto& x = e.rows[r];
          char buf[128];
          std::snprintf(buf, sizeof buf, "    %3lld %10s %10s %10s %10s %10s\n", static_cast<long long>(x.row),
                        num(x.m_old).c_str(), num(x.m_new).c_str(), num(x.alpha).c_str(), num(x.l_old).c_str(),
                        num(x.l_new).c_str());
          o << buf;
        }
        break;
      case Event::Kind::rescale:
        if (e.a.rows() > 0 && e.a.cols() > 0)
          o << "  O_i[" << step.row0 << ",0] " << num(e.a(0, 0)) << " -> " << num(e.b(0, 0))
            << (s.order() == tiled::Order::fa2 ? "  (unnormalized: divided by l at the end)" : "  (normalized)") << "\n";
        break;
      default: break;
    }
  }
  const tiled::ByteCounts& b = st.bytes();
  // Standard attention's forward traffic for the same head, for comparison (naive_bytes counts Algorithm 0,
  // the forward; a backward order says so rather than compare its bytes with another pass's).
  const tiled::NaiveBytes naive = tiled::naive_bytes(p, s.batch_index());
  o << "  HBM so far: read " << bytes_str(b.total_load()) << ", written " << bytes_str(b.total_store())
    << (tiled::is_backward(s.order()) ? "   (standard attention's forward" : "   (standard attention")
    << ", whole pass: read " << bytes_str(naive.read) << ", written " << bytes_str(naive.write)
    << ")\n";
  return o.str();
}

}  // namespace flashlab::cli
