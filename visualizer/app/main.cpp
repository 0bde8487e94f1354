// dpscope-viz: replay dpscope traces step by step, recorded or live, in a Dear ImGui + GLFW app.
//
//   dpscope-viz [TRACE...] [--follow] [--present]    (TRACE: a file, or a directory of process ranks'
//                                                     rank-K.jsonl files, merged on rank 0's clock)
//   dpscope-viz TRACE --screenshot OUT.png [--seek POS] [--zoom Z] [--size WxH] [--stage-only]
//                                                                        (headless: one frame)
//   dpscope-viz TRACE --bench-frames N [--size WxH]                      (load and frame timings)
//   dpscope-viz --lesson ID [TRACE] [--knob FLAG=VALUE ...]              (a lesson: runs it when no
//                                                                         TRACE is given)
//   dpscope-viz --lesson ID --bench-knobs N                              (knob-change timings)
//   dpscope-viz TRACE --node K                                           (one node of a cluster)
//
// This file reads like the table of contents of the app: parse the command line (CLI11), then
// one of three modes — interactive (GLFW loop), screenshot (offscreen frame to PNG), benchmark
// (window-less frames). Exit codes: 0 ok, 1 a trace or display problem, 2 a usage error.
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <imgui.h>
#include <CLI/CLI.hpp>

#include "app/bench.hpp"
#include "app/fonts.hpp"
#include "app/knob_bench.hpp"
#include "app/lesson_mode.hpp"
#include "app/platform.hpp"
#include "dpscope/base/atomic_file.hpp"
#include "dpscope/base/cli_empty_values.hpp"
#include "dpscope/base/error.hpp"
#include "dpscope/base/file_guard.hpp"
#include "dpscope/base/standard_descriptors.hpp"
#include "dpscope/base/terminal_text.hpp"
#include "dpscope/trace_tools/rank_traces.hpp"
#include "replay/seek.hpp"
#include "ui/viewer.hpp"

