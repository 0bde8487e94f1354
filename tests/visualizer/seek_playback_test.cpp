// --seek and --size parsing, seek resolution with its error messages, time formatting, and the
// Playback logic (speed, end of trace, live edge).
#include <gtest/gtest.h>

#include "dpscope/base/error.hpp"
#include "dpscope/trace_tools/reader.hpp"
#include "replay/playback.hpp"
#include "replay/replay_state.hpp"
#include "replay/run_info.hpp"
#include "replay/seek.hpp"
#include "trace_fixtures.hpp"

namespace dpscope::viz {
namespace {

std::string usage_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUsage);
    return e.what();
  }
  ADD_FAILURE() << "expected a usage error";
  return "";
}

TEST(StepPhaseLabel, NamesTheStepAndAPhaseOnlyWhereThereIsOne) {
  // Steps count from 1 on screen (the trace's "step":3 is the fourth step), as in the narration.
  EXPECT_EQ(step_phase_label(3, Phase::kBackward), "step 4 · backward");
  EXPECT_EQ(step_phase_label(3, Phase::kNone), "step 4");  // never "step 4 · none"
  EXPECT_EQ(step_phase_label(0, Phase::kForward), "step 1 · forward");
  EXPECT_EQ(step_position_label(1, 0, 2), "step 2 of 3");
  EXPECT_EQ(step_position_label(0, 0, 0), "step 1");
  EXPECT_EQ(step_position_label(4, 3, 5), "step 5 of 4–6");
  EXPECT_EQ(step_position_label(-1, 0, 2), "set-up");
  EXPECT_EQ(step_phase_label(-1, Phase::kForward), "forward");
  EXPECT_EQ(step_phase_label(-1, Phase::kNone), "set-up");
}

TEST(ParseSeek, AcceptsFractionsStepsAndEvents) {
  EXPECT_EQ(parse_seek("0.25").kind, SeekSpec::Kind::kFraction);
  EXPECT_DOUBLE_EQ(parse_seek("0.25").fraction, 0.25);
  EXPECT_DOUBLE_EQ(parse_seek("1").fraction, 1.0);
  EXPECT_DOUBLE_EQ(parse_seek("0").fraction, 0.0);
  EXPECT_EQ(parse_seek("step:3").kind, SeekSpec::Kind::kStep);
  EXPECT_EQ(parse_seek("step:3").step, 2);  // steps count from 1 on screen: step:3 is "step":2
  EXPECT_EQ(parse_seek("event:120").kind, SeekSpec::Kind::kEvent);
  EXPECT_EQ(parse_seek("event:120").event, 120);
  EXPECT_EQ(parse_seek("t:155.7us").kind, SeekSpec::Kind::kTime);
  EXPECT_EQ(parse_seek("t:155.7us").t_ns, 155700);
  EXPECT_EQ(parse_seek("t:2ms").t_ns, 2000000);
  EXPECT_EQ(parse_seek("t:0ns").t_ns, 0);
}

TEST(ParseSeek, RejectsAnythingElseNamingTheTextAndTheForms) {
  for (const char* bad : {"1.5", "-0.1", "half", "", "step:", "step:x", "step:-1", "step:0", "event:1.5",
                          "nan", "0.5x", "t:", "t:5", "t:xus", "t:-1us"}) {
    const std::string msg = usage_error([&] { parse_seek(bad); });
    EXPECT_NE(msg.find(fmt::format("--seek '{}'", bad)), std::string::npos) << msg;
    EXPECT_NE(msg.find("step:N, event:K or t:TIME"), std::string::npos) << msg;
  }
  EXPECT_NE(usage_error([] { parse_seek("t:5"); }).find("the time has no unit"), std::string::npos);
}

TEST(ParseZoom, AcceptsStepFitAndDurations) {
  EXPECT_EQ(parse_zoom("step").kind, ZoomSpec::Kind::kStep);
  EXPECT_EQ(parse_zoom("fit").kind, ZoomSpec::Kind::kFit);
  EXPECT_EQ(parse_zoom("500us").kind, ZoomSpec::Kind::kDuration);
  EXPECT_EQ(parse_zoom("500us").duration_ns, 500000);
  EXPECT_EQ(parse_zoom("2ms").duration_ns, 2000000);
  EXPECT_EQ(parse_zoom("1.5s").duration_ns, 1500000000);
  EXPECT_EQ(parse_zoom("800ns").duration_ns, 800);
}

