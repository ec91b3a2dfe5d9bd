// TraceWriter: an Observer that writes the executor's events as they happen, as JSON lines or CSV.
// `flashlab trace` (cli/cmd_trace.cpp) and the C ABI's walk (capi/walk.cpp) both print with it, so the
// two streams are the same text. Nothing is buffered: traces of big runs stream.
#pragma once
#include <ostream>

#include "events.hpp"

namespace flashlab::tiled {

class TraceWriter : public Observer {
 public:
  enum class Format { jsonl, csv };
  TraceWriter(std::ostream& out, Format format);  // csv: writes the header line first

  void on_transfer(const Where& w, const Transfer& t) override;
  void on_tile_begin(const Where& w, const TileStep& s) override { tile("tile_begin", w, s); }
  void on_skip(const Where& w, const TileStep& s) override { tile("tile_skipped", w, s); }
  void on_row_stats(const Where& w, const TileStep& s, const std::vector<RowStat>& rows) override;
  // Split-KV decoding's merge of Q block i: each row's LSE of every split (JSON lines only).
  void on_combine(const Where& w, const TileStep& s, const Tile& lse_splits, const Tile& merged) override;

 private:
  void head(const char* event, const Where& w);
  void tile(const char* event, const Where& w, const TileStep& s);
  std::ostream& out_;
  bool csv_;
};

}  // namespace flashlab::tiled
