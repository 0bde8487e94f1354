// Lesson text computed from the run: narration, question prompts, explanations and exercises may
// embed expressions (docs/lessons.md, "Numbers in the text"), so a number a student reads is the
// run's own and follows every knob:
//   {{ expr }}            the value, as answers show it ("4", "0.3125")
//   {{ expr | format }}   formatted: us, ms, time, bytes, int, words, x, pct, f1, f2, f3, ordinal
//   {{ run(algo) }}       a text value of the run's configuration, as it is ("ring")
//   {{! fact }}           a fixed fact, printed as written: not measured, not a knob ("25 MiB, PyTorch's
//                         default bucket_cap_mb")
// `lint_text` is the rule that keeps literal numbers out of the prose (docs/lessons.md, "The lint").
// Used by the lesson loader (lesson_file.cpp: parse errors name lesson, chapter and column), the
// engine (report.cpp: rendering at the chapter's moment) and `lesson check`.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dpscope/lesson/expression.hpp"

namespace dpscope::lesson {

// The formats a `{{ expr | format }}` may name.
inline constexpr std::string_view kTextFormats[] = {"us", "ms",  "time", "bytes", "int", "words",
                                                    "x",  "pct", "f1",   "f2",    "f3",  "ordinal"};

class TextTemplate {
 public:
  // Throws Error(kFormat) "placeholder N '{{ ... }}': reason" for a '{{' without '}}', an empty
  // placeholder, an expression that does not parse (with its column) or an unknown format.
  static TextTemplate parse(std::string_view text);

  // The text with every placeholder replaced by its value on `data` at `context`'s moment. Throws
  // Error(kInvalidArgument) "placeholder N '{{ ... }}': cannot be computed: ..." when one has none.
  std::string render(const trace::TraceData& data, const EvalContext& context = {}) const;

  // The text with each placeholder shown as written: for a reader without a run.
  const std::string& source() const { return source_; }
  bool has_placeholders() const;
  bool needs_moment() const;                               // some placeholder uses at=
  std::vector<std::string> scenarios() const;              // the `@name`s its placeholders read
  std::vector<std::string> constant_placeholders() const;  // those of numbers alone, as written

 private:
  struct Part {
    std::string text;                      // literal text, a fact's words, or the placeholder as written
    std::optional<Expression> expression;  // a placeholder
    std::string format;                    // its format ("" for none)
    bool fact = false;
  };
  std::string source_;
  std::vector<Part> parts_;
};

// Formats `value` as `format` (one of kTextFormats, or "" for format_number): "us" and "ms" read
// nanoseconds ("322.8 µs", "6.900 ms"), "time" picks the unit, "bytes" reads bytes in binary
// units ("2,048 bytes", "15.63 MiB"), "words" spells counts up to twenty ("four"), "x" a ratio
// ("1.19×"), "pct" a fraction as a percentage ("25.9 %").
std::string format_value(double value, std::string_view format);

// The lint (docs/lessons.md): the literal numbers in `text` outside placeholders, facts and
// `code`: a run of digits that does not continue a word ("H100", "fp16" and "L2" are names) and is
// no name by number ("lesson 4", "chapter 2", "question 3", "exercise 1", "GPU 0", "rank 0",
// "parameter 5", "bucket 0": identities, not measurements), and the number words (two to sixty,
// hundred, thousand, million, half, quarter, twice, ...). Returns one line per finding ("literal number
// '238' in '... about 238 us ...'"), empty when the text is clean.
std::vector<std::string> lint_text(std::string_view text);

}  // namespace dpscope::lesson
