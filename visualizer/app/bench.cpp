// Frame benchmark with a window-less ImGui context.
#include "app/bench.hpp"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include <fmt/format.h>
#include <imgui.h>

#include "app/fonts.hpp"
#include "dpscope/base/terminal_text.hpp"
#include "ui/viewer.hpp"

namespace dpscope::viz {

namespace {

double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

struct Row {
  std::string view;
  std::vector<double> cpu_ms;
  size_t boxes = 0;
};

}  // namespace

int run_frame_bench(const BenchOptions& options) {
  const auto load_start = std::chrono::steady_clock::now();
  std::unique_ptr<Document> doc = Document::open(options.trace, OpenOptions{.strict = true});
  const double load_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - load_start).count();
  if (!doc->error().empty()) {
    fmt::print(stderr, "dpscope-viz: error: {}\n", printable_line(doc->error()));  // it quotes the path
    return 1;
  }
  const ReplayModel& model = *doc->model();
  const size_t events = model.event_count();
  const size_t lanes = model.lanes().size();
  const double read_ms = doc->read_ms();
  const double index_ms = doc->index_ms();

  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGuiIO& io = ImGui::GetIO();
  io.IniFilename = nullptr;
  io.DisplaySize = ImVec2(static_cast<float>(options.size.width), static_cast<float>(options.size.height));
  io.DeltaTime = 1.0f / 60.0f;
  const FontSet fonts = load_fonts(1.0f);
  Viewer viewer(ViewerOptions{.present = options.present, .headless = true});
  viewer.set_fonts(fonts.normal, fonts.present);
  viewer.add_document(std::move(doc));
  viewer.seek(model.at_fraction(0.5));

  auto frame = [&]() {
    const double start = thread_cpu_ms();
    viewer.update(std::chrono::steady_clock::now(), 0.0);
    ImGui::NewFrame();
    viewer.draw();
    ImGui::Render();
    return thread_cpu_ms() - start;
  };
  const double span = static_cast<double>(model.end_ns() - model.begin_ns());
  const double mid = static_cast<double>(model.begin_ns()) + span * 0.5;
  std::vector<Row> rows;
  auto measure = [&](const std::string& name, auto setup) {
    Row row{name, {}, 0};
    for (int i = 0; i < 3; ++i) {  // warm-up: layout settles, caches fill
      setup(i);
      frame();
    }
    for (int i = 0; i < options.frames; ++i) {
      setup(i);
      row.cpu_ms.push_back(frame());
    }
    row.boxes = viewer.timeline().boxes_drawn();
    rows.push_back(std::move(row));
  };
  measure("full zoom-out", [&](int) { viewer.timeline().fit(); });
  measure("zoomed to 1/20 of the trace",
          [&](int) { viewer.timeline().set_range(mid - span / 40, mid + span / 40); });
  measure("zoomed in (1/1000 of the trace)",
          [&](int) { viewer.timeline().set_range(mid - span / 2000, mid + span / 2000); });
  measure("zoomed out, playing (cursor moves)", [&](int i) {
    viewer.timeline().fit();
    viewer.seek(model.at_fraction(static_cast<double>(i % 100) / 100.0));
  });
  // The Diagnosis panel's computation (trace::diagnose_ddp) runs once, in the first warm-up frame:
  // the timed frames only draw it (a live trace recomputes it as steps complete, never per frame).
  const DiagnosisCache& diagnosis = viewer.active_document()->diagnosis();
  const std::string diagnosis_line =
      diagnosis.computed()
          ? fmt::format("DDP diagnosis {:.1f} ms ({} computation{}, {} step rows)", diagnosis.last_ms(),
                        diagnosis.computations(), diagnosis.computations() == 1 ? "" : "s",
                        diagnosis.diagnosis().straggler.steps.size())
          : std::string("DDP diagnosis not computed");
  ImGui::DestroyContext();

  fmt::print("dpscope-viz frame benchmark: {}\n", printable_line(options.trace.string()));
  fmt::print("events {} · lanes {} · display {}x{} · load {:.1f} ms (read {:.1f} ms + index {:.1f} ms)\n",
             events, lanes, options.size.width, options.size.height, load_ms, read_ms, index_ms);
  fmt::print("{}\n", diagnosis_line);
  fmt::print("{:<36} {:>7} {:>9} {:>9} {:>9} {:>9} {:>8}\n", "view", "frames", "mean ms", "p50 ms", "p95 ms",
             "max ms", "boxes");
  for (Row& r : rows) {
    std::vector<double> sorted = r.cpu_ms;
    std::sort(sorted.begin(), sorted.end());
    double sum = 0;
    for (double v : sorted) sum += v;
    auto pct = [&](double p) {
      return sorted[std::min(sorted.size() - 1, static_cast<size_t>(p * static_cast<double>(sorted.size())))];
    };
    fmt::print("{:<36} {:>7} {:>9.3f} {:>9.3f} {:>9.3f} {:>9.3f} {:>8}\n", r.view, sorted.size(),
               sum / static_cast<double>(sorted.size()), pct(0.5), pct(0.95), sorted.back(), r.boxes);
  }
  fmt::print("(CPU time of the rendering thread per frame, ImGui::NewFrame to ImGui::Render; no GL)\n");
  return 0;
}

}  // namespace dpscope::viz
