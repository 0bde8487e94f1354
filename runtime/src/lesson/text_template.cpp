// Lesson text computed from the run (lesson/text_template.hpp): placeholders parsed once when the
// lesson loads, rendered on each run's trace, and the lint that keeps literal numbers out.
#include "dpscope/lesson/text_template.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>

#include "dpscope/base/ascii.hpp"
#include "dpscope/base/error.hpp"
#include "dpscope/trace_tools/stats.hpp"

namespace dpscope::lesson {
namespace {

constexpr std::string_view kOpen = "{{", kClose = "}}";

std::string trimmed(std::string_view s) {
  const size_t begin = s.find_first_not_of(" \t\n");
  if (begin == std::string_view::npos) return "";
  const size_t end = s.find_last_not_of(" \t\n");
  return std::string(s.substr(begin, end - begin + 1));
}

// The last '|' outside double quotes (a filter value may be quoted), or npos.
size_t format_bar(std::string_view inner) {
  size_t bar = std::string_view::npos;
  bool quoted = false;
  for (size_t i = 0; i < inner.size(); ++i) {
    if (inner[i] == '"') quoted = !quoted;
    if (inner[i] == '|' && !quoted) bar = i;
  }
  return bar;
}

// "2,048" for 2048: digits grouped by three.
std::string grouped(int64_t n) {
  const std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out = n < 0 ? "-" : "";
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

constexpr std::array<std::string_view, 21> kWords = {
    "zero",     "one",     "two",     "three",     "four",     "five",     "six",
    "seven",    "eight",   "nine",    "ten",       "eleven",   "twelve",   "thirteen",
    "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty"};

// Number words the lint refuses in prose ("one" is left: "one GPU", "one process per GPU").
constexpr std::string_view kNumberWords[] = {
    "two",    "three",  "four",     "five",     "six",     "seven",   "eight",   "nine",   "ten",
    "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "twenty",  "thirty", "forty",
    "fifty",  "sixty",  "hundred",  "thousand", "million", "billion", "quarter", "twice"};

bool word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// `text` with placeholders, facts and `code` spans blanked (kept as spaces, so positions stay).
std::string prose_only(std::string_view text) {
  std::string out(text);
  size_t i = 0;
  while (i < out.size()) {
    if (out.compare(i, kOpen.size(), kOpen) == 0) {
      const size_t close = out.find(kClose, i + kOpen.size());
      const size_t end = close == std::string::npos ? out.size() : close + kClose.size();
      std::fill(out.begin() + static_cast<std::ptrdiff_t>(i), out.begin() + static_cast<std::ptrdiff_t>(end),
                ' ');
      i = end;
    } else if (out[i] == '`') {
      const size_t close = out.find('`', i + 1);
      const size_t end = close == std::string::npos ? out.size() : close + 1;
      std::fill(out.begin() + static_cast<std::ptrdiff_t>(i), out.begin() + static_cast<std::ptrdiff_t>(end),
                ' ');
      i = end;
    } else {
      ++i;
    }
  }
  return out;
}

// The words just before `pos` say it is a reference to a lesson, chapter or question by number.
bool is_reference(std::string_view prose, size_t pos) {
  std::string before(prose.substr(0, pos));
  while (!before.empty() && before.back() == ' ') before.pop_back();
  before = ascii_lower(before);
  for (const std::string_view word :
       {"lesson", "lessons", "chapter", "chapters", "question", "questions", "gpu", "gpus", "rank", "ranks",
        "parameter", "bucket", "exercise", "pitfall"})
    if (before.ends_with(word) &&
        (before.size() == word.size() || !word_char(before[before.size() - word.size() - 1])))
      return true;
  return false;
}

std::string excerpt(std::string_view text, size_t pos, size_t len) {
  const size_t begin = pos > 24 ? pos - 24 : 0;
  std::string s(text.substr(begin, len + 48));
  std::replace(s.begin(), s.end(), '\n', ' ');
  return fmt::format("'{}{}{}'", begin > 0 ? "..." : "", trimmed(s),
                     begin + len + 48 < text.size() ? "..." : "");
}

}  // namespace

TextTemplate TextTemplate::parse(std::string_view text) {
  TextTemplate t;
  t.source_ = std::string(text);
  size_t pos = 0, number = 0;
  while (pos < text.size()) {
    const size_t open = text.find(kOpen, pos);
    if (open == std::string_view::npos) {
      t.parts_.push_back({.text = std::string(text.substr(pos))});
      break;
    }
    if (open > pos) t.parts_.push_back({.text = std::string(text.substr(pos, open - pos))});
    ++number;
    const size_t close = text.find(kClose, open + kOpen.size());
    if (close == std::string_view::npos)
      throw Error(ErrorKind::kFormat,
                  fmt::format("placeholder {} {}: '{{{{' without '}}}}'", number, excerpt(text, open, 0)));
    const std::string_view whole = text.substr(open, close + kClose.size() - open);
    std::string_view inner = text.substr(open + kOpen.size(), close - open - kOpen.size());
    const auto problem = [&](const std::string& why) {
      return Error(ErrorKind::kFormat, fmt::format("placeholder {} '{}': {}", number, whole, why));
    };
    Part part;
    if (inner.starts_with('!')) {
      part.fact = true;
      part.text = trimmed(inner.substr(1));
      if (part.text.empty()) throw problem("a fixed fact {{! ... }} needs its words");
    } else {
      part.text = std::string(whole);
      const size_t bar = format_bar(inner);
      if (bar != std::string_view::npos) {
        part.format = trimmed(inner.substr(bar + 1));
        inner = inner.substr(0, bar);
        if (std::find(std::begin(kTextFormats), std::end(kTextFormats), part.format) ==
            std::end(kTextFormats))
          throw problem(fmt::format("unknown format '{}' (expected one of: {})", part.format,
                                    fmt::join(kTextFormats, ", ")));
      }
      const std::string expression = trimmed(inner);
      if (expression.empty()) throw problem("empty: write an expression, e.g. {{ devices }}");
      try {
        part.expression = Expression::parse(expression);
      } catch (const Error& e) {
        throw problem(e.what());
      }
      if (!part.format.empty() && !part.expression->run_key().empty()) {
        // run(key) | format: the value must be a number; checked when rendered.
      }
    }
    t.parts_.push_back(std::move(part));
    pos = close + kClose.size();
  }
  return t;
}

std::string TextTemplate::render(const trace::TraceData& data, const EvalContext& context) const {
  std::string out;
  size_t number = 0;
  for (const Part& part : parts_) {
    if (!part.expression) {
      out += part.text;
      number += part.fact ? 1 : 0;
      continue;
    }
    ++number;
    const std::string key = part.expression->run_key();
    if (!key.empty() && part.format.empty()) {
      const RunSetting setting = run_setting(data, key);
      if (const auto* text = std::get_if<std::string>(&setting)) {
        out += *text;
        continue;
      }
    }
    try {
      out += format_value(part.expression->evaluate(data, context), part.format);
    } catch (const Error& e) {
      throw Error(ErrorKind::kInvalidArgument,
                  fmt::format("placeholder {} '{}': {}", number, part.text, e.what()));
    }
  }
  return out;
}

bool TextTemplate::has_placeholders() const {
  return std::any_of(parts_.begin(), parts_.end(), [](const Part& p) { return p.expression.has_value(); });
}

bool TextTemplate::needs_moment() const {
  return std::any_of(parts_.begin(), parts_.end(),
                     [](const Part& p) { return p.expression && p.expression->needs_moment(); });
}

std::string format_value(double value, std::string_view format) {
  if (format.empty()) return format_number(value);
  if (format == "us") return fmt::format("{:.1f} µs", value / 1e3);
  if (format == "ms") return fmt::format("{:.3f} ms", value / 1e6);
  if (format == "time") return trace::format_duration(static_cast<int64_t>(std::llround(value)));
  if (format == "int") return grouped(std::llround(value));
  if (format == "words") {
    const int64_t n = std::llround(value);
    return n >= 0 && n < static_cast<int64_t>(kWords.size()) ? std::string(kWords[static_cast<size_t>(n)])
                                                             : grouped(n);
  }
  if (format == "x") return fmt::format("{:.2f}×", value);
  if (format == "pct") return fmt::format("{:.1f} %", value * 100.0);
  if (format == "f1") return fmt::format("{:.1f}", value);
  if (format == "f2") return fmt::format("{:.2f}", value);
  if (format == "f3") return fmt::format("{:.3f}", value);
  if (format == "ordinal") {
    const int64_t n = std::llround(value);
    const int64_t tens = (n < 0 ? -n : n) % 100, ones = (n < 0 ? -n : n) % 10;
    const char* suffix = (tens >= 11 && tens <= 13) ? "th"
                         : ones == 1                ? "st"
                         : ones == 2                ? "nd"
                         : ones == 3                ? "rd"
                                                    : "th";
    return fmt::format("{}{}", grouped(n), suffix);
  }
  // bytes
  constexpr std::array<const char*, 4> kUnits = {"KiB", "MiB", "GiB", "TiB"};
  if (std::abs(value) < 1024.0) return fmt::format("{} bytes", grouped(std::llround(value)));
  double scaled = value;
  size_t unit = 0;
  for (scaled /= 1024.0; std::abs(scaled) >= 1024.0 && unit + 1 < kUnits.size(); ++unit) scaled /= 1024.0;
  if (scaled == std::round(scaled)) return fmt::format("{} {}", static_cast<int64_t>(scaled), kUnits[unit]);
  return fmt::format("{:.2f} {}", scaled, kUnits[unit]);
}

std::vector<std::string> lint_text(std::string_view text) {
  std::vector<std::string> findings;
  // A placeholder of numbers alone ({{ 2 }}) reads nothing from the run: a literal in disguise.
  try {
    for (const std::string& constant : TextTemplate::parse(text).constant_placeholders())
      findings.push_back(fmt::format("placeholder '{}' reads nothing from the run", constant));
  } catch (const Error&) {
    // load_lesson reports a placeholder that does not parse
  }
  const std::string prose = prose_only(text);
  size_t i = 0;
  while (i < prose.size()) {
    if (!word_char(prose[i])) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < prose.size() && word_char(prose[end])) ++end;
    const std::string_view word = std::string_view(prose).substr(i, end - i);
    if (std::isdigit(static_cast<unsigned char>(word.front()))) {
      // A number: digits with their separators and decimals ("2,048", "1.5").
      while (end + 1 < prose.size() && (prose[end] == ',' || prose[end] == '.') &&
             std::isdigit(static_cast<unsigned char>(prose[end + 1]))) {
        ++end;
        while (end < prose.size() && word_char(prose[end])) ++end;
      }
      if (!is_reference(prose, i))
        findings.push_back(fmt::format("literal number '{}' in {}",
                                       std::string_view(prose).substr(i, end - i),
                                       excerpt(text, i, end - i)));
    } else {
      const std::string lower = ascii_lower(word);
      if (std::find(std::begin(kNumberWords), std::end(kNumberWords), lower) != std::end(kNumberWords))
        findings.push_back(fmt::format("number word '{}' in {}", word, excerpt(text, i, word.size())));
    }
    i = end;
  }
  return findings;
}

}  // namespace dpscope::lesson

namespace dpscope::lesson {

std::vector<std::string> TextTemplate::constant_placeholders() const {
  std::vector<std::string> constants;
  for (const Part& p : parts_)
    if (p.expression && p.expression->is_constant()) constants.push_back(p.text);
  return constants;
}

std::vector<std::string> TextTemplate::scenarios() const {
  std::vector<std::string> names;
  for (const Part& p : parts_)
    if (p.expression)
      for (std::string& name : p.expression->scenarios()) names.push_back(std::move(name));
  return names;
}

}  // namespace dpscope::lesson
