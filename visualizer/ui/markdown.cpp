// Narration Markdown: parsing (pure) and word-wrapped drawing (see markdown.hpp).
#include "ui/markdown.hpp"

#include <algorithm>
#include <cctype>

#include "ui/draw_util.hpp"

namespace dpscope::viz {

namespace {

// Inline markup of one block's text: `code`, **bold**, *italic*, _italic_. An opening mark with no
// closing one is kept as a literal character.
std::vector<MdRun> parse_inline(std::string_view s) {
  std::vector<MdRun> runs;
  std::string plain;
  auto flush = [&] {
    if (!plain.empty()) runs.push_back({MdStyle::kPlain, plain});
    plain.clear();
  };
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (c == '`') {
      const size_t end = s.find('`', i + 1);
      if (end != std::string_view::npos) {
        flush();
        runs.push_back({MdStyle::kCode, std::string(s.substr(i + 1, end - i - 1))});
        i = end + 1;
        continue;
      }
    } else if (c == '*' && i + 1 < s.size() && s[i + 1] == '*') {
      const size_t end = s.find("**", i + 2);
      if (end != std::string_view::npos && end > i + 2) {
        flush();
        runs.push_back({MdStyle::kBold, std::string(s.substr(i + 2, end - i - 2))});
        i = end + 2;
        continue;
      }
    } else if ((c == '*' || c == '_') && i + 1 < s.size() && s[i + 1] != ' ') {
      // An underscore inside a word (grad_ready) is not emphasis.
      const bool word_before = i > 0 && (std::isalnum(static_cast<unsigned char>(s[i - 1])) != 0);
      const size_t end = s.find(c, i + 1);
      const bool word_after = end != std::string_view::npos && end + 1 < s.size() &&
                              (std::isalnum(static_cast<unsigned char>(s[end + 1])) != 0);
      if (!(c == '_' && (word_before || word_after)) && end != std::string_view::npos && end > i + 1 &&
          s[end - 1] != ' ') {
        flush();
        runs.push_back({MdStyle::kItalic, std::string(s.substr(i + 1, end - i - 1))});
        i = end + 1;
        continue;
      }
    }
    plain += c;
    ++i;
  }
  flush();
  return runs;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// "- x", "* x" -> bullet; "12. x" -> numbered "12.".
bool list_marker(std::string_view line, MdBlock::Kind& kind, std::string& marker, std::string_view& rest) {
  if (line.size() >= 2 && (line[0] == '-' || line[0] == '*') && line[1] == ' ') {
    kind = MdBlock::Kind::kBullet;
    rest = line.substr(2);
    return true;
  }
  size_t d = 0;
  while (d < line.size() && std::isdigit(static_cast<unsigned char>(line[d])) != 0) ++d;
  if (d > 0 && d + 1 < line.size() && line[d] == '.' && line[d + 1] == ' ') {
    kind = MdBlock::Kind::kNumbered;
    marker = std::string(line.substr(0, d + 1));
    rest = line.substr(d + 2);
    return true;
  }
  return false;
}

}  // namespace

std::vector<MdBlock> parse_markdown(std::string_view text) {
  std::vector<MdBlock> blocks;
  std::string pending;  // the current block's text, its lines joined by spaces
  MdBlock current;
  bool open = false;
  auto close = [&] {
    if (open) {
      current.runs = parse_inline(pending);
      blocks.push_back(std::move(current));
    }
    current = MdBlock{};
    pending.clear();
    open = false;
  };
  size_t from = 0;
  while (from <= text.size()) {
    size_t to = text.find('\n', from);
    if (to == std::string_view::npos) to = text.size();
    const std::string_view line = trim(text.substr(from, to - from));
    from = to + 1;
    if (line.empty()) {
      close();
      continue;
    }
    MdBlock::Kind kind{};
    std::string marker;
    std::string_view rest;
    if (list_marker(line, kind, marker, rest)) {
      close();
      current.kind = kind;
      current.marker = marker;
      pending = std::string(trim(rest));
      open = true;
      continue;
    }
    if (!open) {
      open = true;
    } else {
      pending += ' ';
    }
    pending += line;
  }
  close();
  return blocks;
}

std::string markdown_plain_text(std::string_view text) {
  std::string out;
  for (const MdBlock& b : parse_markdown(text)) {
    if (!out.empty()) out += '\n';
    if (b.kind == MdBlock::Kind::kBullet) out += "\u2022 ";
    if (b.kind == MdBlock::Kind::kNumbered) out += b.marker + " ";
    for (const MdRun& r : b.runs) out += r.text;
  }
  return out;
}

namespace {

struct Layout {
  const ViewContext* ctx = nullptr;
  ImDrawList* dl = nullptr;  // null: measure only
  float size = 0;
  ImU32 color = 0;
};

ImFont* font_for(const ViewContext& ctx, MdStyle style) {
  ImFont* body = ctx.fonts.body != nullptr ? ctx.fonts.body : ImGui::GetFont();
  switch (style) {
    case MdStyle::kBold: return ctx.fonts.bold != nullptr ? ctx.fonts.bold : body;
    case MdStyle::kItalic: return ctx.fonts.italic != nullptr ? ctx.fonts.italic : body;
    case MdStyle::kCode: return ctx.fonts.mono != nullptr ? ctx.fonts.mono : body;
    case MdStyle::kPlain: break;
  }
  return body;
}

// Lays out (and, with a draw list, draws) the blocks from `origin`; returns the height.
float lay_out(const Layout& l, const std::vector<MdBlock>& blocks, ImVec2 origin, float width) {
  const ViewContext& ctx = *l.ctx;
  const float line_h = l.size * 1.3f;
  const float indent = l.size * 1.4f;
  float y = origin.y;
  bool first_block = true;
  for (const MdBlock& b : blocks) {
    const bool item = b.kind != MdBlock::Kind::kParagraph;
    if (!first_block) y += item ? l.size * 0.15f : l.size * 0.55f;
    first_block = false;
    const float x0 = origin.x + (item ? indent : 0.0f);
    if (item && l.dl != nullptr) {
      const std::string marker = b.kind == MdBlock::Kind::kBullet ? "\u2022" : b.marker;
      draw_text(l.dl, font_for(ctx, MdStyle::kPlain), l.size, ImVec2(origin.x + l.size * 0.3f, y), l.color,
                marker);
    }
    float x = x0;
    const float x1 = origin.x + width;
    for (const MdRun& r : b.runs) {
      ImFont* font = font_for(ctx, r.style);
      // Words with the spaces that follow them; a code span breaks only at its own spaces too.
      size_t i = 0;
      while (i < r.text.size()) {
        size_t j = r.text.find(' ', i);
        j = j == std::string::npos ? r.text.size() : j + 1;
        const std::string_view word(r.text.data() + i, j - i);
        i = j;
        const std::string_view ink = trim(word);
        const float w = text_size(font, l.size, word).x;
        const float ink_w = text_size(font, l.size, ink).x;
        if (x > x0 && x + ink_w > x1) {
          x = x0;
          y += line_h;
        }
        if (l.dl != nullptr && !ink.empty()) {
          if (r.style == MdStyle::kCode)
            l.dl->AddRectFilled(ImVec2(x - 2, y), ImVec2(x + ink_w + 2, y + l.size * 1.15f),
                                with_alpha(ctx.palette->text_dim, 0.22f), 3.0f);
          const ImU32 color = r.style == MdStyle::kItalic ? shade(l.color, -0.12f) : l.color;
          draw_text(l.dl, font, l.size, ImVec2(x, y + (r.style == MdStyle::kCode ? l.size * 0.04f : 0.0f)),
                    color, ink);
        }
        x += w;
      }
    }
    y += line_h;
  }
  return y - origin.y;
}

}  // namespace

float draw_markdown(const ViewContext& ctx, std::string_view text, float wrap_width, float scale,
                    ImU32 color) {
  const std::vector<MdBlock> blocks = parse_markdown(text);
  const float width = wrap_width > 0 ? wrap_width : ImGui::GetContentRegionAvail().x;
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  Layout l{.ctx = &ctx,
           .dl = ImGui::GetWindowDrawList(),
           .size = ImGui::GetFontSize() * scale,
           .color = color != 0 ? color : ctx.palette->text};
  const float h = lay_out(l, blocks, origin, std::max(width, l.size * 4));
  ImGui::Dummy(ImVec2(width, h));
  return h;
}

float measure_markdown(const ViewContext& ctx, std::string_view text, float wrap_width, float scale) {
  Layout l{.ctx = &ctx, .dl = nullptr, .size = ImGui::GetFontSize() * scale, .color = 0};
  return lay_out(l, parse_markdown(text), ImVec2(0, 0), std::max(wrap_width, l.size * 4));
}

}  // namespace dpscope::viz
