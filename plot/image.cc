// The raster Image (pixels, lines, bitmap-font text) and its PNG encoding,
// declared in png_plot.h; the axes and LinePlot are in png_plot.cc.
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "plot/bitmap_font.h"
#include "plot/png_plot.h"

namespace beacon::plot {

// ---- Image ------------------------------------------------------------------

Image::Image(int width, int height, Rgb background) : width_(std::max(width, 1)), height_(std::max(height, 1)) {
  rgb_.resize(static_cast<size_t>(width_) * height_ * 3);
  for (size_t i = 0; i < rgb_.size(); i += 3) {
    rgb_[i] = background.r;
    rgb_[i + 1] = background.g;
    rgb_[i + 2] = background.b;
  }
}

Rgb Image::At(int x, int y) const {
  const size_t i = (static_cast<size_t>(y) * width_ + x) * 3;
  return Rgb{rgb_[i], rgb_[i + 1], rgb_[i + 2]};
}

void Image::Set(int x, int y, Rgb c) {
  if (x < 0 || y < 0 || x >= width_ || y >= height_) return;
  const size_t i = (static_cast<size_t>(y) * width_ + x) * 3;
  rgb_[i] = c.r;
  rgb_[i + 1] = c.g;
  rgb_[i + 2] = c.b;
}

void Image::FillRect(int x0, int y0, int x1, int y1, Rgb c) {
  for (int y = std::max(y0, 0); y < std::min(y1, height_); ++y) {
    for (int x = std::max(x0, 0); x < std::min(x1, width_); ++x) Set(x, y, c);
  }
}

void Image::DrawLine(double x0, double y0, double x1, double y1, Rgb c, int thickness, bool dashed) {
  const double dx = x1 - x0, dy = y1 - y0;
  const int steps = std::max(1, static_cast<int>(std::ceil(std::max(std::fabs(dx), std::fabs(dy)))));
  const double step_len = std::hypot(dx, dy) / steps;
  const int lo = -(thickness - 1) / 2, hi = thickness / 2;
  for (int i = 0; i <= steps; ++i) {
    if (dashed && std::fmod(i * step_len, 10.0) >= 6.0) continue;
    const int px = static_cast<int>(std::lround(x0 + dx * i / steps));
    const int py = static_cast<int>(std::lround(y0 + dy * i / steps));
    FillRect(px + lo, py + lo, px + hi + 1, py + hi + 1, c);
  }
}

void Image::DrawText(int x, int y, std::string_view text, Rgb c, int scale) {
  for (size_t i = 0; i < text.size(); ++i) {
    const int gx = x + static_cast<int>(i) * kCellWidth * scale;
    for (int col = 0; col < kGlyphWidth; ++col) {
      for (int row = 0; row < kGlyphHeight; ++row) {
        if (GlyphPixel(text[i], col, row))
          FillRect(gx + col * scale, y + row * scale, gx + (col + 1) * scale, y + (row + 1) * scale, c);
      }
    }
  }
}

void Image::DrawTextUp(int x, int y, std::string_view text, Rgb c, int scale) {
  // Glyph column `col` runs upwards from the baseline; glyph row 0 (its top)
  // is at the left.
  for (size_t i = 0; i < text.size(); ++i) {
    const int gy = y - static_cast<int>(i) * kCellWidth * scale;
    for (int col = 0; col < kGlyphWidth; ++col) {
      for (int row = 0; row < kGlyphHeight; ++row) {
        if (!GlyphPixel(text[i], col, row)) continue;
        FillRect(x + row * scale, gy - (col + 1) * scale, x + (row + 1) * scale, gy - col * scale, c);
      }
    }
  }
}

// ---- PNG --------------------------------------------------------------------

namespace {

void PutU32(std::string* out, uint32_t v) {
  const char b[4] = {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
                     static_cast<char>(v)};
  out->append(b, 4);
}

void PutChunk(std::string* out, const char* type, const std::string& data) {
  PutU32(out, static_cast<uint32_t>(data.size()));
  const std::string body = std::string(type, 4) + data;
  out->append(body);
  PutU32(out,
         static_cast<uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(body.data()), static_cast<uInt>(body.size()))));
}

}  // namespace

std::string EncodePng(const Image& image) {
  const int w = image.width(), h = image.height();
  std::string raw;
  raw.reserve(static_cast<size_t>(h) * (w * 3 + 1));
  for (int y = 0; y < h; ++y) {
    raw.push_back('\0');  // filter type 0 (none)
    raw.append(reinterpret_cast<const char*>(image.rgb().data()) + static_cast<size_t>(y) * w * 3, w * 3);
  }
  uLongf zlen = compressBound(static_cast<uLong>(raw.size()));
  std::string z(zlen, '\0');
  compress2(reinterpret_cast<Bytef*>(z.data()), &zlen, reinterpret_cast<const Bytef*>(raw.data()),
            static_cast<uLong>(raw.size()), Z_BEST_COMPRESSION);
  z.resize(zlen);

  std::string png("\x89PNG\r\n\x1a\n", 8);
  std::string ihdr;
  PutU32(&ihdr, static_cast<uint32_t>(w));
  PutU32(&ihdr, static_cast<uint32_t>(h));
  ihdr += std::string("\x08\x02\x00\x00\x00", 5);  // depth 8, RGB, deflate, filter 0, no interlace
  PutChunk(&png, "IHDR", ihdr);
  PutChunk(&png, "IDAT", z);
  PutChunk(&png, "IEND", "");
  return png;
}

absl::Status WritePng(const std::string& path, const Image& image) {
  const std::string bytes = EncodePng(image);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return absl::InvalidArgumentError(absl::StrCat("cannot write PNG ", path));
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) return absl::DataLossError(absl::StrCat("error writing PNG ", path));
  return absl::OkStatus();
}
}  // namespace beacon::plot
