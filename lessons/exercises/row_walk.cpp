#include "row_walk.hpp"

#include <cstdio>

#include "check.hpp"
#include "executor.hpp"

namespace flashlab::lessons {
namespace {

// Keeps what the executor reports about one row: its scores and statistics, tile by tile.
class RowRecorder : public tiled::Observer {
 public:
  explicit RowRecorder(int64_t row) : row_(row) {}
  std::vector<RowAtTile> tiles;

  void on_scores(const tiled::Where& w, const tiled::TileStep& s, const tiled::Tile& S) override {
    if (w.b != 0 || w.h != 0 || row_ < s.row0 || row_ >= s.row0 + s.rows) return;
    RowAtTile t;
    t.j = s.j;
    for (int64_t c = 0; c < S.cols(); ++c) t.scores.push_back(S(row_ - s.row0, c));
    tiles.push_back(std::move(t));
  }
  void on_row_stats(const tiled::Where& w, const tiled::TileStep&, const std::vector<tiled::RowStat>& rows) override {
    if (w.b != 0 || w.h != 0 || tiles.empty()) return;
    for (const tiled::RowStat& r : rows)
      if (r.row == row_) tiles.back().stat = r;
  }

 private:
  int64_t row_;
};

}  // namespace

std::vector<RowAtTile> walk_row(const Problem& p, tiled::Tiling tiling, int64_t row) {
  const harness::Inputs in = harness::random_inputs(p, p.seed);
  RowRecorder rec(row);
  tiled::forward(p, in.q, in.k, in.v, tiling, tiled::Order::fa2, &rec);
  return rec.tiles;
}

std::string format_scores(const std::vector<float>& scores) {
  std::string out = "[";
  for (size_t k = 0; k < scores.size(); ++k) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4g", static_cast<double>(scores[k]));
    out += (k ? ", " : "") + std::string(buf);
  }
  return out + "]";
}

}  // namespace flashlab::lessons
