// Answer expressions: how a lesson question's answer is computed from the trace, never typed in by
// its author (docs/lessons.md, "Answers").
//
// A tiny language: numbers, + - * / and parentheses, header values (`devices`, `params`,
// `param_bytes`, `buckets`, `steps`) and aggregates over the events an EventFilter matches:
//   count(filter)          how many events match
//   sum(field, filter)     max(...), min(...), mean(...)
//   first(field, filter)   the field of the earliest match
//   span(filter)           last end - first start of the matches, in ns
//   last(field, filter)    the field of the latest match (a counter's value at a moment)
//   run(key)               a value of the run's configuration (the trace header's `run` object:
//                          run(devices), run(batch), run(bucket_mb)), so text follows the knobs
//   @name(expr)            `expr` on the trace of the lesson's other scenario `name` ([[scenarios]])
// and one comparison at the top (== != < <= > >=, 1 when it holds, else 0) for a chapter's
// `expect`. A filter's `at=started|done|running|pending` keeps the events that have started, ended,
// are running or have not started at the evaluation's moment (a chapter's, EvalContext::now_ns).
// e.g.  sum(bytes, type=transfer, coll=2, rank=0) / 1024
//       span(category=collective, rank=0, step=1) - sum(dur_ns, category=compute, rank=0, step=1)
// Fields: bytes, dur_ns, dur_us, ts_ns, ts_us, end_ns, rank, step, algo_step, chunk, coll,
// param (grad_ready and `values` events), sample and samples (a `samples` event's first data-set
// index and how many it lists), value (the first traced element of a `values` event, or a counter's
// first value), norm (a `values` event's L2 norm), and a counter's keys (loss, parameters, gradients,
// optimizer_state, activations, buffers, capacity), and a hierarchical all-reduce's phases as trace
// times (rs_start_ns, rs_end_ns, net_start_ns, net_end_ns, ag_start_ns, ag_end_ns: the reduce-scatter
// in the node, the all-reduce across nodes, the all-gather in the node). `now_ns` is the chapter's
// moment as a trace time (an `expect` may compare a phase's times with it). Used by the lesson engine
// (lesson/report.hpp); parse errors name the column, evaluation errors say why the value cannot be computed
// (a filter that matches nothing, a division by zero).
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "dpscope/trace_tools/reader.hpp"

namespace dpscope::lesson {

namespace detail {
struct Node;  // the syntax tree (runtime/src/lesson/expression.cpp)
}

// The names the language knows, for messages and docs/lessons.md.
inline constexpr std::string_view kAggregates[] = {"count", "sum",   "max",  "min",
                                                   "mean",  "first", "last", "span"};
inline constexpr std::string_view kHeaderValues[] = {"devices", "params", "param_bytes",
                                                     "buckets", "steps",  "now_ns"};
inline constexpr std::string_view kFields[] = {
    "bytes",    "dur_ns",    "dur_us",      "ts_ns",      "ts_us",        "end_ns",          "rank",
    "step",     "algo_step", "chunk",       "coll",       "param",        "sample",          "samples",
    "value",    "norm",      "loss",        "parameters", "gradients",    "optimizer_state", "activations",
    "buffers",  "capacity",  "rs_start_ns", "rs_end_ns",  "net_start_ns", "net_end_ns",      "ag_start_ns",
    "ag_end_ns"};

// Limits that keep a hostile lesson file from exhausting the stack or the memory: an expression's
// length in characters, and the depth of its syntax tree (each '(', unary '-' and operator in a
// chain is a level; the shipped lessons' answers use at most 4).
inline constexpr size_t kMaxExpressionChars = 4096;
inline constexpr int kMaxExpressionDepth = 256;

// Where an expression is evaluated: at a chapter's moment (`at=` filters need one), or on the
// whole trace.
struct EvalContext {
  std::optional<int64_t> now_ns;  // an absolute trace time (Event::ts_ns), nullopt: no moment
  // The traces of the lesson's other scenarios, by name, for `@name(expr)`; null: none.
  const std::map<std::string, const trace::TraceData*>* scenarios = nullptr;
};

// A value of the run's configuration (the trace header's `run` object; its keys are the command's
// flags with '_' for '-': devices, batch, bucket_mb, algo, ...): a number (true/false as 1/0), a
// text, or nothing when the key is absent.
using RunSetting = std::variant<std::monostate, double, std::string>;
RunSetting run_setting(const trace::TraceData& data, std::string_view key);

// A number as answers show it: integers as integers, else about four significant digits.
std::string format_number(double value);

class Expression {
 public:
  // Throws Error(kFormat) "column C: reason" (1-based column in `text`) on a syntax error, an
  // unknown function, field or header value, a bad filter key or value, a text or a nesting past
  // the limits above, or an expression of numbers alone whose value is not a finite number.
  static Expression parse(std::string_view text);

  // The value on `data`. Throws Error(kInvalidArgument) "cannot be computed: reason" when a filter
  // matches no event, a field is absent from every match, a division by zero occurs, or a step or
  // the result is not a finite number (an overflow to infinity, a NaN in the trace).
  double evaluate(const trace::TraceData& data, const EvalContext& context = {}) const;

  // For messages: a comparison's two sides with their values ("0 == 4"), else the value.
  std::string evaluate_text(const trace::TraceData& data, const EvalContext& context = {}) const;

  // The key when the whole expression is `run(key)` (a template prints a text value as it is,
  // `run(algo)` -> "ring"); "" otherwise.
  std::string run_key() const;
  // True when the expression reads a moment (`at=` in a filter): only chapters have one.
  bool needs_moment() const;
  // True when it reads nothing from a run (numbers and operators only): a literal in disguise.
  bool is_constant() const;
  // The scenarios `@name(...)` refers to, as written (the lesson loader checks they exist).
  std::vector<std::string> scenarios() const;

  const std::string& text() const { return text_; }

 private:
  std::string text_;
  std::shared_ptr<const detail::Node> root_;
};

}  // namespace dpscope::lesson
