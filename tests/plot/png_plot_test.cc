// beacon_plot: the PNG encoder checked by an independent decoder (chunk
// CRCs, IHDR, zlib inflate of IDAT, filter bytes, every pixel), and the line
// plot's output checked for its series colours, ticks and labels.
#include "plot/png_plot.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <fstream>
#include <set>
#include <sstream>

#include "plot/bitmap_font.h"

namespace beacon::plot {
namespace {

uint32_t U32(const std::string& s, size_t at) {
  return (uint32_t(uint8_t(s[at])) << 24) | (uint32_t(uint8_t(s[at + 1])) << 16) | (uint32_t(uint8_t(s[at + 2])) << 8) |
         uint32_t(uint8_t(s[at + 3]));
}

struct Decoded {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;
  std::vector<std::string> chunks;
};

// A minimal PNG reader for what EncodePng writes (RGB8, filter 0); fails the
// test on any inconsistency.
Decoded Decode(const std::string& png) {
  Decoded d;
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  std::string idat;
  size_t at = 8;
  while (at + 12 <= png.size()) {
    const uint32_t len = U32(png, at);
    const std::string type = png.substr(at + 4, 4);
    const std::string data = png.substr(at + 8, len);
    const uint32_t crc = U32(png, at + 8 + len);
    const std::string body = png.substr(at + 4, 4 + len);
    EXPECT_EQ(crc, crc32(0, reinterpret_cast<const Bytef*>(body.data()), body.size())) << type;
    d.chunks.push_back(type);
    if (type == "IHDR") {
      EXPECT_EQ(len, 13u);
      d.width = static_cast<int>(U32(data, 0));
      d.height = static_cast<int>(U32(data, 4));
      EXPECT_EQ(data[8], 8);   // bit depth
      EXPECT_EQ(data[9], 2);   // RGB
      EXPECT_EQ(data[12], 0);  // no interlace
    } else if (type == "IDAT") {
      idat += data;
    }
    at += 12 + len;
  }
  EXPECT_EQ(at, png.size());
  std::vector<uint8_t> raw(static_cast<size_t>(d.height) * (d.width * 3 + 1));
  uLongf n = raw.size();
  EXPECT_EQ(uncompress(raw.data(), &n, reinterpret_cast<const Bytef*>(idat.data()), idat.size()), Z_OK);
  EXPECT_EQ(n, raw.size());
  for (int y = 0; y < d.height; ++y) {
    const uint8_t* row = raw.data() + static_cast<size_t>(y) * (d.width * 3 + 1);
    EXPECT_EQ(row[0], 0) << "filter byte of row " << y;
    d.rgb.insert(d.rgb.end(), row + 1, row + 1 + d.width * 3);
  }
  return d;
}

int CountColor(const Decoded& d, Rgb c) {
  int n = 0;
  for (size_t i = 0; i + 2 < d.rgb.size(); i += 3) n += d.rgb[i] == c.r && d.rgb[i + 1] == c.g && d.rgb[i + 2] == c.b;
  return n;
}

TEST(PngTest, RoundTripsEveryPixel) {
  Image img(37, 5, Rgb{1, 2, 3});  // odd width: no row alignment assumed
  for (int y = 0; y < 5; ++y) {
    for (int x = 0; x < 37; ++x) img.Set(x, y, Rgb{uint8_t(x * 7), uint8_t(y * 50), uint8_t(x ^ y)});
  }
  const Decoded d = Decode(EncodePng(img));
  EXPECT_EQ(d.width, 37);
  EXPECT_EQ(d.height, 5);
  EXPECT_EQ(d.chunks, (std::vector<std::string>{"IHDR", "IDAT", "IEND"}));
  EXPECT_EQ(d.rgb, img.rgb());
}

TEST(PngTest, WritePngNamesAnUnwritablePath) {
  absl::Status s = WritePng("/nonexistent-dir/x.png", Image(2, 2));
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("/nonexistent-dir/x.png"), absl::string_view::npos);
}

TEST(ImageTest, DrawingIsClippedAndLinesConnect) {
  Image img(20, 10);
  img.DrawLine(-5, -5, 30, 30, kBlack);  // partly outside: no crash
  img.FillRect(-3, -3, 2, 2, Rgb{9, 9, 9});
  EXPECT_EQ(img.At(0, 0), (Rgb{9, 9, 9}));
  Image line(20, 20);
  line.DrawLine(2, 3, 17, 3, Rgb{200, 0, 0});
  for (int x = 2; x <= 17; ++x) EXPECT_EQ(line.At(x, 3), (Rgb{200, 0, 0})) << x;
  EXPECT_EQ(line.At(1, 3), kWhite);
  EXPECT_EQ(line.At(18, 3), kWhite);
}

TEST(FontTest, GlyphsAndWidths) {
  // '1': a vertical stem in the middle column, rows 0-6.
  for (int row = 0; row < 7; ++row) EXPECT_TRUE(GlyphPixel('1', 2, row)) << row;
  EXPECT_FALSE(GlyphPixel('1', 0, 3));
  EXPECT_FALSE(GlyphPixel('1', 2, 7));  // no descender
  EXPECT_TRUE(GlyphPixel('p', 0, 7));   // a descender
  EXPECT_FALSE(GlyphPixel(' ', 2, 3));
  EXPECT_EQ(GlyphPixel('\x01', 1, 0), GlyphPixel('?', 1, 0));  // unprintable draws as '?'
  EXPECT_FALSE(GlyphPixel('A', 5, 0));                         // out of the cell
  EXPECT_EQ(TextWidth(""), 0);
  EXPECT_EQ(TextWidth("A"), 5);
  EXPECT_EQ(TextWidth("AB", 2), 22);
  Image img(40, 12);
  img.DrawText(1, 1, "10", kBlack);
  int ink = 0;
  for (int y = 0; y < 12; ++y) {
    for (int x = 0; x < 40; ++x) ink += img.At(x, y) == kBlack;
  }
  EXPECT_GT(ink, 15);
  EXPECT_EQ(img.At(3, 1), kBlack);  // the top of the '1' stem
}

TEST(AxisTest, NiceTicksAndLabels) {
  EXPECT_EQ(NiceTicks(0, 10, false), (std::vector<double>{0, 2, 4, 6, 8, 10}));
  const std::vector<double> t = NiceTicks(0, 0.9, false);
  ASSERT_EQ(t.size(), 6u);
  EXPECT_NEAR(t[3], 0.6, 1e-12);
  EXPECT_NEAR(t.back(), 1.0, 1e-12);
  EXPECT_EQ(NiceTicks(1, 1e5, true), (std::vector<double>{1, 10, 100, 1000, 1e4, 1e5}));
  EXPECT_EQ(NiceTicks(1, 1000, true).size(), 10u);  // 3 decades: 1, 2, 5, 10, ..., 1000
  EXPECT_EQ(NiceTicks(10, 200, true), (std::vector<double>{10, 20, 50, 100, 200}));
  EXPECT_EQ(FormatTick(0), "0");
  EXPECT_EQ(FormatTick(2.5), "2.5");
  EXPECT_EQ(FormatTick(120), "120");
  EXPECT_EQ(FormatTick(15000), "15k");
  EXPECT_EQ(FormatTick(2e7), "20M");
  EXPECT_EQ(FormatTick(0.0001), "1e-04");
}

TEST(LinePlotTest, RendersSeriesInTheirColoursWithLegendAndRefLines) {
  LinePlot p;
  p.title = "TTFT vs load";
  p.x_label = "concurrency";
  p.y_label = "ms";
  p.log_y = true;
  Series& a = p.AddSeries("p50", {{1, 12}, {2, 15}, {4, 40}, {8, 95}});
  Series& b = p.AddSeries("p99", {{1, 20}, {2, 31}, {4, 95}, {8, 400}});
  EXPECT_EQ(a.color, kPalette[0]);
  EXPECT_EQ(b.color, kPalette[1]);
  p.AddSeries("skipped on log y", {{1, 0}, {2, -1}});  // nothing drawable: no crash
  p.AddHLine(50, "SLO", Rgb{0, 128, 0});
  p.AddVLine(4, "knee", Rgb{128, 0, 128});
  const std::string path = ::testing::TempDir() + "/plot.png";
  ASSERT_TRUE(p.WritePng(path, 640, 400).ok());
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  const Decoded d = Decode(bytes.str());
  EXPECT_EQ(d.width, 640);
  EXPECT_EQ(d.height, 400);
  // Each series: lines 2 px wide plus markers and a legend sample.
  EXPECT_GT(CountColor(d, kPalette[0]), 300);
  EXPECT_GT(CountColor(d, kPalette[1]), 300);
  EXPECT_GT(CountColor(d, Rgb{0, 128, 0}), 100);    // dashed SLO line and its label
  EXPECT_GT(CountColor(d, Rgb{128, 0, 128}), 50);   // the knee
  EXPECT_GT(CountColor(d, kBlack), 200);            // title, tick labels, legend text
  EXPECT_GT(CountColor(d, kWhite), 640 * 400 / 2);  // mostly background
}

TEST(LinePlotTest, StackedPanelsAndEmptyPlots) {
  LinePlot a, b;
  a.title = "a";
  a.AddSeries("x", {{0, 1}, {1, 2}});
  b.title = "empty";
  const std::string path = ::testing::TempDir() + "/stack.png";
  ASSERT_TRUE(WritePngStack(path, {a, b}, 300, 200).ok());
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  const Decoded d = Decode(bytes.str());
  EXPECT_EQ(d.width, 300);
  EXPECT_EQ(d.height, 400);
  EXPECT_GT(CountColor(d, kPalette[0]), 50);
}

}  // namespace
}  // namespace beacon::plot