namespace dpscope::viz {
namespace {

struct AppOptions {
  std::vector<std::string> traces;
  bool follow = false;
  bool present = false;
  std::string screenshot;   // headless: write one frame here and exit
  std::string stage_boxes;  // with --screenshot: where the stage drew each device (JSON Lines)
  std::string seek;         // fraction, step:N, event:K or t:TIME
  std::string zoom;         // how the timeline opens: step (default), fit, or a duration
  std::string size;         // WxH
  int bench_frames = 0;
  int bench_knobs = 0;       // with --lesson: N changes of each knob each way, timed
  LessonModeOptions lesson;  // --lesson ID: the lesson panel, added with Viewer::add_view()
  bool compare = false;      // --compare: the traces side by side on one time axis
  bool stage_only = false;   // --stage-only: the stage alone, for slides
  int node = -1;             // --node K: a trace of several nodes shows node K alone (-1: all)
};

// --node K: the node-level stage zoomed to node K of the active trace's cluster. Throws
// Error(kUsage) for a trace without several nodes or a node it does not have.
void zoom_to_node(Viewer& viewer, int node) {
  if (node < 0) return;
  const Document* doc = viewer.active_document();
  if (doc == nullptr || doc->model() == nullptr) return;
  const std::optional<TraceClusterInfo>& cluster = doc->model()->data().header.cluster;
  if (!cluster || cluster->nodes < 2)
    throw Error(ErrorKind::kUsage,
                fmt::format("--node {}: {} has no cluster of several nodes (a timing-only run "
                            "across nodes has one: dpscope train --timing-only --devices 16)",
                            node, doc->path().string()));
  if (node >= cluster->nodes)
    throw Error(ErrorKind::kUsage, fmt::format("--node {}: the trace has {} nodes, 0 to {}", node,
                                               cluster->nodes, cluster->nodes - 1));
  viewer.stage().set_zoom_node(node);
}

// The traces of the command line, or the lesson (with its trace, or a run made now).
void open_traces(Viewer& viewer, const AppOptions& o, bool strict) {
  if (!o.lesson.id.empty()) {
    open_lesson(viewer, o.lesson, o.traces.empty() ? std::string() : o.traces.front());
    return;
  }
  for (const std::string& t : o.traces) viewer.open(t, OpenOptions{.strict = strict, .follow = o.follow});
}

constexpr int kExitTraceError = 1;
constexpr int kExitUsage = 2;

int fail(int code, const std::string& message) {
  fmt::print(stderr, "dpscope-viz: error: {}\n", dpscope::printable_line(message));  // one line, no escapes
  return code;
}

// Where the stage drew each device in the screenshot, one JSON object per line, in pixels:
// {"device":"sim:0","x0":24,"y0":110,"x1":484,"y1":256} (for tests and slide tools).
void write_stage_boxes(Viewer& viewer, const std::string& path) {
  const ReplayModel& model = *viewer.active_document()->model();
  std::string out;
  for (const StageView::Box& b : viewer.stage().boxes())
    out += fmt::format(R"({{"device":"{}","x0":{:.0f},"y0":{:.0f},"x1":{:.0f},"y1":{:.0f}}})"
                       "\n",
                       model.devices()[static_cast<size_t>(b.device)].name, b.center.x - b.half.x,
                       b.center.y - b.half.y, b.center.x + b.half.x, b.center.y + b.half.y);
  AtomicFileWriter file(path);
  file.write(out);
  file.commit();
}

// --screenshot and --stage-boxes, checked before any work (base/file_guard.hpp): neither may be a
// trace being read (a file, or a rank file of an opened directory), the lesson file, the other
// output, a directory or a device node.
void check_outputs(const AppOptions& o) {
  OutputGuard guard;
  for (const std::string& t : o.traces) {
    if (path_status(t).kind == FileKind::kDirectory) {
      guard.add_input_dir("the trace directory", t,
                          [](std::string_view name) { return trace::rank_of_file_name(name).has_value(); });
    } else {
      guard.add_input("the trace", t);
    }
  }
  if (o.lesson.id.ends_with(".toml")) guard.add_input("--lesson", o.lesson.id);
  if (!o.screenshot.empty()) guard.add_output("--screenshot", o.screenshot);
  if (!o.stage_boxes.empty()) guard.add_output("--stage-boxes", o.stage_boxes);
  guard.check();
}

// One frame (a few warm-up frames first, so layout settles) rendered offscreen to a PNG.
int run_screenshot(const AppOptions& o) {
  const PixelSize size = o.size.empty() ? PixelSize{1600, 900} : parse_size(o.size);
  const std::optional<SeekSpec> seek = o.seek.empty() || parse_chapter_seek(o.seek)
                                           ? std::nullopt
                                           : std::optional<SeekSpec>(parse_seek(o.seek));
  Viewer viewer(ViewerOptions{
      .present = o.present, .headless = true, .compare = o.compare, .stage_only = o.stage_only});
  if (!o.zoom.empty()) viewer.timeline().set_open_zoom(parse_zoom(o.zoom));
  // Strict: the first malformed line is an error naming the line (a cut-off last line is left out).
  open_traces(viewer, o, /*strict=*/true);
  for (size_t i = 0; i + 1 < viewer.document_count(); ++i) {  // the compared ones besides the active
    const Document* other = viewer.document(i);
    if (!other->error().empty()) return fail(kExitTraceError, other->error());
  }
  const Document* doc = viewer.active_document();
  if (!doc->error().empty()) return fail(kExitTraceError, doc->error());
  if (doc->model() == nullptr) {
    // --follow waits for a trace that is not there yet; one frame cannot: a missing path said "no
    // complete header line yet".
    // A FIFO, an empty directory, a run's missing rank file: the reason the follower waits.
    const bool missing = path_status(doc->path()).kind == FileKind::kMissing;
    if (!missing && !doc->waiting_for().empty()) return fail(kExitTraceError, doc->waiting_for());
    const bool directory = path_status(doc->path()).kind == FileKind::kDirectory;
    return fail(
        kExitTraceError,
        fmt::format("{}: {}", doc->path().string(),
                    missing     ? "no such file or directory (a screenshot of --follow needs a trace that "
                                  "has begun)"
                    : directory ? "no rank's trace (rank-K.jsonl) has a complete header line yet"
                                : "no complete header line yet"));
  }
  if (const std::optional<int> chapter = parse_chapter_seek(o.seek)) {
    seek_to_chapter(viewer, *chapter);
  } else {
    viewer.seek(seek ? resolve_seek(*doc->model(), *seek) : doc->model()->end());
  }
  zoom_to_node(viewer, o.node);

  std::unique_ptr<Platform> platform =
      Platform::create({.width = size.width, .height = size.height, .visible = false});
  // A fixed scale: the same input gives the same pixels whatever the X server's DPI.
  const FontSet fonts = load_fonts(1.0f);
  viewer.set_fonts(fonts.normal, fonts.present);
  OffscreenTarget target(size.width, size.height);
  ImGuiIO& io = ImGui::GetIO();
  // Enough frames for the stage to settle: cards shrink their text by 15 % a frame until every row
  // fits (from 1 to the smallest scale takes 5), and a tree that cannot fit gives way to the ring.
  for (int frame = 0; frame < 12; ++frame) {
    platform->new_frame();
    io.DisplaySize = ImVec2(static_cast<float>(size.width), static_cast<float>(size.height));
    io.DisplayFramebufferScale = ImVec2(1.0f, 1.0f);
    io.MousePos = ImVec2(-FLT_MAX, -FLT_MAX);
    io.DeltaTime = 1.0f / 60.0f;
    viewer.update(std::chrono::steady_clock::now(), 0.0);
    ImGui::NewFrame();
    viewer.draw();
    ImGui::Render();
    target.bind();
    platform->render(size.width, size.height);
  }
  write_framebuffer_png(o.screenshot, size.width, size.height);
  if (!o.stage_boxes.empty()) write_stage_boxes(viewer, o.stage_boxes);
  return 0;
}

int run_interactive(const AppOptions& o) {
  const PixelSize size = o.size.empty() ? PixelSize{1600, 900} : parse_size(o.size);
  const std::optional<SeekSpec> seek = o.seek.empty() || parse_chapter_seek(o.seek)
                                           ? std::nullopt
                                           : std::optional<SeekSpec>(parse_seek(o.seek));
  std::unique_ptr<Platform> platform = Platform::create(
      {.width = size.width, .height = size.height, .visible = true, .fullscreen = o.present});
  FontSet fonts = load_fonts(platform->content_scale());
  Viewer viewer(ViewerOptions{
      .present = o.present, .headless = false, .compare = o.compare, .stage_only = o.stage_only});
  viewer.set_fonts(fonts.normal, fonts.present);
  viewer.take_present_changed();
  if (!o.zoom.empty()) viewer.timeline().set_open_zoom(parse_zoom(o.zoom));
  open_traces(viewer, o, /*strict=*/false);
  if (seek && viewer.active_document() != nullptr && viewer.active_document()->model() != nullptr) {
    try {
      viewer.seek(resolve_seek(*viewer.active_document()->model(), *seek));
    } catch (const Error& e) {
      viewer.report(e.what());
    }
  }
  if (const std::optional<int> chapter = parse_chapter_seek(o.seek)) {
    try {
      seek_to_chapter(viewer, *chapter);
    } catch (const Error& e) {
      viewer.report(e.what());
    }
  }
  try {
    zoom_to_node(viewer, o.node);
  } catch (const Error& e) {
    viewer.report(e.what());
  }
  auto last = std::chrono::steady_clock::now();
  while (!platform->should_close() && !viewer.quit_requested()) {
    // Sleep while nothing moves; live files are polled every 100 ms.
    const Playback* playback = viewer.active_playback();
    const bool animating = playback != nullptr && playback->playing();
    platform->poll_events(!animating, 0.1);
    for (const std::string& path : platform->take_dropped_files())
      viewer.open(path, OpenOptions{.strict = false, .follow = false});
    for (int key : platform->take_function_keys()) {
      if (key == 1) viewer.toggle_help();
      if (key == 11) viewer.toggle_fullscreen();
      if (key == 12) viewer.request_png();
    }
    if (platform->take_content_scale_changed()) {
      platform->destroy_font_texture();
      fonts = load_fonts(platform->content_scale());
      platform->create_font_texture();
      viewer.set_fonts(fonts.normal, fonts.present);
    }
    const auto now = std::chrono::steady_clock::now();
    const double dt = std::chrono::duration<double>(now - last).count();
    last = now;
    viewer.update(now, dt);
    platform->new_frame();
    ImGui::NewFrame();
    viewer.draw();
    ImGui::Render();
    int w = 0;
    int h = 0;
    platform->framebuffer_size(w, h);
    platform->render(w, h);
    if (auto png = viewer.take_png_request()) {
      try {
        write_framebuffer_png(*png, w, h);
        viewer.report(fmt::format("saved {}", png->string()));
      } catch (const Error& e) {
        viewer.report(e.what());
      }
    }
    if (viewer.take_present_changed()) platform->set_fullscreen(viewer.present());
    if (viewer.take_fullscreen_toggle()) platform->set_fullscreen(!platform->fullscreen());
    platform->swap_buffers();
  }
  return 0;
}

int run(int argc, char** argv) {
  hold_closed_standard_descriptors();  // `dpscope-viz ... >&-`: a screenshot must not become stdout
  CLI::App app{"dpscope-viz: replay a dpscope trace step by step (recorded or live)"};
  AppOptions o;
  app.add_option("traces", o.traces,
                 "traces to open: .jsonl files, or directories of process ranks' rank-K.jsonl files");
  app.add_flag("--follow", o.follow, "tail traces that are still being written (live mode)");
  app.add_flag("--present", o.present, "classroom mode: full screen, large fonts, high contrast");
  app.add_option("--screenshot", o.screenshot,
                 "render one frame to this PNG and exit (headless; needs a display or xvfb-run)");
  app.add_option("--seek", o.seek,
                 "where to put the playhead: a fraction 0..1, step:N (from 1), event:K, t:TIME (155.7us: a "
                 "time on the trace clock) or, with --lesson, chapter:N");
  app.add_option("--zoom", o.zoom,
                 "how the timeline opens: step (the step under the playhead, default), fit (the whole "
                 "trace) or a duration around the playhead (500us, 2ms)");
  app.add_option("--stage-boxes", o.stage_boxes,
                 "with --screenshot: also write where the stage drew each device (JSON Lines, pixels)");
  app.add_option("--size", o.size, "window or screenshot size in pixels, WxH (default 1600x900)");
  app.add_option("--bench-frames", o.bench_frames,
                 "time loading and N frames at several zoom levels, print a table, exit")
      ->check(CLI::Range(1, 1000000));
  app.add_option("--bench-knobs", o.bench_knobs,
                 "with --lesson: turn each knob away from its default and back N times, time each change "
                 "(the run, the lesson's text, the trace load), print a table, exit")
      ->check(CLI::Range(1, 1000));
  app.add_flag("--compare", o.compare,
               "two to four traces of the same model (single, DP, DDP) side by side on one time axis, with "
               "the speedup over the one with the fewest GPUs");
  app.add_flag("--stage-only", o.stage_only,
               "the stage (or the comparison) alone, edge to edge: no menu, panels or caption (slides)");
  app.add_option(
         "--node", o.node,
         "with a trace of several nodes (a timing-only run across nodes): the stage shows node K alone "
         "(from 0, as its tiles are labelled; Esc shows every node again)")
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--lesson", o.lesson.id,
                 "a lesson (id, number or .toml file): its panel beside the picture; runs it unless a trace "
                 "of it is given");
  app.add_option("--lessons-dir", o.lesson.lessons_dir, "where the lessons are (default: beside the assets)");
  app.add_option("--knob", o.lesson.knobs, "with --lesson: turn a knob, FLAG=VALUE (repeatable)");
  app.set_version_flag("--version", std::string("dpscope-viz ") + DPSCOPE_VERSION);
  refuse_empty_values(app);
  refuse_unfit_integers(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return fail(kExitUsage, fmt::format("{} (see dpscope-viz --help)", e.what()));
  }
  try {
    check_outputs(o);  // before anything is read, run or written
    if (!o.screenshot.empty() && o.bench_frames > 0)
      return fail(kExitUsage, "--screenshot and --bench-frames cannot be combined");
    if (!o.lesson.knobs.empty() && o.lesson.id.empty()) return fail(kExitUsage, "--knob needs --lesson");
    if (o.compare && (o.traces.size() < 2 || o.traces.size() > 4))
      return fail(kExitUsage, fmt::format("--compare takes 2 to 4 trace files, got {}", o.traces.size()));
    if (o.compare && !o.lesson.id.empty())
      return fail(kExitUsage, "--compare and --lesson cannot be combined");
    if (o.stage_only && o.bench_frames > 0)
      return fail(kExitUsage, "--stage-only and --bench-frames cannot be combined");
    if (o.node >= 0 && (o.compare || o.bench_frames > 0))
      return fail(kExitUsage, "--node shows one node on the stage: it takes no --compare or --bench-frames");
    if (!o.stage_boxes.empty() && o.screenshot.empty())
      return fail(kExitUsage, "--stage-boxes needs --screenshot");
    if (!o.lesson.id.empty() && o.traces.size() > 1) return fail(kExitUsage, "--lesson takes one trace file");
    if (!o.lesson.id.empty() && o.bench_frames > 0)
      return fail(kExitUsage, "--lesson and --bench-frames cannot be combined");
    if (o.bench_knobs > 0 && o.lesson.id.empty()) return fail(kExitUsage, "--bench-knobs needs --lesson");
    if (o.bench_knobs > 0 && (!o.traces.empty() || !o.screenshot.empty() || o.bench_frames > 0))
      return fail(kExitUsage,
                  "--bench-knobs runs the lesson itself: it takes no trace, --screenshot or "
                  "--bench-frames");
    if (!o.lesson.id.empty()) LessonMode check(o.lesson);  // an unknown lesson or knob: exit 2 now
    if (o.bench_knobs > 0) return run_knob_bench(o.lesson, o.bench_knobs);
    if (!o.screenshot.empty() || o.bench_frames > 0) {
      if (o.traces.empty() && o.lesson.id.empty())
        return fail(kExitUsage, fmt::format("{} needs a trace file",
                                            o.bench_frames > 0 ? "--bench-frames" : "--screenshot"));
      if (o.traces.size() > 1 && !(o.compare && o.bench_frames == 0))
        return fail(kExitUsage,
                    "headless modes take one trace file (several with --compare and --screenshot)");
    }
    // Usage errors before any work (and before a window opens).
    if (parse_chapter_seek(o.seek)) {
      if (o.lesson.id.empty()) return fail(kExitUsage, fmt::format("--seek {} needs --lesson", o.seek));
    } else if (!o.seek.empty()) {
      parse_seek(o.seek);
    }
    if (!o.zoom.empty()) parse_zoom(o.zoom);
    if (!o.size.empty()) parse_size(o.size);
    if (o.bench_frames > 0) {
      return run_frame_bench(BenchOptions{.trace = o.traces.front(),
                                          .frames = o.bench_frames,
                                          .size = o.size.empty() ? PixelSize{1920, 1080} : parse_size(o.size),
                                          .present = o.present});
    }
    if (!o.screenshot.empty()) return run_screenshot(o);
    return run_interactive(o);
  } catch (const Error& e) {
    return fail(e.kind() == ErrorKind::kUsage ? kExitUsage : kExitTraceError, e.what());
  } catch (const std::exception& e) {
    return fail(kExitTraceError, e.what());
  }
}

// What a successful run printed (--bench-frames' and --bench-knobs' tables, the screenshot's line)
// is its result: lost, the run fails.
int check_standard_output(int code) {
  if (code != 0) return code;
  try {
    check_standard_output_written();
  } catch (const Error& e) {
    return fail(kExitTraceError, e.what());
  }
  return 0;
}

}  // namespace
}  // namespace dpscope::viz

int main(int argc, char** argv) { return dpscope::viz::check_standard_output(dpscope::viz::run(argc, argv)); }
