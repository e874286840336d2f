#include "eval/report.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "util/csv.h"

namespace beacon::eval {
namespace {

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

int ResultTable::Find(const std::string& key) const {
  for (size_t i = 0; i < columns_.size(); ++i) {
    if (columns_[i].key == key) return static_cast<int>(i);
  }
  return -1;
}

Cell NumberOrNone(double v) { return std::isnan(v) ? Cell(std::monostate()) : Cell(v); }

std::string ResultTable::Format(const Cell& c, int precision) const {
  if (const std::string* s = std::get_if<std::string>(&c)) return *s;
  if (std::holds_alternative<std::monostate>(c)) return "-";
  const double v = std::get<double>(c);
  if (precision == 0) return absl::StrFormat("%.0f", v);
  return absl::StrFormat("%.*f", precision, v);
}

std::string ResultTable::ToCsv() const {
  std::string out;
  for (size_t i = 0; i < columns_.size(); ++i) absl::StrAppend(&out, i ? "," : "", cli::CsvField(columns_[i].key));
  out += "\n";
  for (const std::vector<Cell>& row : rows_) {
    for (size_t i = 0; i < row.size(); ++i) {
      // CSV keeps full precision for numbers: plots and reanalysis want it.
      std::string f;
      if (const double* v = std::get_if<double>(&row[i])) f = absl::StrFormat("%.9g", *v);
      if (const std::string* s = std::get_if<std::string>(&row[i])) f = *s;
      absl::StrAppend(&out, i ? "," : "", cli::CsvField(f));
    }
    out += "\n";
  }
  return out;
}

std::string ResultTable::ToMarkdown() const {
  std::string out = "|", rule = "|";
  for (const Column& c : columns_) {
    absl::StrAppend(&out, " ", c.header, " |");
    rule += &c == &columns_.front() ? " --- |" : " ---: |";  // labels left, numbers right
  }
  absl::StrAppend(&out, "\n", rule, "\n");
  for (const std::vector<Cell>& row : rows_) {
    out += "|";
    for (size_t i = 0; i < row.size(); ++i) absl::StrAppend(&out, " ", Format(row[i], columns_[i].precision), " |");
    out += "\n";
  }
  return out;
}

nlohmann::json ResultTable::ToJson() const {
  nlohmann::json rows = nlohmann::json::array();
  for (const std::vector<Cell>& row : rows_) {
    nlohmann::json o;
    for (size_t i = 0; i < row.size(); ++i) {
      if (const std::string* s = std::get_if<std::string>(&row[i])) {
        o[columns_[i].key] = *s;
      } else if (const double* v = std::get_if<double>(&row[i])) {
        o[columns_[i].key] = *v;
      } else {
        o[columns_[i].key] = nullptr;
      }
    }
    rows.push_back(std::move(o));
  }
  return rows;
}

std::string ResultTable::PivotMarkdown(const std::string& row_key, const std::string& col_key,
                                       const std::string& value_key) const {
  const int r = Find(row_key), c = Find(col_key), v = Find(value_key);
  if (r < 0 || c < 0 || v < 0) return "";
  std::vector<std::string> row_names, col_names;
  auto index_of = [](std::vector<std::string>* names, const std::string& s) {
    for (size_t i = 0; i < names->size(); ++i) {
      if ((*names)[i] == s) return i;
    }
    names->push_back(s);
    return names->size() - 1;
  };
  std::vector<std::vector<std::string>> grid;
  for (const std::vector<Cell>& row : rows_) {
    const size_t ri = index_of(&row_names, Format(row[r], columns_[r].precision));
    const size_t ci = index_of(&col_names, Format(row[c], columns_[c].precision));
    if (grid.size() <= ri) grid.resize(ri + 1);
    if (grid[ri].size() <= ci) grid[ri].resize(ci + 1, "-");
    grid[ri][ci] = Format(row[v], columns_[v].precision);
  }
  std::string out = absl::StrCat("| ", columns_[r].header, " \\ ", columns_[c].header, " |");
  std::string rule = "| --- |";
  for (const std::string& name : col_names) {
    absl::StrAppend(&out, " ", name, " |");
    rule += " ---: |";
  }
  absl::StrAppend(&out, "\n", rule, "\n");
  for (size_t i = 0; i < row_names.size(); ++i) {
    absl::StrAppend(&out, "| ", row_names[i], " |");
    for (size_t j = 0; j < col_names.size(); ++j) {
      absl::StrAppend(&out, " ", j < grid[i].size() ? grid[i][j] : "-", " |");
    }
    out += "\n";
  }
  return out;
}

absl::Status WriteResults(const ResultTable& table, const std::string& markdown, const nlohmann::json& settings,
                          const std::string& dir, const std::string& stem) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  const nlohmann::json json = {{"settings", settings}, {"results", table.ToJson()}};
  const std::pair<std::string, std::string> files[] = {
      {".csv", table.ToCsv()}, {".md", markdown}, {".json", json.dump(2) + "\n"}};
  for (const auto& [ext, text] : files) {
    const std::string path = absl::StrCat(dir, "/", stem, ext);
    std::ofstream out(path, std::ios::binary);
    out << text;
    if (!out.flush()) return absl::InternalError(absl::StrCat("cannot write ", path));
  }
  return absl::OkStatus();
}

absl::Status WriteCsv(const ResultTable& table, const std::string& path) {
  std::ofstream out(path, std::ios::binary);
  out << table.ToCsv();
  if (!out.flush()) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

absl::Status RunPlot(const std::string& script, const std::string& csv, const std::string& png,
                     const std::string& title) {
  const std::string cmd = absl::StrCat("python3 ", ShellQuote(script), " ", ShellQuote(csv), " ", ShellQuote(png),
                                       " --title ", ShellQuote(title));
  std::fflush(nullptr);
  if (std::system(cmd.c_str()) != 0) {
    return absl::FailedPreconditionError(absl::StrCat("the plot failed (pip install matplotlib, then run: ", cmd, ")"));
  }
  return absl::OkStatus();
}

}  // namespace beacon::eval
