// Result tables of beacon-eval and their three renderings: CSV (for
// tools/plot_fidelity.py and spreadsheets), markdown (for docs/fidelity.md)
// and JSON (with the run's settings, for machines).
#ifndef BEACON_EVAL_REPORT_H_
#define BEACON_EVAL_REPORT_H_

#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"

namespace beacon::eval {

struct Column {
  std::string key;     // CSV header and JSON key
  std::string header;  // markdown header
  int precision = 4;   // digits after the point for numbers; 0 prints an integer
};

// A string, a number, or nothing (a metric without samples): CSV leaves it
// empty, markdown prints "-", JSON null.
using Cell = std::variant<std::string, double, std::monostate>;

// `v`, or nothing when it is NaN.
Cell NumberOrNone(double v);

// A table of rows keyed by (policy, budget) in its first two columns.
class ResultTable {
 public:
  explicit ResultTable(std::vector<Column> columns) : columns_(std::move(columns)) {}

  // REQUIRES cells.size() == columns().size().
  void AddRow(std::vector<Cell> cells) { rows_.push_back(std::move(cells)); }

  const std::vector<Column>& columns() const { return columns_; }
  const std::vector<std::vector<Cell>>& rows() const { return rows_; }

  std::string ToCsv() const;
  // One markdown row per table row.
  std::string ToMarkdown() const;
  // Rows as objects keyed by Column::key.
  nlohmann::json ToJson() const;
  // A markdown table of one numeric column, `row_key` values down, and
  // `col_key` values across (in first-seen order), e.g. policy x budget.
  // Missing combinations print as "-".
  std::string PivotMarkdown(const std::string& row_key, const std::string& col_key, const std::string& value_key) const;

 private:
  int Find(const std::string& key) const;
  std::string Format(const Cell& c, int precision) const;

  std::vector<Column> columns_;
  std::vector<std::vector<Cell>> rows_;
};

// Writes dir/stem.csv, dir/stem.md (`markdown`, as given) and dir/stem.json
// ({"settings": settings, "results": table rows}), creating `dir`.
// INTERNAL naming the file when one cannot be written.
absl::Status WriteResults(const ResultTable& table, const std::string& markdown, const nlohmann::json& settings,
                          const std::string& dir, const std::string& stem);

// Writes table.ToCsv() to `path` (its directory must exist). INTERNAL
// naming the file on failure.
absl::Status WriteCsv(const ResultTable& table, const std::string& path);

// Runs `python3 script csv png --title title`. Returns FAILED_PRECONDITION
// with the command to run by hand when it fails (e.g. no matplotlib): the
// plot is a convenience, the tables are the result.
absl::Status RunPlot(const std::string& script, const std::string& csv, const std::string& png,
                     const std::string& title);

}  // namespace beacon::eval

#endif  // BEACON_EVAL_REPORT_H_