TEST(ParseZoom, RejectsAnythingElseNamingTheTextAndTheForms) {
  const std::pair<const char*, const char*> cases[] = {{"5", "no unit"},
                                                       {"", "no unit"},
                                                       {"wide", "no unit"},
                                                       {"xms", "not a number"},
                                                       {"-2ms", "the duration is outside"},
                                                       {"1ns", "the duration is outside"},
                                                       {"nans", "not a number"},
                                                       {"ms", "no unit"}};
  for (const auto& [bad, why] : cases) {
    const std::string msg = usage_error([&] { parse_zoom(bad); });
    EXPECT_NE(msg.find(fmt::format("--zoom '{}': {}", bad, why)), std::string::npos) << msg;
    EXPECT_NE(msg.find("expected step, fit or a duration"), std::string::npos) << msg;
  }
}

// The review found the timeline opening zoomed out to the whole run (a 6-step ring 25 px wide): it
// opens on the training step under the playhead, and a duration centres on the playhead.
TEST(ZoomRange, OpensOnTheStepUnderThePlayhead) {
  const auto path = testing::scratch_dir() / "zoom.jsonl";
  testing::write_ddp_trace(path, 2, 4);
  const trace::TraceData data = trace::read_trace(path, {.strict = true});
  const ReplayModel model(data);
  ASSERT_EQ(model.last_step(), 3);
  const auto [a, b] = model.step_window(2);
  const auto [t0, t1] = zoom_range(model, parse_zoom("step"), model.end(), 2);
  EXPECT_NEAR(t0, static_cast<double>(a) - 0.01 * static_cast<double>(b - a), 1.0);
  EXPECT_NEAR(t1, static_cast<double>(b) + 0.01 * static_cast<double>(b - a), 1.0);
  EXPECT_LT(t1 - t0, 0.5 * static_cast<double>(model.end_ns() - model.begin_ns())) << "one step of four";
  const auto [f0, f1] = zoom_range(model, parse_zoom("fit"), model.end(), 2);
  EXPECT_LE(f0, static_cast<double>(model.begin_ns()));
  EXPECT_GE(f1, static_cast<double>(model.end_ns()));
  const Cursor mid = model.at_fraction(0.5);
  const auto [d0, d1] = zoom_range(model, parse_zoom("2us"), mid, 1);
  EXPECT_DOUBLE_EQ(d1 - d0, 2000.0);
  EXPECT_DOUBLE_EQ((d0 + d1) / 2, static_cast<double>(mid.t_ns));
}

// The review found the gradient table showing "+0.0000" for most entries (%+.4f of small values):
// values keep 3 significant digits, and only an exact zero reads as zero.
TEST(FormatValue, KeepsThreeSignificantDigitsAndShowsOnlyExactZeroAsZero) {
  EXPECT_EQ(format_value(0.0), "0");
  EXPECT_EQ(format_value(-0.0), "0");
  EXPECT_EQ(format_value(1.234e-4), "+1.23e-04");
  EXPECT_EQ(format_value(-3.0e-7), "-3.00e-07");
  EXPECT_EQ(format_value(-0.0457), "-0.0457");
  // More digits where three would write two different values the same (L4's -0.312 and -0.312).
  EXPECT_EQ(format_value(-0.31212, 4), "-0.3121");
  EXPECT_EQ(format_value(-3.1212e-5, 4), "-3.121e-05");
  EXPECT_EQ(distinguishing_digits({-0.31212, -0.31248, -0.3123}), 4);
  EXPECT_EQ(distinguishing_digits({-0.312, -0.312, 0.5}), 3) << "equal values need no more digits";
  EXPECT_EQ(distinguishing_digits({1.0000001, 1.0000002}), 6) << "at most 6";
  EXPECT_EQ(distinguishing_digits({}), 3);
  EXPECT_EQ(format_value(0.5), "+0.500");
  EXPECT_EQ(format_value(12.34), "+12.3");
  EXPECT_EQ(format_value(123456.0), "+1.23e+05");
  for (double v : {1e-5, 2e-6, 4.2e-9})
    EXPECT_NE(format_value(v).find_first_of("123456789"), std::string::npos) << v;
}

