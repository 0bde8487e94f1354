// Answer expressions: how a lesson question's answer is computed from the trace, never typed in by
// its author (docs/lessons.md, "Answers").
//
// A tiny language: numbers, + - * / and parentheses, header values (`devices`, `params`,
// `param_bytes`, `buckets`, `steps`) and aggregates over the events an EventFilter matches:
//   count(filter)          how many events match
//   sum(field, filter)     max(...), min(...), mean(...)
//   first(field, filter)   the field of the earliest match
//   span(filter)           last end - first start of the matches, in ns
// e.g.  sum(bytes, type=transfer, coll=2, rank=0) / 1024
//       span(category=collective, rank=0, step=1) - sum(dur_ns, category=compute, rank=0, step=1)
// Fields: bytes, dur_ns, dur_us, ts_ns, ts_us, end_ns, rank, step, algo_step, chunk, coll,
// param (grad_ready and `values` events), sample and samples (a `samples` event's first data-set
// index and how many it lists), value (the first traced element of a `values` event, or a counter's
// first value), norm (a `values` event's L2 norm), and a counter's keys (loss, parameters, gradients,
// optimizer_state, activations, buffers, capacity). Used by the lesson engine (lesson/report.hpp); parse
// errors name the column, evaluation errors say why the value cannot be computed (a filter that matches
// nothing, a division by zero).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "dpscope/trace_format/reader.hpp"

namespace dpscope::lesson {

namespace detail {
struct Node;  // the syntax tree (runtime/src/lesson/expression.cpp)
}

// The names the language knows, for messages and docs/lessons.md.
inline constexpr std::string_view kAggregates[] = {"count", "sum", "max", "min", "mean", "first", "span"};
inline constexpr std::string_view kHeaderValues[] = {"devices", "params", "param_bytes", "buckets", "steps"};
inline constexpr std::string_view kFields[] = {
    "bytes",     "dur_ns",     "dur_us",    "ts_ns",           "ts_us",       "end_ns",  "rank",    "step",
    "algo_step", "chunk",      "coll",      "param",           "sample",      "samples", "value",   "norm",
    "loss",      "parameters", "gradients", "optimizer_state", "activations", "buffers", "capacity"};

// Limits that keep a hostile lesson file from exhausting the stack or the memory: an expression's
// length in characters, and the depth of its syntax tree (each '(', unary '-' and operator in a
// chain is a level; the shipped lessons' answers use at most 4).
inline constexpr size_t kMaxExpressionChars = 4096;
inline constexpr int kMaxExpressionDepth = 256;

class Expression {
 public:
  // Throws Error(kFormat) "column C: reason" (1-based column in `text`) on a syntax error, an
  // unknown function, field or header value, a bad filter key or value, a text or a nesting past
  // the limits above, or an expression of numbers alone whose value is not a finite number.
  static Expression parse(std::string_view text);

  // The value on `data`. Throws Error(kInvalidArgument) "cannot be computed: reason" when a filter
  // matches no event, a field is absent from every match, a division by zero occurs, or a step or
  // the result is not a finite number (an overflow to infinity, a NaN in the trace).
  double evaluate(const trace::TraceData& data) const;

  const std::string& text() const { return text_; }

 private:
  std::string text_;
  std::shared_ptr<const detail::Node> root_;
};

}  // namespace dpscope::lesson
