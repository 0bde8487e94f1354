// The little Markdown that lesson narration, questions and explanations use, rendered instead of
// shown raw (the review found backticks on the classroom screen): paragraphs (blank lines; single
// line breaks are wrapping), bullet and numbered list items (`- `, `* `, `1. `), and inline `code`,
// **bold** and *italic* / _italic_. parse_markdown() is pure and unit-tested; draw_markdown() lays
// the words out with ImGui, wrapping at the width given, code in the mono font on a tinted box.
// Used by the lesson panel and presentation mode's caption (ui/lesson_view.cpp, ui/viewer.cpp).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ui/view.hpp"

namespace dpscope::viz {

enum class MdStyle { kPlain, kBold, kItalic, kCode };

struct MdRun {
  MdStyle style = MdStyle::kPlain;
  std::string text;
};

struct MdBlock {
  enum class Kind { kParagraph, kBullet, kNumbered } kind = Kind::kParagraph;
  std::string marker;  // "1." for a numbered item
  std::vector<MdRun> runs;
};

std::vector<MdBlock> parse_markdown(std::string_view text);
// The text without its markup: what a student reads ("x.to(device) copies"), for tests and for
// measuring.
std::string markdown_plain_text(std::string_view text);

// Draws `text` at the cursor, wrapped at `wrap_width` pixels (0: the window's content width), in
// `scale` times the current font size, and advances the cursor past it. Returns its height.
float draw_markdown(const ViewContext& ctx, std::string_view text, float wrap_width = 0.0f,
                    float scale = 1.0f, ImU32 color = 0);
// The height draw_markdown() would take (no drawing).
float measure_markdown(const ViewContext& ctx, std::string_view text, float wrap_width, float scale = 1.0f);

}  // namespace dpscope::viz