TEST(ParseSize, AcceptsWidthByHeightWithinLimits) {
  const PixelSize s = parse_size("1600x900");
  EXPECT_EQ(s.width, 1600);
  EXPECT_EQ(s.height, 900);
  EXPECT_NE(usage_error([] { parse_size("1600"); }).find("expected WIDTHxHEIGHT"), std::string::npos);
  EXPECT_NE(usage_error([] { parse_size("12x900"); }).find("between 64 and 16384"), std::string::npos);
  EXPECT_NE(usage_error([] { parse_size("x"); }).find("--size 'x'"), std::string::npos);
  // Each side may reach 16384 pixels, the frame 8192x8192 in all.
  EXPECT_EQ(parse_size("16384x4096").width, 16384);
  EXPECT_EQ(parse_size("8192x8192").height, 8192);
  EXPECT_NE(
      usage_error([] { parse_size("16384x16384"); }).find("268435456 pixels is more than a frame holds"),
      std::string::npos);
}

TEST(FormatTime, PicksTheUnitAndFourSignificantDigits) {
  EXPECT_EQ(format_time(0), "0 ns");
  EXPECT_EQ(format_time(850), "850 ns");
  EXPECT_EQ(format_time(12345), "12.35 µs");
  EXPECT_EQ(format_time(4500000), "4.500 ms");
  EXPECT_EQ(format_time(123456789), "123.5 ms");
  EXPECT_EQ(format_time(2000000000), "2.000 s");
  EXPECT_EQ(format_duration(-1500), "-1.500 µs");
}

// The review found DDP's sum under --pitfall no-average labelled "DataParallel's reduce-add": the
// words now follow the run's mode and pitfalls.
TEST(RunInfo, TheReductionVerdictFollowsTheModeAndThePitfalls) {
  const RunInfo ddp = parse_run_info(R"({"mode":"ddp"})");
  const RunInfo no_average = parse_run_info(R"({"mode":"ddp","pitfalls":["no-set-epoch","no-average"]})");
  const RunInfo dp = parse_run_info(R"({"mode":"dp"})");
  EXPECT_TRUE(no_average.has_pitfall("no-average"));
  EXPECT_FALSE(ddp.has_pitfall("no-average"));
  EXPECT_EQ(reduction_verdict(ddp, true, false, 4),
            "after = mean of the 4 ranks' gradients (all-reduce SUM, then ÷ 4)");
  EXPECT_EQ(
      reduction_verdict(no_average, false, true, 4),
      "after = SUM of the 4 ranks' gradients, not their mean: the no-average pitfall (the learning rate "
      "is in effect 4x larger)");
  EXPECT_EQ(reduction_verdict(dp, false, true, 2),
            "after = sum of the replicas' gradients (DataParallel's reduce-add onto GPU 0)");
  EXPECT_EQ(reduction_verdict(ddp, false, true, 2),
            "after = sum of the 2 ranks' gradients (all-reduce SUM, no ÷ 2)");
  EXPECT_EQ(reduction_verdict(ddp, false, false, 2), "");
  for (const RunInfo& run : {ddp, no_average})
    EXPECT_EQ(reduction_verdict(run, false, true, 4).find("DataParallel"), std::string::npos);
}

TEST(RunInfo, TitlesComeFromTheHeadersRunObject) {
  const RunInfo ddp = parse_run_info(R"({"mode":"ddp","backend":"sim","model":"784-10","batch":32})");
  EXPECT_EQ(ddp.mode_title(), "DistributedDataParallel (DDP)");
  EXPECT_EQ(ddp.model, "784-10");
  EXPECT_EQ(ddp.batch, "32");
  EXPECT_EQ(parse_run_info(R"({"mode":"dp"})").mode_title(), "DataParallel (DP)");
  EXPECT_EQ(parse_run_info(R"({"command":"bench","collective":"all_reduce"})").mode_title(),
            "benchmark: all_reduce");
  EXPECT_EQ(parse_run_info("not json").mode_title(), "");
  EXPECT_EQ(parse_run_info(R"([1,2])").mode, "");
}

class SeekOnTrace : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto path = testing::scratch_dir() / "ddp.jsonl";
    testing::write_ddp_trace(path, 2, 2, 4);
    data_ = trace::read_trace(path);
    model_ = std::make_unique<ReplayModel>(data_);
  }
  trace::TraceData data_;
  std::unique_ptr<ReplayModel> model_;
};

