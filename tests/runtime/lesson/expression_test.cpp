// Answer expressions (lesson/expression.hpp): parsing, error columns, and exact values on the
// hand-written trace of lesson_test_util.hpp (every expected value is added up from its comment).
#include "dpscope/lesson/expression.hpp"

#include <gtest/gtest.h>

#include "dpscope/base/error.hpp"
#include "lesson_test_util.hpp"

namespace dpscope::lesson {
namespace {

double eval(const std::string& text) { return Expression::parse(text).evaluate(testing::hand_trace()); }

std::string parse_error(const std::string& text) {
  try {
    Expression::parse(text);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kFormat);
    return e.what();
  }
  return "(parsed)";
}

std::string eval_error(const std::string& text) {
  try {
    eval(text);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    return e.what();
  }
  return "(computed)";
}

TEST(Expression, ArithmeticFollowsPrecedenceAndLeftAssociativity) {
  EXPECT_DOUBLE_EQ(eval("1 + 2 * 3"), 7.0);
  EXPECT_DOUBLE_EQ(eval("(1 + 2) * 3"), 9.0);
  EXPECT_DOUBLE_EQ(eval("10 - 4 - 3"), 3.0);
  EXPECT_DOUBLE_EQ(eval("8 / 4 / 2"), 1.0);
  EXPECT_DOUBLE_EQ(eval("-4 / 2"), -2.0);
  EXPECT_DOUBLE_EQ(eval("--3"), 3.0);
  EXPECT_DOUBLE_EQ(eval("1.5e3 + .5"), 1500.5);
}

TEST(Expression, HeaderValues) {
  EXPECT_DOUBLE_EQ(eval("devices"), 2.0);  // sim:0 and sim:1; the host is no GPU
  EXPECT_DOUBLE_EQ(eval("params"), 1.0);
  EXPECT_DOUBLE_EQ(eval("param_bytes"), 1605632.0);
  EXPECT_DOUBLE_EQ(eval("buckets"), 0.0);
  EXPECT_DOUBLE_EQ(eval("steps"), 1.0);
}

TEST(Expression, CountAndSumOverFilters) {
  EXPECT_DOUBLE_EQ(eval("count(type=transfer)"), 4.0);
  EXPECT_DOUBLE_EQ(eval("count(type=transfer, rank=0)"), 2.0);
  EXPECT_DOUBLE_EQ(eval("count()"), 13.0);
  EXPECT_DOUBLE_EQ(eval("sum(bytes, type=transfer, rank=0)"), 2000.0);
  EXPECT_DOUBLE_EQ(eval("sum(bytes, name=\"ring all-gather\")"), 2000.0);
  // `coll` is a field of transfers and an arg of the collective span: both match.
  EXPECT_DOUBLE_EQ(eval("count(coll=3)"), 5.0);
  EXPECT_DOUBLE_EQ(eval("sum(bytes, coll=3)"), 6000.0);
  EXPECT_DOUBLE_EQ(eval("count(category=collective, name=all_reduce*)"), 1.0);
  EXPECT_DOUBLE_EQ(eval("count(stream=comm)"), 5.0);
  EXPECT_DOUBLE_EQ(eval("count(algo=ring, algo_step=1)"), 2.0);
}

TEST(Expression, MaxMinMeanFirstAndSpan) {
  EXPECT_DOUBLE_EQ(eval("max(dur_ns, type=transfer)"), 60.0);
  EXPECT_DOUBLE_EQ(eval("min(dur_ns, type=transfer)"), 50.0);
  EXPECT_DOUBLE_EQ(eval("mean(dur_ns, type=transfer)"), 55.0);
  EXPECT_DOUBLE_EQ(eval("mean(dur_us, type=transfer)"), 0.055);
  // first: the earliest match (ts 100: rank 0 before rank 1), not the first line in the file.
  EXPECT_DOUBLE_EQ(eval("first(chunk, type=transfer)"), 0.0);
  EXPECT_DOUBLE_EQ(eval("first(param, name=grad_ready)"), 1.0);
  EXPECT_DOUBLE_EQ(eval("span(type=transfer)"), 160.0);  // 100 .. 260
  EXPECT_DOUBLE_EQ(eval("span(category=collective)"), 200.0);
  EXPECT_DOUBLE_EQ(eval("first(end_ns, category=collective)"), 290.0);
}

TEST(Expression, ValuesAndCounterFields) {
  // The mean of the two ranks' traced values: (1 + 3) / 2; norms (2 + 5) / 2.
  EXPECT_DOUBLE_EQ(eval("mean(value, name=grad, when=before_reduce, param=0)"), 2.0);
  EXPECT_DOUBLE_EQ(eval("mean(norm, name=grad)"), 3.5);
  EXPECT_DOUBLE_EQ(eval("max(gradients, name=memory)"), 100.0);
  EXPECT_DOUBLE_EQ(eval("first(gradients, name=memory)"), 0.0);
  EXPECT_DOUBLE_EQ(eval("max(gradients, name=memory) / max(parameters, name=memory)"), 1.0);
  // A `samples` event's first data-set index and its count.
  EXPECT_DOUBLE_EQ(eval("first(sample, type=samples, rank=0)"), 7.0);
  EXPECT_DOUBLE_EQ(eval("sum(samples, type=samples)"), 3.0);
}

TEST(Expression, CombinesAggregates) {
  // Bytes rank 0 sent, over the collective's time: 2000 B / 200 ns = 10 GB/s.
  EXPECT_DOUBLE_EQ(eval("sum(bytes, type=transfer, rank=0) / span(category=collective, rank=0)"), 10.0);
  EXPECT_DOUBLE_EQ(eval("(count(type=transfer) - 1) * devices"), 6.0);
}

TEST(Expression, NthKeepsOneMatchInTimeOrder) {
  EXPECT_DOUBLE_EQ(eval("first(param, name=grad_ready, nth=2)"), 0.0);
  EXPECT_DOUBLE_EQ(eval("count(type=transfer, nth=3)"), 1.0);
  EXPECT_DOUBLE_EQ(eval("first(rank, type=transfer, nth=2)"), 1.0);
}

TEST(Expression, ParseErrorsNameTheColumn) {
  EXPECT_EQ(parse_error("1 +"), "column 4: expected a number, a name or '(' at the end");
  EXPECT_EQ(parse_error("(1 + 2"), "column 7: expected ')' at the end");
  EXPECT_EQ(parse_error("count(rank=0"), "column 13: expected ',' or ')' at the end");
  EXPECT_EQ(
      parse_error("avg(bytes)"),
      "column 1: unknown function 'avg' (expected one of: count, sum, max, min, mean, first, last, span)");
  EXPECT_EQ(parse_error("sum(byts, rank=0)").substr(0, 36), "column 5: unknown field 'byts' (expe");
  EXPECT_EQ(parse_error("sum(bytes, rnak=0)").substr(0, 38), "column 12: unknown key 'rnak' (expecte");
  EXPECT_EQ(parse_error("count(type=transfr)"),
            "column 12: type must be one of: span, instant, counter, transfer, values, samples, buckets; got "
            "'transfr'");
  EXPECT_EQ(
      parse_error("count(phase=fwd)"),
      "column 13: phase must be one of: none, data, forward, backward, optimizer, checkpoint; got 'fwd'");
  EXPECT_EQ(parse_error("count(rank=zero)"), "column 12: rank must be an integer, got 'zero'");
  EXPECT_EQ(parse_error("count(nth=0)"),
            "column 11: nth counts matches from 1 (the first), or from -1 (the last) backwards; got 0");
  EXPECT_EQ(parse_error("count(rank 0)"), "column 12: expected '=' after 'rank', got '0'");
  EXPECT_EQ(parse_error("sum()"), "column 5: sum() needs a field first, e.g. sum(bytes, ...)");
  EXPECT_EQ(parse_error("count(name=\"copy H2D)"), "column 12: unterminated string");
  EXPECT_EQ(parse_error("devices devices"), "column 9: unexpected 'd'");
  EXPECT_EQ(parse_error("count"), "column 1: 'count' needs its arguments: count(...)");
  EXPECT_EQ(parse_error("rank").substr(0, 29), "column 1: unknown name 'rank'");
  EXPECT_EQ(parse_error("2 $ 3"), "column 3: unexpected '$'");
}

TEST(Expression, EvaluationErrorsSayWhyItCannotBeComputed) {
  EXPECT_EQ(eval_error("count(rank=7)"), "cannot be computed: count(rank=7) matches no event");
  EXPECT_EQ(eval_error("1 / (devices - 2)"), "cannot be computed: division by zero");
  EXPECT_EQ(eval_error("sum(dur_ns, name=grad_ready)"),
            "cannot be computed: none of the 2 events matching 'name=grad_ready' has a 'dur_ns'");
  EXPECT_EQ(eval_error("first(param, name=grad_ready, nth=3)"),
            "cannot be computed: first(name=grad_ready, nth=3) matches no event");
}

// A hostile answer once overflowed the stack (20,000 '(' or 200,000 '-' ended `lesson check` with
// SIGSEGV): the text's length and the tree's depth are bounded, and the limit itself still parses.
TEST(Expression, LengthAndNestingAreBounded) {
  EXPECT_EQ(parse_error(std::string(20000, '(') + "1" + std::string(20000, ')')),
            "is 40001 characters long; at most 4096 are allowed");
  EXPECT_EQ(parse_error(std::string(200000, '-') + "1"),
            "is 200001 characters long; at most 4096 are allowed");
  const std::string too_deep =
      "column 257: the expression nests more than 256 levels deep (parentheses, '-' signs and operators in a "
      "row "
      "each add one)";
  EXPECT_EQ(parse_error(std::string(1000, '(') + "1" + std::string(1000, ')')), too_deep);
  EXPECT_EQ(parse_error(std::string(1000, '-') + "1"), too_deep);
  std::string chain = "1";
  for (int i = 0; i < 300; ++i) chain += "+1";
  EXPECT_EQ(parse_error(chain).substr(0, 53), "column 514: the expression nests more than 256 levels");
  EXPECT_DOUBLE_EQ(eval(std::string(256, '(') + "devices" + std::string(256, ')')), 2.0);
  EXPECT_DOUBLE_EQ(eval(std::string(256, '-') + "devices"), 2.0);
  std::string sum = "1";
  for (int i = 0; i < 256; ++i) sum += "+1";
  EXPECT_DOUBLE_EQ(eval(sum), 257.0);
}

// "-inf bytes" was once an answer: a value that is not a finite number is never one. Numbers alone
// are refused when the lesson loads; on a trace, evaluation says which step overflowed.
TEST(Expression, NonFiniteValuesAreNeverAnswers) {
  EXPECT_EQ(parse_error("-1e308 * 1e308"),
            "column 1: cannot be computed: -1e+308 * 1e+308 is -inf, not a finite number");
  EXPECT_EQ(parse_error("1e308 * 10 - 1e308 * 10"),
            "column 1: cannot be computed: 1e+308 * 10 is inf, not a finite number");
  EXPECT_EQ(parse_error("1 / 0"), "column 1: cannot be computed: division by zero");
  EXPECT_EQ(parse_error("1e999"), "column 1: '1e999' is not a number");
  EXPECT_EQ(eval_error("-count(type=transfer) * 1e308 * 1e308"),
            "cannot be computed: -4 * 1e+308 is -inf, not a finite number");
}

TEST(Expression, KeepsItsText) { EXPECT_EQ(Expression::parse("count(rank=0)").text(), "count(rank=0)"); }

}  // namespace
}  // namespace dpscope::lesson
