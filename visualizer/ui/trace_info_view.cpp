// Trace info view.
#include "ui/trace_info_view.hpp"

#include <fmt/format.h>

#include "ui/draw_util.hpp"

namespace dpscope::viz {

void TraceInfoView::draw(ViewContext& ctx) {
  if (ctx.doc == nullptr) return;
  const Document& doc = *ctx.doc;
  ImGui::TextWrapped("%s", doc.path().string().c_str());
  if (const trace::TraceData* data = doc.data()) {
    ImGui::Text("format %s · clock %s · %zu events", data->version.c_str(), data->header.clock.c_str(),
                data->events.size());
  }
  if (ctx.model != nullptr) {
    const ReplayModel& m = *ctx.model;
    ImGui::Text("%zu lanes · %zu steps · %zu reductions · %zu loss points", m.lanes().size(),
                m.step_marks().size(), m.reductions().size(), m.losses().size());
    ImGui::Text("read %.1f ms · index %.1f ms · frame %.2f ms", doc.read_ms(), doc.index_ms(),
                1000.0 / std::max(1.0, static_cast<double>(ImGui::GetIO().Framerate)));
    if (ImGui::TreeNode("devices and links")) {
      for (const ModelDevice& d : m.devices())
        ImGui::BulletText("%s: %s %s%s", device_label(d).c_str(), d.name.c_str(), d.hardware.c_str(),
                          d.in_header ? "" : " (not in the header)");
      for (const TraceLinkInfo& l : m.data().header.links)
        ImGui::BulletText("%d <-> %d: %s, %.0f GB/s, %.0f ns", l.src, l.dst, l.kind.c_str(),
                          l.bandwidth_bytes_per_s / 1e9, l.latency_ns);
      ImGui::TreePop();
    }
  }
  if (!doc.warnings().empty()) {
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(ctx.palette->warning),
                       "%zu problem(s):", doc.warnings().size());
    for (const std::string& w : doc.warnings()) ImGui::BulletText("%s", w.c_str());
  }
}

}  // namespace dpscope::viz
