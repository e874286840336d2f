// A tiny built-in bitmap font for labelling raster plots: the classic 5x7
// LCD glyphs for printable ASCII (0x20..0x7E), with an eighth row for the
// descenders of g, j, p, q, y, drawn in a 6x10 cell (one column and two rows
// of spacing). No font files, no dependencies.
#ifndef BEACON_PLOT_BITMAP_FONT_H_
#define BEACON_PLOT_BITMAP_FONT_H_

#include <string_view>

namespace beacon::plot {

inline constexpr int kGlyphWidth = 5;   // pixels of ink per glyph, before scaling
inline constexpr int kGlyphHeight = 8;  // 7 above the baseline + 1 descender row
inline constexpr int kCellWidth = 6;    // advance from one character to the next
inline constexpr int kCellHeight = 10;  // line height

// Whether pixel (col, row) of `ch`'s glyph is ink; col in [0, kGlyphWidth),
// row in [0, kGlyphHeight), row 0 at the top. Characters outside printable
// ASCII draw as '?'. Coordinates out of range are never ink.
bool GlyphPixel(char ch, int col, int row);

// Width in pixels of `text` drawn at `scale` (every glyph pixel becomes a
// scale x scale square): characters advance by kCellWidth * scale, the last
// one's trailing spacing column is not counted. 0 for empty text.
int TextWidth(std::string_view text, int scale = 1);
inline int TextHeight(int scale = 1) { return kGlyphHeight * scale; }

}  // namespace beacon::plot

#endif  // BEACON_PLOT_BITMAP_FONT_H_
