// Stage view, the GPU cards: title and phase, what each stream does, memory by category, the chunks
// of the collective running (whose contributions each holds), then DDP buckets and the dataset rows
// the GPU holds as chips. draw_card() lays out the card and calls one
// function per section; each advances the card's running `y`.
#include <algorithm>
#include <bit>

#include <fmt/format.h>

#include "dpscope/base/format_bytes.hpp"
#include "replay/row_runs.hpp"
#include "ui/draw_util.hpp"
#include "ui/stage_view.hpp"

namespace dpscope::viz {

namespace {

ImVec2 add(ImVec2 a, ImVec2 b) { return ImVec2(a.x + b.x, a.y + b.y); }
ImVec2 sub(ImVec2 a, ImVec2 b) { return ImVec2(a.x - b.x, a.y - b.y); }
std::string stream_name(StreamKind s) { return to_string(s); }

}  // namespace

// What every section of one card needs: where to draw, with which fonts, and how far down it is.
struct StageView::CardFrame {
  ImDrawList* dl = nullptr;
  const ModelDevice* dev = nullptr;
  const DeviceSnapshot* ds = nullptr;
  ImFont* body = nullptr;
  ImFont* bold = nullptr;
  ImFont* small = nullptr;
  // Text sizes, scaled by the stage's card scale (cards shrink their text rather than drop rows).
  float fs = 0;
  float small_fs = 0;
  float bold_fs = 0;
  bool clipped = false;  // a row did not fit
  ImVec2 r0, r1;         // the card's corners
  float pad = 0;
  ImVec4 clip;
  float inner_w = 0;
  float y = 0;  // top of the next section
};

StageView::CardFit StageView::draw_card(ViewContext& ctx, ImDrawList* dl, const Box& box) {
  const Palette& pal = *ctx.palette;
  const ReplayModel& model = *ctx.model;
  CardFrame f;
  f.dl = dl;
  f.dev = &model.devices()[box.device];
  f.ds = &ctx.state->devices[box.device];
  f.fs = ImGui::GetFontSize() * card_scale_;
  f.body = ImGui::GetFont();
  f.bold = ctx.fonts.bold != nullptr ? ctx.fonts.bold : f.body;
  f.small = ctx.fonts.small != nullptr ? ctx.fonts.small : f.body;
  f.small_fs = font_px(f.small) * card_scale_;
  f.bold_fs = font_px(f.bold) * card_scale_;
  card_text_px_ = f.fs;
  f.r0 = sub(box.center, box.half);
  f.r1 = add(box.center, box.half);
  f.pad = f.fs * 0.5f;

  const StreamActivity* main_activity = nullptr;
  for (const StreamActivity& a : f.ds->activity)
    if (a.event != kNoEvent) {
      main_activity = &a;
      break;
    }
  const ImU32 border = main_activity != nullptr
                           ? pal.event_color(model.data(), model.event(main_activity->event))
                           : pal.card_border;
  dl->AddRectFilled(f.r0, f.r1, pal.card, 8.0f);
  dl->AddRect(f.r0, f.r1, border, 8.0f, 0, (main_activity != nullptr ? 3.0f : 1.0f) * pal.line_scale);
  f.clip = ImVec4(f.r0.x + f.pad, f.r0.y, f.r1.x - f.pad, f.r1.y - f.pad * 0.5f);
  f.inner_w = f.r1.x - f.r0.x - 2 * f.pad;
  f.y = f.r0.y + f.pad * 0.8f;
  draw_card_title(ctx, f);
  draw_card_streams(ctx, f);
  draw_card_memory(ctx, f);
  draw_card_chunks(ctx, f);
  draw_card_chips(ctx, f, box);
  // Room to spare: at least three rows below the last one.
  return CardFit{.clipped = f.clipped, .roomy = f.r1.y - f.y >= f.fs * 3.5f};
}

void StageView::draw_card_title(const ViewContext& ctx, CardFrame& f) {
  const Palette& pal = *ctx.palette;
  const ModelDevice& dev = *f.dev;
  const DeviceSnapshot& ds = *f.ds;
  // Title: "GPU 0", rank and device name, and the phase as a pill on the right.
  const std::string title = device_label(dev);
  draw_text(f.dl, f.bold, f.bold_fs, ImVec2(f.r0.x + f.pad, f.y), pal.text, title, &f.clip);
  const float title_w = text_size(f.bold, f.bold_fs, title).x;
  const std::string sub_title = dev.rank >= 0 ? fmt::format("rank {} · {}", dev.rank, dev.name) : dev.name;
  // The rank's colour, as the chunk row's stripes use it.
  float sub_x = f.r0.x + f.pad + title_w + f.fs * 0.6f;
  if (dev.rank >= 0 && ds.chunks.coll >= 0) {
    const float sw = f.small_fs * 0.8f;
    const float sy = f.y + (f.bold_fs - sw) * 0.6f;
    f.dl->AddRectFilled(ImVec2(sub_x, sy), ImVec2(sub_x + sw, sy + sw), pal.rank_color(dev.rank), 2.0f);
    sub_x += sw + f.fs * 0.3f;
  }
  float title_right = f.r1.x - f.pad;
  // The header names the reference rank's step; a rank in another step says which (lesson 13: rank
  // 0 stopped in step 2 while the others run step 3), so its phase and bucket chips are read as that
  // step's. A card too narrow for both keeps the step (the pill keeps the phase's colour, and the
  // compute row names it), then the phase alone.
  std::vector<std::string> pills;
  if (ds.step >= 0 && ds.step != ctx.state->step) {
    pills.push_back(step_phase_label(ds.step, ds.phase));
    if (ds.phase != Phase::kNone) pills.push_back(step_phase_label(ds.step, Phase::kNone));
  }
  if (ds.phase != Phase::kNone) pills.push_back(to_string(ds.phase));
  for (const std::string& pill : pills) {
    const ImVec2 ps = text_size(f.small, f.small_fs, pill);
    const ImVec2 p1(f.r1.x - f.pad, f.y + ps.y + 4);
    const ImVec2 p0(p1.x - ps.x - 10, f.y);
    if (p0.x <= f.r0.x + f.pad + title_w) continue;
    const ImU32 fill = ds.phase != Phase::kNone ? pal.phase_color(ds.phase) : pal.card_border;
    f.dl->AddRectFilled(p0, p1, fill, 4.0f);
    draw_text(f.dl, f.small, f.small_fs, ImVec2(p0.x + 5, p0.y + 2), pal.text_on(fill), pill);
    title_right = p0.x - f.fs * 0.3f;
    card_pills_[static_cast<size_t>(f.ds - ctx.state->devices.data())] = pill;
    break;
  }
  const ImVec4 sub_clip(f.r0.x, f.r0.y, title_right, f.r1.y);
  draw_text(f.dl, f.small, f.small_fs, ImVec2(sub_x, f.y + (f.bold_fs - f.small_fs) * 0.7f), pal.text_dim,
            sub_title, &sub_clip);
  f.y += f.bold_fs * 1.35f;
}

void StageView::draw_card_streams(ViewContext& ctx, CardFrame& f) {
  const Palette& pal = *ctx.palette;
  const ReplayModel& model = *ctx.model;
  const DeviceSnapshot& ds = *f.ds;
  // What each stream does now.
  const float row = f.fs * 1.2f;
  for (const StreamActivity& a : ds.activity) {
    if (f.y + row > f.r1.y) {
      f.clipped = true;
      break;
    }
    const bool busy = a.event != kNoEvent;
    const ImU32 color = busy ? pal.event_color(model.data(), model.event(a.event)) : pal.idle;
    f.dl->AddRectFilled(ImVec2(f.r0.x + f.pad, f.y + f.fs * 0.15f),
                        ImVec2(f.r0.x + f.pad + f.fs * 0.8f, f.y + f.fs * 0.95f), color, 2.0f);
    // On a narrow card (8 GPUs at 1280x720 in --present) the stream's name gives its room to what
    // runs there, which names itself ("all-reduce ring step 3/14", "copy H2D 1.00 MiB").
    const bool narrow = f.inner_w < f.fs * 13.0f;
    if (!narrow) {
      draw_text(f.dl, f.small, f.small_fs,
                ImVec2(f.r0.x + f.pad + f.fs * 1.2f, f.y + (f.fs - f.small_fs) * 0.5f), pal.text_dim,
                stream_name(a.stream), &f.clip);
    }
    const float label_x = f.r0.x + f.pad + f.fs * 1.2f + (narrow ? 0.0f : f.fs * 4.2f);
    std::string label = busy ? a.text : "idle";
    // A collective that waits for missing ranks keeps whom it waits for when its row is too narrow
    // for "all_reduce: waiting for ranks 1-3" (lesson 13 at 1280x720 in --present).
    if (busy && a.event == ds.stalled.event && !ds.stalled.waiting_for.empty() &&
        f.body->CalcTextSizeA(f.fs, FLT_MAX, 0.0f, label.c_str()).x > f.r1.x - f.pad - label_x)
      label = "waiting for " + rank_list_label(ds.stalled.waiting_for);
    draw_text(f.dl, f.body, f.fs, ImVec2(label_x, f.y), busy ? pal.text : pal.text_dim, label, &f.clip);
    if (!ctx.headless && busy && ImGui::IsMouseHoveringRect(ImVec2(f.r0.x, f.y), ImVec2(f.r1.x, f.y + row)) &&
        ImGui::IsWindowHovered()) {
      ImGui::SetTooltip("%s\n(click to inspect)", describe_event(model, a.event).c_str());
      if (ImGui::IsMouseClicked(0)) ctx.select(a.event);
    }
    f.y += row;
  }
  f.y += f.fs * 0.15f;
}

void StageView::draw_card_memory(const ViewContext& ctx, CardFrame& f) {
  const Palette& pal = *ctx.palette;
  const ReplayModel& model = *ctx.model;
  const ModelDevice& dev = *f.dev;
  const DeviceSnapshot& ds = *f.ds;
  // Memory by category on one line, on a scale shared by all cards (the largest use in the trace).
  // The row is there from the trace's start, so the card does not change shape at the first report.
  const bool row = ds.memory_known || ds.memory_pending;
  if (row && f.y + f.fs * 1.2f > f.r1.y) f.clipped = true;
  if (row && f.y + f.fs * 1.2f <= f.r1.y) {
    const uint64_t used = ds.memory_in_use_bytes();
    const float label_w = text_size(f.small, f.small_fs, "memory").x + f.fs * 0.5f;
    const std::string amount = ds.memory_known ? format_bytes(used) : "not reported yet";
    const float amount_w = text_size(f.small, f.small_fs, amount).x + f.fs * 0.5f;
    draw_text(f.dl, f.small, f.small_fs, ImVec2(f.r0.x + f.pad, f.y + (f.fs - f.small_fs) * 0.5f),
              pal.text_dim, "memory", &f.clip);
    const float bar_x0 = f.r0.x + f.pad + label_w;
    const float bar_w = std::max(f.inner_w - label_w - amount_w, f.fs * 2.0f);
    const float bar_h = f.fs * 0.75f;
    const float by = f.y + (f.fs - bar_h) * 0.5f + 1;
    const double scale = static_cast<double>(std::max<uint64_t>(model.peak_memory_bytes(), 1)) * 1.05;
    f.dl->AddRectFilled(ImVec2(bar_x0, by), ImVec2(bar_x0 + bar_w, by + bar_h), with_alpha(pal.idle, 0.5f),
                        2.0f);
    float x = bar_x0;
    for (int c = 0; c < kMemoryCategoryCount; ++c) {
      const float seg = static_cast<float>(static_cast<double>(ds.memory_bytes[c]) / scale) * bar_w;
      if (seg <= 0.0f) continue;
      f.dl->AddRectFilled(ImVec2(x, by), ImVec2(std::min(x + seg, bar_x0 + bar_w), by + bar_h),
                          pal.memory[c]);
      x += seg;
    }
    f.dl->AddRect(ImVec2(bar_x0, by), ImVec2(bar_x0 + bar_w, by + bar_h), pal.grid, 2.0f);
    draw_text(f.dl, f.small, f.small_fs,
              ImVec2(bar_x0 + bar_w + f.fs * 0.4f, f.y + (f.fs - f.small_fs) * 0.5f), pal.text, amount,
              &f.clip);
    if (!ctx.headless && ds.memory_known && ImGui::IsWindowHovered() &&
        ImGui::IsMouseHoveringRect(ImVec2(f.r0.x, f.y), ImVec2(f.r1.x, f.y + f.fs))) {
      std::string tip = fmt::format("memory on {}: {} in use", dev.name, format_bytes(used));
      if (ds.capacity_bytes > 0) tip += fmt::format(" of {}", format_bytes(ds.capacity_bytes));
      for (int c = 0; c < kMemoryCategoryCount; ++c)
        tip += fmt::format("\n  {}: {}", to_string(static_cast<MemoryCategory>(c)),
                           format_bytes(ds.memory_bytes[c]));
      tip += "\nbar scale: the largest use of any GPU in this trace";
      ImGui::SetTooltip("%s", tip.c_str());
    }
    f.y += f.fs * 1.3f;
  }
}

void StageView::draw_card_chunks(const ViewContext& ctx, CardFrame& f) {
  const Palette& pal = *ctx.palette;
  const ReplayModel& model = *ctx.model;
  const ChunkSnapshot& k = f.ds->chunks;
  // One box per chunk of the buffer being reduced, split into one stripe per rank: a stripe in the
  // rank's colour means this GPU holds that rank's contribution to the chunk. Reduce-scatter fills
  // one box per GPU; all-gather copies the full boxes around; the stage and the ÷N follow.
  if (k.coll < 0 || k.held.empty()) return;
  // As tall as a chip row, or taller when the card has room to spare (a collective benchmark has
  // no buckets or data rows, and the chunks are the whole story).
  const bool chips_below = f.ds->samples != nullptr || !ctx.state->buckets.empty();
  const float spare = f.r1.y - f.pad - f.y - (chips_below ? f.small_fs * 3.0f : 0.0f);
  const float box_h = std::clamp(spare * 0.7f, f.small_fs * 1.3f, f.fs * 4.0f);
  if (f.y + box_h > f.r1.y - f.pad * 0.5f) {
    f.clipped = true;
    return;
  }
  // An all-to-all's boxes are the blocks this GPU receives, one from each rank.
  const std::string label = k.exchange ? "received" : "chunks";
  const float label_w = text_size(f.small, f.small_fs, label).x + f.fs * 0.35f;
  std::string stage = k.stage;
  if (k.averaged) stage += fmt::format("  \u00f7{}", k.divisor);
  const float stage_w = text_size(f.small, f.small_fs, stage).x + f.fs * 0.5f;
  // Where the words go: beside the boxes; the stage's name under them when beside them it would
  // leave each box too narrow to show its stripes; or both on a line above, the boxes taking the
  // card's whole width (8 GPUs at 1280x720 in --present: narrow cards).
  const float chunk_count = static_cast<float>(k.held.size());
  const float line_h = f.small_fs * 1.3f;
  const bool room_for_a_line = f.y + box_h + line_h <= f.r1.y - f.pad * 0.5f;
  enum class Words { kBeside, kStageBelow, kAbove } words = Words::kBeside;
  if ((f.inner_w - label_w - stage_w) / chunk_count < f.fs * 2.5f && room_for_a_line)
    words = (f.inner_w - label_w) / chunk_count >= f.fs * 2.0f ? Words::kStageBelow : Words::kAbove;
  const ImVec4 clip(f.r0.x, f.r0.y, f.r1.x - f.pad, f.r1.y);
  const ImU32 stage_color = k.complete() ? pal.text : pal.text_dim;
  float top = f.y;
  float x0 = std::round(f.r0.x + f.pad + label_w);
  float room = f.inner_w - label_w - (words == Words::kBeside ? stage_w : 0.0f);
  if (words == Words::kAbove) {
    // The stage's name says what the boxes are ("reduce-scatter step 2/14"): it takes the line.
    draw_text(f.dl, f.small, f.small_fs, ImVec2(f.r0.x + f.pad, top), stage_color, stage, &clip);
    top += line_h;
    x0 = std::round(f.r0.x + f.pad);
    room = f.inner_w;
  } else {
    draw_text(f.dl, f.small, f.small_fs, ImVec2(f.r0.x + f.pad, top + (box_h - f.small_fs) * 0.5f),
              pal.text_dim, label);
  }
  const size_t n = k.members.size();
  // Two rows of boxes when one row would leave them too narrow for their stripes.
  const int rows =
      words == Words::kAbove && room / chunk_count < f.fs * 1.6f && box_h >= f.small_fs * 2.4f ? 2 : 1;
  const size_t per_row = (k.held.size() + static_cast<size_t>(rows) - 1) / static_cast<size_t>(rows);
  const float row_h = rows == 1 ? box_h : std::floor((box_h - 3.0f) / 2.0f);
  // Whole-pixel stripes of one width: every rank's share of a box looks the same.
  const float stripe =
      std::max(1.0f, std::floor(std::clamp(room / static_cast<float>(per_row) - 3.0f,
                                           words == Words::kAbove ? 1.0f : f.fs * 0.9f, f.fs * 6.0f) /
                                static_cast<float>(n)));
  const float box_w = stripe * static_cast<float>(n);
  float x = x0;
  float y = top;
  for (size_t ch = 0; ch < k.held.size(); ++ch) {
    if (ch > 0 && ch % per_row == 0) {
      x = x0;
      y += row_h + 3.0f;
    }
    if (x + box_w > f.r1.x - f.pad) break;
    const ImVec2 b0(x, y);
    const ImVec2 b1(x + box_w, y + row_h);
    f.dl->AddRectFilled(b0, b1, with_alpha(pal.idle, 0.6f), 2.0f);
    const bool one_owner = !k.reduction && std::popcount(k.held[ch]) == 1;
    for (size_t m = 0; m < n; ++m) {
      if ((k.held[ch] >> m & 1u) == 0) continue;
      const int rank = model.devices()[static_cast<size_t>(k.members[m])].rank;
      // A copied chunk is one owner's data, not a sum: the whole box in the owner's colour.
      const float sx0 = one_owner ? x : x + stripe * static_cast<float>(m);
      const float sx1 = one_owner ? x + box_w : x + stripe * static_cast<float>(m + 1);
      f.dl->AddRectFilled(ImVec2(sx0, y), ImVec2(sx1, y + row_h), pal.rank_color(rank));
    }
    const int have = std::popcount(k.held[ch]);
    const bool full = k.reduction ? have == static_cast<int>(n) : have > 0;
    f.dl->AddRect(b0, b1, full ? pal.text : pal.card_border, 2.0f, 0, (full ? 2.0f : 1.0f) * pal.line_scale);
    if (!ctx.headless && ImGui::IsWindowHovered() && ImGui::IsMouseHoveringRect(b0, b1)) {
      std::string ranks;
      for (size_t m = 0; m < n; ++m)
        if ((k.held[ch] >> m & 1u) != 0)
          ranks += fmt::format("{}{}", ranks.empty() ? "" : ", ",
                               model.devices()[static_cast<size_t>(k.members[m])].rank);
      if (k.exchange && ch < n)
        ImGui::SetTooltip("block %zu of %zu on %s (collective #%lld)\nrank %d's block for this GPU: %s",
                          ch + 1, k.held.size(), f.dev->name.c_str(), static_cast<long long>(k.coll),
                          model.devices()[static_cast<size_t>(k.members[ch])].rank,
                          have > 0 ? "here" : "not arrived yet");
      else
        ImGui::SetTooltip("chunk %zu of %zu on %s (collective #%lld)\n%s of ranks %s (%d of %zu)", ch + 1,
                          k.held.size(), f.dev->name.c_str(), static_cast<long long>(k.coll),
                          k.reduction ? "holds the contributions" : "holds the block", ranks.c_str(), have,
                          n);
    }
    x += box_w + 3.0f;
  }
  if (words == Words::kBeside)
    draw_text(f.dl, f.small, f.small_fs, ImVec2(x + f.fs * 0.3f, top + (box_h - f.small_fs) * 0.5f),
              stage_color, stage, &clip);
  if (words == Words::kStageBelow)
    draw_text(f.dl, f.small, f.small_fs, ImVec2(x0, top + box_h + 2.0f), stage_color, stage, &clip);
  f.y = top + box_h + f.fs * 0.3f + (words == Words::kStageBelow ? f.small_fs * 1.2f : 0.0f);
}

void StageView::draw_card_chips(const ViewContext& ctx, CardFrame& f, const Box& box) {
  const Palette& pal = *ctx.palette;
  const ReplayState& state = *ctx.state;
  const DeviceSnapshot& ds = *f.ds;
  // One flowing row: DDP buckets (coloured by state, filled as gradients become ready), then the
  // dataset rows this GPU holds as chips coloured by row.
  const float chip_h = f.small_fs * 1.3f;
  float x = f.r0.x + f.pad;
  auto next_row = [&]() {
    x = f.r0.x + f.pad;
    f.y += chip_h + 3;
  };
  auto fits = [&](float w) {
    if (x + w > f.r1.x - f.pad) next_row();
    return f.y + chip_h <= f.r1.y - f.pad * 0.5f;
  };
  auto label = [&](const std::string& text) {
    const float w = text_size(f.small, f.small_fs, text).x + f.fs * 0.35f;
    if (!fits(w)) return false;
    draw_text(f.dl, f.small, f.small_fs, ImVec2(x, f.y + (chip_h - f.small_fs) * 0.5f), pal.text_dim, text);
    x += w;
    return true;
  };
  bool room = true;
  const auto bucket_col = std::find(state.bucket_devices.begin(), state.bucket_devices.end(), box.device);
  const bool has_chips =
      (bucket_col != state.bucket_devices.end() && !state.buckets.empty()) || ds.samples != nullptr;
  if (has_chips && f.y + chip_h > f.r1.y - f.pad * 0.5f) f.clipped = true;
  if (bucket_col != state.bucket_devices.end() && !state.buckets.empty()) {
    const size_t col = static_cast<size_t>(bucket_col - state.bucket_devices.begin());
    room = label("buckets");
    for (const BucketSnapshot& b : state.buckets) {
      if (!room || !(room = fits(chip_h))) break;
      const BucketState st = b.state[col];
      const ImVec2 b0(x, f.y);
      const ImVec2 b1(x + chip_h, f.y + chip_h);
      f.dl->AddRectFilled(b0, b1, pal.bucket_color(BucketState::kPending), 3.0f);
      float fill = 1.0f;
      if (st == BucketState::kPending)
        fill = b.params.empty()
                   ? 0.0f
                   : static_cast<float>(b.ready_params[col]) / static_cast<float>(b.params.size());
      const ImU32 fill_color =
          st == BucketState::kPending ? pal.bucket_color(BucketState::kReady) : pal.bucket_color(st);
      if (fill > 0) f.dl->AddRectFilled(ImVec2(b0.x, b1.y - chip_h * fill), b1, fill_color, 3.0f);
      f.dl->AddRect(b0, b1, pal.card_border, 3.0f);
      draw_text_centered(f.dl, f.small, f.small_fs, ImVec2(x + chip_h * 0.5f, f.y + chip_h * 0.5f),
                         pal.text_on(fill >= 0.5f ? fill_color : pal.bucket_color(BucketState::kPending)),
                         fmt::format("{}", b.id));
      x += chip_h + 3;
    }
    x += f.fs * 0.6f;
  }
  if (room && ds.samples != nullptr) {
    const std::vector<int64_t>& rows = *ds.samples;
    const bool current = ds.samples_step == ds.step;
    // The same rows as an earlier step although the run shuffles: sampler.set_epoch() was not
    // called, and every epoch replays the first. Said where it bites, in the warning colour.
    const bool repeated = ds.samples_repeat_of >= 0;
    if (repeated) {
      const std::string text =
          fmt::format("same rows as step {}: set_epoch() not called?", shown_count(ds.samples_repeat_of));
      const float w = text_size(f.small, f.small_fs, text).x + f.fs * 0.35f;
      if ((room = fits(w))) {
        draw_text(f.dl, f.small, f.small_fs, ImVec2(x, f.y + (chip_h - f.small_fs) * 0.5f), pal.warning,
                  text);
        x += w;
      }
    }
    // Many rows (DataParallel's chunk of a 256-row batch, a strided sampler's share) read as
    // ranges: one chip per run, "0–63" or "1–253 every 4th", with a strip of the rows' colours,
    // after a shorter label ("512 rows"), so that label and ranges share the buckets' line.
    const std::vector<RowRun> runs = row_runs(rows);
    const bool as_runs = rows.size() > kMaxRowChips && runs.size() * 2 <= rows.size();
    room = room && label(current ? (as_runs ? fmt::format("{} rows", rows.size())
                                            : fmt::format("data ({} rows)", rows.size()))
                                 : fmt::format("data from step {}", shown_count(ds.samples_step)));
    if (as_runs) {
      for (const RowRun& run : runs) {
        const std::string text = format_row_run(run);
        const float w = text_size(f.small, f.small_fs, text).x + 10.0f;
        if (!room || !(room = fits(w))) break;
        const ImVec2 a(x, f.y);
        const ImVec2 b(x + w, f.y + chip_h);
        f.dl->AddRectFilled(a, b, pal.card, 3.0f);
        // The strip: the colours of up to 16 rows spread over the run.
        const int64_t slivers = std::min<int64_t>(run.count, 16);
        const float strip_h = std::max(2.0f, chip_h * 0.18f);
        for (int64_t k = 0; k < slivers; ++k) {
          const int64_t row =
              run.first + (run.count - 1) * k / std::max<int64_t>(slivers - 1, 1) * run.stride;
          const float x0 = a.x + w * static_cast<float>(k) / static_cast<float>(slivers);
          const float x1 = a.x + w * static_cast<float>(k + 1) / static_cast<float>(slivers);
          const ImU32 c = pal.sample_color(row);
          f.dl->AddRectFilled(ImVec2(x0, b.y - strip_h), ImVec2(x1, b.y), current ? c : with_alpha(c, 0.35f));
        }
        f.dl->AddRect(a, b, repeated ? pal.warning : pal.text_dim, 3.0f, 0, repeated ? 2.0f : 1.0f);
        draw_text_centered(f.dl, f.small, f.small_fs, ImVec2(x + w * 0.5f, f.y + (chip_h - strip_h) * 0.5f),
                           current ? pal.text : pal.text_dim, text);
        x += w + 3;
      }
      return;
    }
    int64_t widest = 0;
    for (int64_t r : rows) widest = std::max(widest, r);
    const float chip_w =
        std::max(text_size(f.small, f.small_fs, fmt::format("{}", widest)).x + 8.0f, chip_h * 1.2f);
    size_t shown = 0;
    ImVec2 last_chip(-1, -1);
    for (int64_t r : rows) {
      if (!room || !(room = fits(chip_w))) break;
      const ImU32 fill = current ? pal.sample_color(r) : with_alpha(pal.sample_color(r), 0.35f);
      f.dl->AddRectFilled(ImVec2(x, f.y), ImVec2(x + chip_w, f.y + chip_h), fill, 3.0f);
      if (repeated)
        f.dl->AddRect(ImVec2(x, f.y), ImVec2(x + chip_w, f.y + chip_h), pal.warning, 3.0f, 0, 2.0f);
      draw_text_centered(f.dl, f.small, f.small_fs, ImVec2(x + chip_w * 0.5f, f.y + chip_h * 0.5f),
                         pal.text_on(fill), fmt::format("{}", r));
      last_chip = ImVec2(x, f.y);
      x += chip_w + 3;
      ++shown;
    }
    if (shown < rows.size() && shown > 0) {
      // No room for every chip: the last one shown becomes "+N", the number not shown.
      const std::string more = fmt::format("+{}", rows.size() - shown + 1);
      const ImVec2 a = last_chip;
      const ImVec2 b(a.x + chip_w, a.y + chip_h);
      f.dl->AddRectFilled(a, b, pal.card, 3.0f);
      f.dl->AddRect(a, b, pal.text_dim, 3.0f);
      draw_text_centered(f.dl, f.small, f.small_fs, ImVec2(a.x + chip_w * 0.5f, a.y + chip_h * 0.5f),
                         pal.text, more);
    }
  }
}

}  // namespace dpscope::viz