TEST_F(SeekOnTrace, ResolvesEachForm) {
  const ReplayModel& m = *model_;
  EXPECT_EQ(resolve_seek(m, parse_seek("0")), m.start());
  EXPECT_EQ(resolve_seek(m, parse_seek("1")), m.end());
  EXPECT_EQ(resolve_seek(m, parse_seek("0.5")), m.at_time(m.begin_ns() + (m.end_ns() - m.begin_ns()) / 2));
  EXPECT_EQ(resolve_seek(m, parse_seek("step:2")), *m.step_start(1));
  EXPECT_EQ(resolve_seek(m, parse_seek("event:7")), m.after_event(7));
}

// A known defect: `--seek step:N` could show "step N-1", when another GPU began step N before the
// one the picture follows. The playhead lands where the picture says "step N".
TEST(SeekStep, ShowsTheStepAskedForOnEveryRuntimeTrace) {
  const auto dir = testing::scratch_dir();
  testing::write_ddp_trace(dir / "ddp.jsonl", 4, 4);
  testing::write_dp_trace(dir / "dp.jsonl", 4, 4);
  for (const char* name : {"ddp.jsonl", "dp.jsonl"}) {
    const trace::TraceData data = trace::read_trace(dir / name, {.strict = true});
    const ReplayModel m(data);
    for (int64_t step = m.first_step(); step <= m.last_step(); ++step)
      EXPECT_EQ(m.state_at(resolve_seek(m, parse_seek(fmt::format("step:{}", shown_count(step))))).step, step)
          << name << " step " << step;
  }
}

TEST_F(SeekOnTrace, StepsAndEventsOutsideTheTraceAreUsageErrors) {
  const ReplayModel& m = *model_;
  EXPECT_NE(usage_error([&] {
              resolve_seek(m, parse_seek("step:5"));
            }).find("--seek step:5: the trace has steps 1..2"),
            std::string::npos);
  const std::string msg =
      usage_error([&] { resolve_seek(m, parse_seek(fmt::format("event:{}", m.event_count()))); });
  EXPECT_NE(msg.find(fmt::format("the trace has {} events", m.event_count())), std::string::npos) << msg;
}

TEST_F(SeekOnTrace, PlaybackAdvancesBySpeedTimesBaseRateAndStopsAtTheEnd) {
  const ReplayModel& m = *model_;
  Playback p;
  p.attach(m, false);
  EXPECT_EQ(p.cursor(), m.start());
  const double rate = Playback::base_rate_ns_per_s(m);
  // Two steps: one step (half the trace) plays in kStepSeconds at speed 1.
  EXPECT_NEAR(rate, static_cast<double>(m.end_ns() - m.begin_ns()) / 2 / Playback::kStepSeconds, 1.0);
  p.tick(m, 1.0);
  EXPECT_EQ(p.cursor(), m.start()) << "paused: no movement";
  p.set_playing(true);
  p.set_speed(2.0);
  p.tick(m, 0.5);
  EXPECT_EQ(p.cursor(), m.at_time(m.begin_ns() + static_cast<int64_t>(rate)));
  p.tick(m, 1000.0);
  EXPECT_EQ(p.cursor(), m.end());
  EXPECT_FALSE(p.playing());
  p.toggle_playing(m);  // play at the end starts over
  EXPECT_TRUE(p.playing());
  EXPECT_EQ(p.cursor(), m.start());
  p.set_speed(1e9);
  EXPECT_EQ(p.speed(), Playback::kMaxSpeed);
}

TEST_F(SeekOnTrace, LiveEdgeIsKeptUntilTheUserScrubsAway) {
  const ReplayModel& m = *model_;
  Playback p;
  p.attach(m, true);
  EXPECT_TRUE(p.at_live_edge());
  EXPECT_EQ(p.cursor(), m.end());
  p.seek(m, m.at_fraction(0.5));
  EXPECT_FALSE(p.at_live_edge());
  p.attach(m, true);  // a rebuilt model (more events) keeps the user's position
  EXPECT_EQ(p.cursor(), m.at_fraction(0.5));
  p.go_live(m);
  EXPECT_TRUE(p.at_live_edge());
  p.tick(m, 0.1);
  EXPECT_EQ(p.cursor(), m.end());
}

}  // namespace
}  // namespace dpscope::viz
