#include "trace_writer.hpp"

#include <cmath>
#include <nlohmann/json.hpp>

namespace flashlab::tiled {
namespace {

// JSON has no infinity: a row that has seen no column yet has m = -inf, written as the string "-inf".
nlohmann::json finite(float x) { return std::isinf(x) ? nlohmann::json(x < 0 ? "-inf" : "inf") : nlohmann::json(x); }

void emit(std::ostream& out, const char* event, const Where& w, nlohmann::json fields) {
  fields["event"] = event;
  fields["b"] = w.b;
  fields["h"] = w.h;
  fields["order"] = to_string(w.order);
  fields["step"] = w.step;
  if (w.split >= 0) fields["split"] = w.split;  // split-KV decoding: the split the event belongs to
  out << fields.dump() << "\n";
}

}  // namespace

TraceWriter::TraceWriter(std::ostream& out, Format format) : out_(out), csv_(format == Format::csv) {
  if (csv_) out_ << "event,b,h,order,step,i,j,kind,tensor,direction,row0,rows,bytes,row,m_old,m_new,l_old,l_new,alpha\n";
}

void TraceWriter::on_transfer(const Where& w, const Transfer& t) {
  if (csv_) {
    head("transfer", w);
    out_ << ",,,," << to_string(t.tensor) << "," << (t.store ? "store" : "load") << "," << t.row0 << "," << t.rows
         << "," << t.bytes << ",,,,,,\n";
  } else {
    emit(out_, "transfer", w, {{"tensor", to_string(t.tensor)}, {"direction", t.store ? "store" : "load"},
                               {"row0", t.row0}, {"rows", t.rows}, {"bytes", t.bytes}});
  }
}

void TraceWriter::on_row_stats(const Where& w, const TileStep& s, const std::vector<RowStat>& rows) {
  for (const auto& r : rows) {
    if (csv_) {
      head("row_stats", w);
      out_ << "," << s.i << "," << s.j << ",,,,,,," << r.row << "," << r.m_old << "," << r.m_new << "," << r.l_old
           << "," << r.l_new << "," << r.alpha << "\n";
    } else {
      emit(out_, "row_stats", w, {{"i", s.i}, {"j", s.j}, {"row", r.row}, {"m_old", finite(r.m_old)},
                                  {"m_new", finite(r.m_new)}, {"l_old", r.l_old}, {"l_new", r.l_new},
                                  {"alpha", r.alpha}});
    }
  }
}

void TraceWriter::on_combine(const Where& w, const TileStep& s, const Tile& lse_splits, const Tile&) {
  if (csv_) return;  // CSV has no split column: `trace --decode` writes JSON lines only
  for (int64_t r = 0; r < lse_splits.rows(); ++r) {
    nlohmann::json lses = nlohmann::json::array();
    for (int64_t c = 0; c < lse_splits.cols(); ++c) lses.push_back(finite(lse_splits(r, c)));
    emit(out_, "combine", w, {{"i", s.i}, {"row", s.row0 + r}, {"lse_splits", lses}});
  }
}

void TraceWriter::head(const char* event, const Where& w) {
  out_ << event << "," << w.b << "," << w.h << "," << to_string(w.order) << "," << w.step;
}

void TraceWriter::tile(const char* event, const Where& w, const TileStep& s) {
  if (csv_) {
    head(event, w);
    out_ << "," << s.i << "," << s.j << "," << to_string(s.kind) << ",,,,,,,,,,,\n";
  } else {
    emit(out_, event, w, {{"i", s.i}, {"j", s.j}, {"kind", to_string(s.kind)}});
  }
}

}  // namespace flashlab::tiled
