// The colour code of dpscope-viz, in one place: what a phase, a stream, a memory category, a
// bucket state and a sample look like, in the normal and the high-contrast (classroom) palette.
// docs/visualizer.md lists the same meanings for students. Used by every view and by the legend.
#pragma once

#include <array>
#include <cstdint>

#include <imgui.h>

#include "dpscope/trace_format/schema.hpp"
#include "dpscope/trace_tools/reader.hpp"
#include "replay/replay_state.hpp"

namespace dpscope::viz {

struct Palette {
  bool high_contrast = false;
  float line_scale = 1.0f;  // thicker lines in presentation mode
  ImU32 background = 0;     // stage and timeline canvas
  ImU32 card = 0;           // a GPU card
  ImU32 card_border = 0;
  ImU32 text = 0;
  ImU32 text_dim = 0;
  ImU32 grid = 0;
  ImU32 playhead = 0;
  ImU32 selection = 0;
  ImU32 link = 0;       // an idle link
  ImU32 forward = 0;    // compute in the forward pass
  ImU32 backward = 0;   // compute in the backward pass
  ImU32 optimizer = 0;  // the optimizer step
  ImU32 data = 0;       // data loading
  ImU32 comm = 0;       // collectives: all-reduce steps, ring transfers
  ImU32 copy = 0;       // copies: host<->GPU, scatter/gather/replicate
  ImU32 reduce = 0;     // reduction kernels (reduce_add)
  ImU32 other = 0;
  ImU32 idle = 0;
  ImU32 merged = 0;  // level-of-detail boxes standing for many events
  std::array<ImU32, kMemoryCategoryCount> memory{};
  std::array<ImU32, 4> bucket{};  // by BucketState
  ImU32 error = 0;
  ImU32 warning = 0;

  static Palette normal();
  static Palette classroom();  // high contrast: dark background, saturated colours, thick lines

  ImU32 phase_color(Phase phase) const;
  ImU32 bucket_color(BucketState state) const { return bucket[static_cast<size_t>(state)]; }
  // The colour of a span or transfer: by category and phase (see docs/visualizer.md).
  ImU32 event_color(const trace::TraceData& trace_data, const trace::Event& e) const;
  // A stable colour per dataset row, so one sample keeps its colour wherever it goes.
  ImU32 sample_color(int64_t index) const;
  // A rank's own colour, where the chunk view shows whose contributions a chunk holds: eight
  // colour-blind-safe colours, repeated from rank 8 on (the rank's number is the second cue).
  ImU32 rank_color(int rank) const;
  // Black or white, whichever reads better on `fill`.
  ImU32 text_on(ImU32 fill) const;
  // ImGui's own widgets in matching colours; `scale` multiplies paddings and rounding.
  void apply_to_imgui(float scale) const;
};

// `color` with its alpha replaced.
ImU32 with_alpha(ImU32 color, float alpha);
// `color` mixed towards white (amount > 0) or black (amount < 0).
ImU32 shade(ImU32 color, float amount);

}  // namespace dpscope::viz
