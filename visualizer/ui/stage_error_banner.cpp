// Stage view, the run-error banner: once the replay reaches the first `error` event of a failed run
// (replay/run_errors.hpp), a box across the top of the stage says which rank stopped, at which
// step, and the reason, word-wrapped — the message the command line printed. While some ranks
// still run it is amber and names them ("Rank 0 stopped at step 2 (ranks 1-3 still running)"); once
// every rank that stops has, it turns red and says "Run failed". The cards make room for it (they are laid
// out below it). It stays from that moment to the end, like the run's last words; before it the stage shows
// the run as usual. Lesson 13 ends on it (a mismatched collective).
#include <algorithm>
#include <cmath>

#include "replay/run_errors.hpp"
#include "ui/draw_util.hpp"
#include "ui/stage_view.hpp"

namespace dpscope::viz {

float StageView::draw_error_banner(const ViewContext& ctx, ImDrawList* dl, ImVec2 origin, ImVec2 size,
                                   bool measure_only, float max_h_px) {
  if (!measure_only) {
    error_banner_ = ImVec4(0, 0, 0, 0);
    error_banner_text_.clear();
  }
  const RunErrors& errors = ctx.model->run_errors();
  const RunErrorMark* first = errors.first_happened(ctx.state->cursor);
  if (first == nullptr) return 0.0f;
  // "Run failed" only once every rank that stops has; before that the banner names who stopped
  // and who still runs (lesson 13: rank 0 stops while ranks 1-3 finish their backward).
  const RunErrorText text = run_error_text(*first, errors.stopped_ranks(ctx.state->cursor),
                                           errors.running_ranks(ctx.state->cursor));
  const Palette& pal = *ctx.palette;
  const float fs = ImGui::GetFontSize();
  ImFont* body = ImGui::GetFont();
  ImFont* bold = ctx.fonts.bold != nullptr ? ctx.fonts.bold : body;
  const float margin = fs * 0.4f;
  const float pad = fs * 0.5f;
  const float width = size.x - 2 * margin;
  const float wrap = width - 2 * pad;
  if (wrap < fs * 4) return 0.0f;
  // At most a third of the stage: a long message is cut rather than squeezing the cards away; in
  // the band between two rows of cards, at most the band (the review found it across two cards'
  // rows at 1280x720 in --present).
  const float reason_h = body->CalcTextSizeA(fs, FLT_MAX, wrap, text.reason.c_str()).y;
  const float min_h = font_px(bold) * 1.2f + fs * 1.2f + pad * 2;
  const float max_h = max_h_px > 0.0f ? std::max(min_h, max_h_px) : std::max(min_h, size.y / 3.0f);
  const float h = std::min(pad * 2 + font_px(bold) * 1.2f + reason_h, max_h);
  if (measure_only) return h + margin;
  const ImVec2 p0(origin.x + margin, origin.y);
  const ImVec2 p1(p0.x + width, p0.y + h);
  const ImU32 fill = text.run_failed ? pal.error : pal.warning;
  const ImU32 ink = pal.text_on(fill);
  dl->AddRectFilled(p0, p1, fill, fs * 0.3f);
  dl->AddRect(p0, p1, shade(fill, -0.4f), fs * 0.3f, 0, 2.0f);
  // Whole lines of the reason only: a line cut in half reads as garbage.
  const float reason_top = p0.y + pad + font_px(bold) * 1.2f;
  const float whole_lines = std::floor(std::max(0.0f, p1.y - pad * 0.5f - reason_top) / fs);
  const ImVec4 clip(p0.x + pad, p0.y, p1.x - pad, reason_top + whole_lines * fs);
  draw_text(dl, bold, font_px(bold), ImVec2(p0.x + pad, p0.y + pad), ink, text.headline, &clip);
  dl->AddText(body, fs, ImVec2(p0.x + pad, p0.y + pad + font_px(bold) * 1.2f), ink, text.reason.c_str(),
              text.reason.c_str() + text.reason.size(), wrap, &clip);
  error_banner_ = ImVec4(p0.x, p0.y, p1.x, p1.y);
  error_banner_text_ = text.headline + ": " + text.reason;
  return h + margin;
}

}  // namespace dpscope::viz
