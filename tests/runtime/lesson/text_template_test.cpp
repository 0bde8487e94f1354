// Lesson text computed from the run (lesson/text_template.hpp) and the expression features it
// brought (run(key), last(), at=, comparisons, @scenario): on the hand-written trace of
// lesson_test_util.hpp, whose values are known by hand; and the lint that keeps literal numbers
// out of the prose (a lesson once said "about 238 us" while the run measured 322.8).
#include "dpscope/lesson/text_template.hpp"

#include <gtest/gtest.h>

#include "dpscope/base/error.hpp"
#include "lesson_test_util.hpp"

namespace dpscope::lesson {
namespace {

std::string render(const std::string& text, EvalContext context = {}) {
  return TextTemplate::parse(text).render(testing::hand_trace(), context);
}

std::string parse_error(const std::string& text) {
  try {
    (void)TextTemplate::parse(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

EvalContext at(int64_t now_ns) { return EvalContext{.now_ns = now_ns}; }

TEST(TextTemplate, PlaceholdersAreTheRunsValues) {
  EXPECT_EQ(render("The run has {{ devices }} GPUs."), "The run has 2 GPUs.");
  EXPECT_EQ(render("{{ devices | words }} GPUs"), "two GPUs");
  EXPECT_EQ(render("mode {{ run(mode) }}, {{ run(devices) * 4 }} chunks"), "mode ddp, 8 chunks");
  EXPECT_EQ(render("{{ sum(bytes, type=transfer, rank=0) | bytes }}"), "1.95 KiB");
  EXPECT_EQ(render("{{ span(category=collective) | us }}"), "0.2 µs");
  EXPECT_EQ(render("no placeholder"), "no placeholder");
  EXPECT_TRUE(TextTemplate::parse("{{ devices }}").has_placeholders());
  EXPECT_FALSE(TextTemplate::parse("{{! 25 MiB }}").has_placeholders());
}

TEST(TextTemplate, AFixedFactIsPrintedAsWritten) {
  EXPECT_EQ(render("PyTorch's default is {{! 25 MiB }}."), "PyTorch's default is 25 MiB.");
}

TEST(TextTemplate, FormatsSayTheirUnits) {
  EXPECT_EQ(format_value(322800, "us"), "322.8 µs");
  EXPECT_EQ(format_value(6900000, "ms"), "6.900 ms");
  EXPECT_EQ(format_value(2048, "bytes"), "2 KiB");
  EXPECT_EQ(format_value(16390000, "bytes"), "15.63 MiB");
  EXPECT_EQ(format_value(1000, "bytes"), "1,000 bytes");
  EXPECT_EQ(format_value(2121768, "int"), "2,121,768");
  EXPECT_EQ(format_value(8, "words"), "eight");
  EXPECT_EQ(format_value(21, "words"), "21");
  EXPECT_EQ(format_value(1.1875, "x"), "1.19×");
  EXPECT_EQ(format_value(0.259, "pct"), "25.9 %");
  EXPECT_EQ(format_value(2.0 / 3.0, "f3"), "0.667");
  EXPECT_EQ(format_value(1, "ordinal"), "1st");
  EXPECT_EQ(format_value(12, "ordinal"), "12th");
  EXPECT_EQ(format_value(23, "ordinal"), "23rd");
  EXPECT_EQ(format_value(0.3125, ""), "0.3125");
}

TEST(TextTemplate, ABadPlaceholderIsOneReasonNamingIt) {
  EXPECT_EQ(parse_error("a {{ devices"), "placeholder 1 'a {{ devices': '{{' without '}}'");
  EXPECT_EQ(parse_error("{{ }}"), "placeholder 1 '{{ }}': empty: write an expression, e.g. {{ devices }}");
  EXPECT_EQ(parse_error("{{ devices | furlongs }}"),
            "placeholder 1 '{{ devices | furlongs }}': unknown format 'furlongs' (expected one of: us, ms, "
            "time, bytes, int, words, x, pct, f1, f2, f3, ordinal)");
  EXPECT_EQ(
      parse_error("{{ devices }} and {{ count(rnk=0) }}"),
      "placeholder 2 '{{ count(rnk=0) }}': column 7: unknown key 'rnk' (expected one of: type, name, "
      "category, rank, step, phase, stream, algo, algo_step, chunk, coll, param, bucket, when, nth, at)");
  EXPECT_EQ(parse_error("{{! }}"), "placeholder 1 '{{! }}': a fixed fact {{! ... }} needs its words");
}

TEST(TextTemplate, APlaceholderThatCannotBeComputedSaysWhich) {
  try {
    (void)render("{{ devices }} then {{ count(rank=9) }}");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "placeholder 2 '{{ count(rank=9) }}': cannot be computed: count(rank=9) matches no event");
  }
}

TEST(Moment, AtFiltersSeeTheTraceAsItStandsThen) {
  // grad_ready instants at 50 and 60; memory counters at 10 (gradients 0) and 310 (gradients 100).
  EXPECT_EQ(render("{{ count(name=grad_ready, at=started) }}", at(55)), "1");
  EXPECT_EQ(render("{{ count(name=grad_ready, at=pending) }}", at(55)), "1");
  EXPECT_EQ(render("{{ last(gradients, name=memory, at=started) }}", at(100)), "0");
  EXPECT_EQ(render("{{ last(gradients, name=memory, at=started) }}", at(400)), "100");
  // The collective span runs from 90 to 290.
  EXPECT_EQ(render("{{ count(category=collective, at=running) }}", at(100)), "1");
  EXPECT_EQ(render("{{ count(category=collective, at=done) }}", at(290)), "1");
}

TEST(Moment, NoneYetCountsZeroButATypoStillFails) {
  EXPECT_EQ(render("{{ count(name=grad_ready, at=started) }}", at(20)), "0");
  EXPECT_THROW((void)render("{{ last(param, name=grad_ready, at=started) }}", at(20)), Error);
  try {
    (void)render("{{ count(name=grad_ready, rank=7, at=started) }}", at(20));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "placeholder 1 '{{ count(name=grad_ready, rank=7, at=started) }}': cannot be "
              "computed: count(name=grad_ready, rank=7, at=started) matches no event at any time");
  }
}

TEST(Moment, WithoutAMomentAtCannotBeComputed) {
  EXPECT_THROW((void)render("{{ count(name=grad_ready, at=started) }}"), Error);
  EXPECT_TRUE(Expression::parse("count(name=grad_ready, at=started)").needs_moment());
  EXPECT_FALSE(Expression::parse("count(name=grad_ready)").needs_moment());
}

TEST(Compare, AComparisonIsOneOrZeroAndShowsItsSides) {
  const trace::TraceData data = testing::hand_trace();
  EXPECT_EQ(Expression::parse("devices == 2").evaluate(data), 1.0);
  EXPECT_EQ(Expression::parse("devices != 2").evaluate(data), 0.0);
  EXPECT_EQ(Expression::parse("count(type=transfer) >= 4").evaluate(data), 1.0);
  EXPECT_EQ(Expression::parse("count(type=transfer) < 4").evaluate(data), 0.0);
  EXPECT_EQ(Expression::parse(
                "last(gradients, name=memory, at=started) == last(parameters, name=memory, at=started)")
                .evaluate_text(data, at(100)),
            "0 == 100");
}

TEST(OtherScenario, AtNameReadsAnotherRunsTrace) {
  const trace::TraceData other = testing::hand_trace();
  const std::map<std::string, const trace::TraceData*> scenarios = {{"one-gpu", &other}};
  EXPECT_EQ(render("{{ @one-gpu(devices) * 10 }}", EvalContext{.scenarios = &scenarios}), "20");
  EXPECT_EQ(Expression::parse("@one-gpu(devices) + @ddp(steps)").scenarios(),
            (std::vector<std::string>{"one-gpu", "ddp"}));
  EXPECT_THROW((void)render("{{ @ddp(devices) }}", EvalContext{.scenarios = &scenarios}), Error);
}

TEST(Lint, LiteralNumbersInProseAreFound) {
  const std::vector<std::string> found =
      lint_text("one GPU needs about 238 us; DDP on four GPUs is 1.5x faster");
  ASSERT_EQ(found.size(), 3u);
  EXPECT_EQ(found[0], "literal number '238' in 'one GPU needs about 238 us; DDP on four GPUs is 1.5...'");
  EXPECT_EQ(found[1].substr(0, 23), "number word 'four' in '");
  EXPECT_EQ(found[2].substr(0, 25), "literal number '1.5x' in ");
}

TEST(Lint, APlaceholderOfNumbersAloneIsALiteralInDisguise) {
  EXPECT_EQ(lint_text("epoch {{ 2 }} of {{ run(epochs) }}"),
            (std::vector<std::string>{"placeholder '{{ 2 }}' reads nothing from the run"}));
  EXPECT_TRUE(lint_text("{{ devices - 1 }}").empty());
}

TEST(Lint, CodeNamesPlaceholdersFactsAndReferencesAreNotLiteralNumbers) {
  EXPECT_TRUE(lint_text("`set_epoch(0)` on an H100 in fp16, lesson 7, chapter 2, GPU 0 and rank 3 hold "
                        "parameter 5 in bucket 0; {{ devices }} GPUs, {{! 25 MiB }} by default")
                  .empty());
  EXPECT_EQ(lint_text("`unclosed 12 and more").size(), 0u);  // an unclosed code span runs to the end
  EXPECT_EQ(lint_text("step 2 of 10").size(), 2u);           // steps are counted from the run
}

}  // namespace
}  // namespace dpscope::lesson
