// A measured-rows file (simulator/validation/*.csv) read as rows of named cells, for the tests that predict
// every row. Plain comma-separated values with a header line; no quoting (the validation files have none).
#pragma once
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace flashlab::testing {

struct CsvRow {
  std::map<std::string, std::string> f;
  double num(const std::string& k) const { return std::stod(f.at(k)); }
};

inline std::vector<CsvRow> read_csv(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::vector<std::string> header;
  std::vector<CsvRow> rows;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::vector<std::string> cells;
    std::stringstream ss(line);
    std::string cell;
    while (std::getline(ss, cell, ',')) cells.push_back(cell);
    if (header.empty()) {
      header = cells;
      continue;
    }
    CsvRow r;
    for (size_t i = 0; i < header.size() && i < cells.size(); ++i) r.f[header[i]] = cells[i];
    rows.push_back(r);
  }
  return rows;
}

}  // namespace flashlab::testing
