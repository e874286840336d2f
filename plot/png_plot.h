// beacon_plot: line plots rendered to PNG with no dependency but zlib.
//
//   plot::LinePlot p;
//   p.title = "TTFT vs load";  p.x_label = "concurrency";  p.y_label = "ms";
//   p.log_y = true;
//   p.AddSeries("p50", {{1, 12}, {2, 15}, {4, 40}});
//   p.AddSeries("p99", {{1, 20}, {2, 31}, {4, 95}});
//   p.AddHLine(50, "SLO");
//   absl::Status s = p.WritePng("ttft.png", 800, 480);
//
// Several plots stack vertically into one image with WritePngStack(). The
// pieces are usable alone: Image (an RGB raster with lines, rectangles and
// bitmap-font text) and EncodePng() (an 8-bit RGB, non-interlaced PNG).
// Everything here is single-threaded value code; no global state.
#ifndef BEACON_PLOT_PNG_PLOT_H_
#define BEACON_PLOT_PNG_PLOT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace beacon::plot {

struct Rgb {
  uint8_t r = 0, g = 0, b = 0;
  friend bool operator==(const Rgb&, const Rgb&) = default;
};

inline constexpr Rgb kWhite{255, 255, 255};
inline constexpr Rgb kBlack{0, 0, 0};
// Colours AddSeries() assigns in turn (distinct hues, readable on white).
inline constexpr Rgb kPalette[] = {{31, 119, 180},  {214, 39, 40}, {44, 160, 44},   {255, 127, 14},
                                   {148, 103, 189}, {140, 86, 75}, {227, 119, 194}, {23, 190, 207}};

// An RGB raster, origin top-left. Drawing outside the image is clipped.
class Image {
 public:
  Image(int width, int height, Rgb background = kWhite);

  int width() const { return width_; }
  int height() const { return height_; }
  // REQUIRES: 0 <= x < width, 0 <= y < height.
  Rgb At(int x, int y) const;
  void Set(int x, int y, Rgb c);
  // Fills [x0, x1) x [y0, y1).
  void FillRect(int x0, int y0, int x1, int y1, Rgb c);
  // A straight line between pixel centres, `thickness` pixels wide; dashed
  // lines alternate 6 pixels on, 4 off.
  void DrawLine(double x0, double y0, double x1, double y1, Rgb c, int thickness = 1, bool dashed = false);
  // Text in the built-in 5x7 font with its top-left corner at (x, y), each
  // glyph pixel a scale x scale square.
  void DrawText(int x, int y, std::string_view text, Rgb c, int scale = 1);
  // Text rotated 90 degrees counter-clockwise (reading upwards), its
  // bottom-left corner at (x, y): for vertical axis labels.
  void DrawTextUp(int x, int y, std::string_view text, Rgb c, int scale = 1);
  // Row-major RGB bytes, 3 per pixel.
  const std::vector<uint8_t>& rgb() const { return rgb_; }

 private:
  int width_, height_;
  std::vector<uint8_t> rgb_;
};

// The PNG file bytes of `image` (colour type 2, bit depth 8, filter 0 on
// every row, zlib-compressed IDAT).
std::string EncodePng(const Image& image);
// Writes EncodePng(image) to `path`; the error names the path.
absl::Status WritePng(const std::string& path, const Image& image);

struct Series {
  std::string name;                               // legend entry
  std::vector<std::pair<double, double>> points;  // (x, y), drawn in order
  Rgb color;
  bool markers = true;  // a small square at each point
  bool dashed = false;
};

// A horizontal (y = value) or vertical (x = value) reference line, such as an
// SLO threshold or a knee; it is kept within the axis range.
struct RefLine {
  bool horizontal = true;
  double value = 0;
  std::string label;
  Rgb color{90, 90, 90};
};

// kAuto picks the corner whose box covers the fewest drawn line pixels.
enum class LegendPosition { kAuto, kTopLeft, kTopRight, kBottomLeft, kBottomRight };

// A 2-D line plot: axes with "nice" ticks (1, 2, 5 x 10^k; decades on a log
// axis; 1-2-5 within decades when the range is 3 decades or less), light
// grid, series in palette colours with markers, reference
// lines, a legend and a title. Linear axes include 0 when all data is
// positive and near it; log axes skip points <= 0.
struct LinePlot {
  std::string title, x_label, y_label;
  bool log_x = false, log_y = false;
  bool y_from_zero = false;  // a linear y axis always starts at 0 (throughputs, counts)
  LegendPosition legend = LegendPosition::kAuto;
  // When non-empty, these ticks replace the automatic ones, and the axis
  // spans them and the data with a little room (e.g. x ticks at the load
  // levels of a sweep).
  std::vector<double> x_ticks, y_ticks;
  std::vector<Series> series;
  std::vector<RefLine> ref_lines;

  // Adds a series coloured kPalette[number of series so far % 8]; returns it
  // for further styling.
  Series& AddSeries(std::string name, std::vector<std::pair<double, double>> points);
  void AddHLine(double y, std::string label, Rgb color = {90, 90, 90});
  void AddVLine(double x, std::string label, Rgb color = {90, 90, 90});

  // Draws the plot (title, axes, labels and all) into the rectangle
  // [x, x + w) x [y, y + h) of `image`. A plot with no drawable point still
  // gets its frame and title.
  void Render(Image* image, int x, int y, int w, int h) const;
  // Renders into a fresh white width x height image and writes it as PNG.
  absl::Status WritePng(const std::string& path, int width = 800, int height = 480) const;
};

// Stacks `plots` vertically, each panel width x panel_height, into one PNG.
absl::Status WritePngStack(const std::string& path, const std::vector<LinePlot>& plots, int width = 800,
                           int panel_height = 400);

// "Nice" tick values covering [lo, hi] (about `target` of them on a linear
// axis; 1-2-5 steps within decades on a log axis). Exposed for tests.
std::vector<double> NiceTicks(double lo, double hi, bool log, int target = 6);
// A short label for a tick value: "0", "2.5", "120", "15k", "1e-05".
std::string FormatTick(double v);

}  // namespace beacon::plot

#endif  // BEACON_PLOT_PNG_PLOT_H_
