#include "plot/png_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "plot/bitmap_font.h"

namespace beacon::plot {

// ---- Axes -------------------------------------------------------------------

std::vector<double> NiceTicks(double lo, double hi, bool log, int target) {
  std::vector<double> ticks;
  if (!(hi > lo) || !std::isfinite(lo) || !std::isfinite(hi)) return {lo};
  if (log) {
    if (lo <= 0) return {};
    const int d0 = static_cast<int>(std::floor(std::log10(lo) + 1e-9));
    const int d1 = static_cast<int>(std::ceil(std::log10(hi) - 1e-9));
    const bool fine = std::log10(hi / lo) <= 3.01;     // up to 3 decades: 1-2-5 ticks
    const int every = std::max(1, (d1 - d0 + 7) / 8);  // at most ~8 decade labels
    for (int d = d0; d <= d1; ++d) {
      for (double m : {1.0, 2.0, 5.0}) {
        if (m != 1.0 && !fine) continue;
        if (m == 1.0 && (d - d0) % every != 0) continue;
        const double v = m * std::pow(10.0, d);
        if (v >= lo * (1 - 1e-9) && v <= hi * (1 + 1e-9)) ticks.push_back(v);
      }
    }
    return ticks;
  }
  const double raw = (hi - lo) / std::max(1, target - 1);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double norm = raw / mag;
  const double step = (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * mag;
  const double start = std::floor(lo / step + 1e-9) * step;
  for (double v = start; v <= hi + step * (1 - 1e-9); v += step) {
    ticks.push_back(std::fabs(v) < step * 1e-9 ? 0.0 : v);
    if (v >= hi - step * 1e-9) break;
  }
  return ticks;
}

std::string FormatTick(double v) {
  const double a = std::fabs(v);
  if (a == 0) return "0";
  if (a >= 1e7) return absl::StrFormat("%.3gM", v / 1e6);
  if (a >= 1e4) return absl::StrFormat("%.3gk", v / 1e3);
  if (a < 1e-3) return absl::StrFormat("%.0e", v);
  return absl::StrFormat("%.4g", v);
}

namespace {

// One axis: the value range, ticks, and the map from values to [0, 1].
struct Axis {
  double lo = 0, hi = 1;
  bool log = false;
  std::vector<double> ticks;

  double Frac(double v) const {
    if (log) return (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo));
    return (v - lo) / (hi - lo);
  }
  bool Drawable(double v) const { return std::isfinite(v) && (!log || v > 0); }
};

Axis MakeAxis(const std::vector<double>& values, bool log, const std::vector<double>& custom_ticks) {
  Axis a;
  a.log = log;
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (double v : values) {
    if (!a.Drawable(v)) continue;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  for (double t : custom_ticks) {
    if (!a.Drawable(t)) continue;
    a.ticks.push_back(t);
    lo = std::min(lo, t);
    hi = std::max(hi, t);
  }
  if (!a.ticks.empty()) {
    // Given ticks: span them and the data, with 4% of room at either end.
    if (!(hi > lo)) hi = log ? lo * 2 : lo + 1;
    if (log) {
      const double pad = std::pow(hi / lo, 0.04);
      a.lo = lo / pad, a.hi = hi * pad;
    } else {
      const double pad = (hi - lo) * 0.04;
      a.lo = lo - pad, a.hi = hi + pad;
    }
    return a;
  }
  if (log) {
    if (!(lo <= hi)) lo = 1, hi = 10;
    // Snap outwards to the 1-2-5 sequence, so the data fills the panel.
    auto snap = [](double v, bool up) {
      const double decade = std::pow(10.0, std::floor(std::log10(v)));
      const double steps[] = {1, 2, 5, 10};
      if (up) {
        for (double m : steps) {
          if (m * decade >= v * (1 - 1e-9)) return m * decade;
        }
        return 10 * decade;
      }
      for (int i = 3; i >= 0; --i) {
        if (steps[i] * decade <= v * (1 + 1e-9)) return steps[i] * decade;
      }
      return decade;
    };
    a.lo = snap(lo, false);
    a.hi = snap(hi, true);
    if (a.hi <= a.lo * (1 + 1e-9)) a.hi = snap(a.lo * 1.5, true);
    a.ticks = NiceTicks(a.lo, a.hi, true);
    return a;
  }
  if (!(lo <= hi)) lo = 0, hi = 1;
  if (lo > 0 && lo <= 0.5 * hi) lo = 0;
  if (hi < 0 && hi >= 0.5 * lo) hi = 0;
  if (hi == lo) {
    const double pad = lo == 0 ? 1 : std::fabs(lo) * 0.5;
    lo -= pad;
    hi += pad;
  }
  a.ticks = NiceTicks(lo, hi, false);
  a.lo = std::min(lo, a.ticks.front());
  a.hi = std::max(hi, a.ticks.back());
  return a;
}

constexpr Rgb kGrid{228, 228, 228};
constexpr Rgb kFrame{60, 60, 60};

}  // namespace

// ---- LinePlot ---------------------------------------------------------------

Series& LinePlot::AddSeries(std::string name, std::vector<std::pair<double, double>> points) {
  const size_t n = sizeof(kPalette) / sizeof(kPalette[0]);
  series.push_back(Series{std::move(name), std::move(points), kPalette[series.size() % n]});
  return series.back();
}

void LinePlot::AddHLine(double y, std::string label, Rgb color) {
  ref_lines.push_back(RefLine{true, y, std::move(label), color});
}

void LinePlot::AddVLine(double x, std::string label, Rgb color) {
  ref_lines.push_back(RefLine{false, x, std::move(label), color});
}

void LinePlot::Render(Image* img, int x, int y, int w, int h) const {
  std::vector<double> xs, ys;
  for (const Series& s : series) {
    for (const auto& [px, py] : s.points) {
      xs.push_back(px);
      ys.push_back(py);
    }
  }
  for (const RefLine& r : ref_lines) (r.horizontal ? ys : xs).push_back(r.value);
  if (y_from_zero && !log_y) ys.push_back(0);
  const Axis ax = MakeAxis(xs, log_x, x_ticks), ay = MakeAxis(ys, log_y, y_ticks);

  int y_label_w = 0;
  for (double t : ay.ticks) y_label_w = std::max(y_label_w, TextWidth(FormatTick(t)));
  const int top = title.empty() ? 12 : 34;
  const int left = 10 + (y_label.empty() ? 0 : 14) + y_label_w + 8;
  const int bottom = 8 + TextHeight() + 6 + (x_label.empty() ? 0 : TextHeight() + 8) + 6;
  const int right = 20;
  const int x0 = x + left, x1 = x + w - right, y0 = y + top, y1 = y + h - bottom;
  if (x1 - x0 < 20 || y1 - y0 < 20) return;  // too small to draw anything useful
  auto px = [&](double v) { return x0 + ax.Frac(v) * (x1 - x0); };
  auto py = [&](double v) { return y1 - ay.Frac(v) * (y1 - y0); };

  if (!title.empty()) img->DrawText(x + (w - TextWidth(title, 2)) / 2, y + 10, title, kBlack, 2);
  // Grid, ticks and tick labels.
  for (double t : ax.ticks) {
    const int tx = static_cast<int>(std::lround(px(t)));
    img->DrawLine(tx, y0, tx, y1, kGrid);
    img->DrawLine(tx, y1, tx, y1 + 4, kFrame);
    const std::string s = FormatTick(t);
    img->DrawText(tx - TextWidth(s) / 2, y1 + 8, s, kBlack);
  }
  for (double t : ay.ticks) {
    const int ty = static_cast<int>(std::lround(py(t)));
    img->DrawLine(x0, ty, x1, ty, kGrid);
    img->DrawLine(x0 - 4, ty, x0, ty, kFrame);
    const std::string s = FormatTick(t);
    img->DrawText(x0 - 7 - TextWidth(s), ty - TextHeight() / 2, s, kBlack);
  }
  // Frame and axis labels.
  img->DrawLine(x0, y0, x1, y0, kFrame);
  img->DrawLine(x0, y1, x1, y1, kFrame);
  img->DrawLine(x0, y0, x0, y1, kFrame);
  img->DrawLine(x1, y0, x1, y1, kFrame);
  if (!x_label.empty()) {
    img->DrawText((x0 + x1 - TextWidth(x_label)) / 2, y1 + 8 + TextHeight() + 8, x_label, kBlack);
  }
  if (!y_label.empty()) img->DrawTextUp(x + 8, (y0 + y1 + TextWidth(y_label)) / 2, y_label, kBlack);

  for (const RefLine& r : ref_lines) {
    if (!(r.horizontal ? ay : ax).Drawable(r.value)) continue;
    if (r.horizontal) {
      const double ry = py(r.value);
      img->DrawLine(x0, ry, x1, ry, r.color, 1, true);
      const int tx = x1 - 6 - TextWidth(r.label), ty = static_cast<int>(ry) - TextHeight() - 3;
      img->FillRect(tx - 2, ty - 1, tx + TextWidth(r.label) + 2, ty + TextHeight() + 1, kWhite);
      img->DrawText(tx, ty, r.label, r.color);
    } else {
      const double rx = px(r.value);
      img->DrawLine(rx, y0, rx, y1, r.color, 1, true);
      const int tx = static_cast<int>(rx) + 4, ty = y0 + 4;
      img->FillRect(tx - 2, ty - 1, tx + TextWidth(r.label) + 2, ty + TextHeight() + 1, kWhite);
      img->DrawText(tx, ty, r.label, r.color);
    }
  }
  // Pixel paths of the series, for the legend's placement.
  std::vector<std::pair<double, double>> drawn;
  for (const Series& s : series) {
    bool have_prev = false;
    double prev_x = 0, prev_y = 0;
    for (const auto& [vx, vy] : s.points) {
      if (!ax.Drawable(vx) || !ay.Drawable(vy)) {
        have_prev = false;  // a gap in the line
        continue;
      }
      const double cx = px(vx), cy = py(vy);
      if (have_prev) {
        img->DrawLine(prev_x, prev_y, cx, cy, s.color, 2, s.dashed);
        const int n = 1 + static_cast<int>(std::hypot(cx - prev_x, cy - prev_y) / 2);
        for (int i = 0; i <= n; ++i) drawn.emplace_back(prev_x + (cx - prev_x) * i / n, prev_y + (cy - prev_y) * i / n);
      } else {
        drawn.emplace_back(cx, cy);
      }
      if (s.markers) {
        const int mx = static_cast<int>(std::lround(cx)), my = static_cast<int>(std::lround(cy));
        img->FillRect(mx - 2, my - 2, mx + 3, my + 3, s.color);
      }
      prev_x = cx, prev_y = cy, have_prev = true;
    }
  }

  // Legend.
  if (series.empty()) return;
  int text_w = 0;
  for (const Series& s : series) text_w = std::max(text_w, TextWidth(s.name));
  const int row_h = 12, box_w = 8 + 18 + 6 + text_w + 8, box_h = 6 + row_h * static_cast<int>(series.size()) + 2;
  auto corner = [&](LegendPosition pos, int* lx, int* ly) {
    const bool right_side = pos == LegendPosition::kTopRight || pos == LegendPosition::kBottomRight;
    const bool bottom_side = pos == LegendPosition::kBottomLeft || pos == LegendPosition::kBottomRight;
    *lx = right_side ? x1 - 8 - box_w : x0 + 8;
    *ly = bottom_side ? y1 - 8 - box_h : y0 + 8;
  };
  LegendPosition pos = legend;
  if (pos == LegendPosition::kAuto) {
    size_t best_covered = SIZE_MAX;
    for (LegendPosition p : {LegendPosition::kTopLeft, LegendPosition::kTopRight, LegendPosition::kBottomRight,
                             LegendPosition::kBottomLeft}) {
      int cx, cy;
      corner(p, &cx, &cy);
      size_t covered = 0;
      for (const auto& [dx, dy] : drawn) covered += dx >= cx && dx < cx + box_w && dy >= cy && dy < cy + box_h;
      if (covered < best_covered) best_covered = covered, pos = p;
    }
  }
  int lx, ly;
  corner(pos, &lx, &ly);
  img->FillRect(lx, ly, lx + box_w, ly + box_h, kWhite);
  img->DrawLine(lx, ly, lx + box_w - 1, ly, kFrame);
  img->DrawLine(lx, ly + box_h - 1, lx + box_w - 1, ly + box_h - 1, kFrame);
  img->DrawLine(lx, ly, lx, ly + box_h - 1, kFrame);
  img->DrawLine(lx + box_w - 1, ly, lx + box_w - 1, ly + box_h - 1, kFrame);
  for (size_t i = 0; i < series.size(); ++i) {
    const Series& s = series[i];
    const int ry = ly + 6 + static_cast<int>(i) * row_h;
    const int mid = ry + TextHeight() / 2;
    img->DrawLine(lx + 8, mid, lx + 26, mid, s.color, 2, s.dashed);
    if (s.markers) img->FillRect(lx + 15, mid - 2, lx + 20, mid + 3, s.color);
    img->DrawText(lx + 32, ry, s.name, kBlack);
  }
}

absl::Status LinePlot::WritePng(const std::string& path, int width, int height) const {
  Image img(width, height);
  Render(&img, 0, 0, width, height);
  return plot::WritePng(path, img);
}

absl::Status WritePngStack(const std::string& path, const std::vector<LinePlot>& plots, int width, int panel_height) {
  const int n = std::max<int>(1, static_cast<int>(plots.size()));
  Image img(width, panel_height * n);
  for (size_t i = 0; i < plots.size(); ++i)
    plots[i].Render(&img, 0, static_cast<int>(i) * panel_height, width, panel_height);
  return WritePng(path, img);
}

}  // namespace beacon::plot
