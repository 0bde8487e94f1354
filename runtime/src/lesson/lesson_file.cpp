// Reading lesson files (lesson/lesson.hpp): TOML via toml++, every key checked against the format
// (docs/lessons.md) so a typo is one line naming FILE:LINE and the key instead of a silently
// ignored setting. The file is read with stat() first and open(O_NONBLOCK) + fstat() after, so a
// FIFO or a device named like a lesson is refused instead of blocking the reader, and its size is
// bounded before it is read (kMaxLessonFileBytes).

#include <toml++/toml.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <sstream>

#include "dpscope/base/error.hpp"
#include "dpscope/base/file_guard.hpp"
#include "dpscope/lesson/lesson.hpp"
#include "dpscope/lesson/sandbox.hpp"
#include "dpscope/lesson/torch_scenario.hpp"

namespace dpscope::lesson {
namespace {

namespace fs = std::filesystem;

// load_lesson() checks a scenario's outputs against this stand-in for the scratch directory, which
// exists only once the lesson runs: lexically, "{scratch}/ckpt" is inside and "{scratch}/../x" is not.
const fs::path kPlaceholderScratch = "/{scratch}";
// The same for `{lesson-scratch}` in [[scenarios]]: apart from theirs.
const fs::path kPlaceholderLessonScratch = "/{lesson-scratch}";

// The bytes of lesson file `file`, at most kMaxLessonFileBytes. Never blocks: InputFile checks the
// type before opening and after (the name may have been swapped in between), and opens non-blocking.
std::string read_lesson_text(const fs::path& file) {
  if (std::string problem = lesson_path_problem(file); !problem.empty()) throw Error(ErrorKind::kIo, problem);
  const InputFile in = InputFile::open(file, "lesson");
  if (in.size_bytes() > kMaxLessonFileBytes)
    throw Error(ErrorKind::kFormat,
                fmt::format("{}: the file is {} bytes; a lesson file is at most {} bytes (1 MiB)",
                            file.string(), in.size_bytes(), kMaxLessonFileBytes));
  return in.read_all("lesson");  // at most the size it had when opened: a file that grows stays bounded
}

// toml++ bounds the nesting of arrays and inline tables (256) but not of dotted keys, and it builds,
// and later destroys, a table per part recursively: `a.a.a...` 50,000 parts deep overflows the stack.
// This pass over the text bounds both before toml++ sees it. Strings and comments are skipped; a dot
// outside them belongs to a key (or to a float, which has one).
inline constexpr int kMaxTomlNesting = 32;     // '[' and '{' open at once
inline constexpr int kMaxDottedKeyParts = 16;  // a.b.c: 3 parts

struct ShapeProblem {
  int64_t line = 0;
  std::string what;  // "" when the text is within bounds
};

ShapeProblem toml_shape_problem(std::string_view text) {
  int64_t line = 1;
  int nesting = 0, dots = 0;
  size_t i = 0;
  const auto at = [&](std::string_view s) { return text.substr(i, s.size()) == s; };
  while (i < text.size()) {
    const char c = text[i];
    if (c == '\n') {
      ++line;
      dots = 0;
    } else if (c == '#') {
      while (i + 1 < text.size() && text[i + 1] != '\n') ++i;
    } else if (c == '"' || c == '\'') {
      const std::string_view close = at(c == '"' ? R"(""")" : "'''") ? text.substr(i, 3) : text.substr(i, 1);
      i += close.size();
      while (i < text.size() && !at(close)) {
        if (text[i] == '\n') {
          ++line;
          if (close.size() == 1)
            break;  // a one-line string ends with its line (toml++ says it is unterminated)
        }
        if (c == '"' && text[i] == '\\' && i + 1 < text.size() && text[++i] == '\n') ++line;  // an escape
        ++i;
      }
      i += close.size() - 1;                                                     // on its last quote
      while (close.size() == 3 && i + 1 < text.size() && text[i + 1] == c) ++i;  // """a"""": quotes inside
    } else if (c == '[' || c == '{') {
      dots = 0;
      if (++nesting > kMaxTomlNesting)
        return {line, fmt::format("arrays, tables and inline tables nest more than {} levels deep",
                                  kMaxTomlNesting)};
    } else if (c == ']' || c == '}') {
      dots = 0;
      nesting = std::max(0, nesting - 1);
    } else if (c == '=' || c == ',') {
      dots = 0;
    } else if (c == '.' && ++dots >= kMaxDottedKeyParts) {
      return {line, fmt::format("a dotted key has more than {} parts", kMaxDottedKeyParts)};
    }
    ++i;
  }
  return {};
}

const char* type_name(toml::node_type type) {
  switch (type) {
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a number";
    case toml::node_type::boolean: return "a boolean";
    default: return "a date or time";
  }
}

// Reads one lesson file; every error is "FILE:LINE: message".
class LessonReader {
 public:
  explicit LessonReader(fs::path file) : file_(std::move(file)) {}

  Lesson read(std::string_view text) {
    if (const ShapeProblem shape = toml_shape_problem(text); !shape.what.empty())
      fail(shape.line, shape.what);
    toml::table root;
    try {
      root = toml::parse(text, file_.string());
    } catch (const toml::parse_error& e) {
      fail(e.source().begin.line, std::string(e.description()));
    }
    Lesson lesson;
    lesson_ = &lesson;
    lesson.file = file_;
    check_keys(root,
               {"id", "title", "goals", "minutes", "scenario", "scenarios", "knobs", "snippet", "chapters",
                "questions", "exercises"},
               "the lesson");
    lesson.id = string(root, "id", "the lesson");
    if (lesson.id != file_.stem().string())
      fail(line_of(root, "id"), fmt::format("id '{}' must be the file's name without .toml ('{}')", lesson.id,
                                            file_.stem().string()));
    lesson.title = string(root, "title", "the lesson");
    at_most(root, "goals", kMaxGoals);
    at_most(root, "knobs", kMaxKnobs);
    at_most(root, "chapters", kMaxChapters);
    at_most(root, "questions", kMaxQuestions);
    for (const toml::node* goal : array(root, "goals", "the lesson"))
      lesson.goals.push_back(as_string(*goal, "goals"));
    const int64_t minutes = integer(root, "minutes", "the lesson");
    if (minutes < 1 || minutes > 240)
      fail(line_of(root, "minutes"), fmt::format("minutes must be 1 to 240, got {}", minutes));
    lesson.minutes = static_cast<int>(minutes);
    lesson.snippet = string(root, "snippet", "the lesson");
    read_scenario(table(root, "scenario", "the lesson"), lesson);
    if (root.contains("knobs"))
      for (const toml::table* t : tables(root, "knobs", "the lesson"))
        lesson.knobs.push_back(read_knob(*t, lesson));
    // After the knobs: a scenario may share some of them (its `knobs`).
    at_most(root, "scenarios", kMaxOtherScenarios);
    if (root.contains("scenarios"))
      for (const toml::table* t : tables(root, "scenarios", "the lesson"))
        lesson.scenarios.push_back(read_other_scenario(*t, lesson));
    for (const toml::table* t : tables(root, "chapters", "the lesson"))
      lesson.chapters.push_back(read_chapter(*t, lesson));
    if (lesson.chapters.empty()) fail(line_of(root, "chapters"), "a lesson needs at least one [[chapters]]");
    if (root.contains("questions")) {
      int n = 0;
      for (const toml::table* t : tables(root, "questions", "the lesson"))
        lesson.questions.push_back(read_question(*t, lesson, ++n));
    }
    at_most(root, "exercises", kMaxExercises);
    if (root.contains("exercises")) {
      int n = 0;
      for (const toml::table* t : tables(root, "exercises", "the lesson"))
        lesson.exercises.push_back(read_exercise(*t, lesson, ++n));
    }
    return lesson;
  }

 private:
  [[noreturn]] void fail(int64_t line, const std::string& message) const {
    throw Error(ErrorKind::kFormat, fmt::format("{}:{}: {}", file_.string(), line, message));
  }
  static int64_t line_of(const toml::node& node) { return node.source().begin.line; }
  int64_t line_of(const toml::table& t, std::string_view key) const {
    const toml::node* node = t.get(key);
    return node ? line_of(*node) : line_of(t);
  }

  void check_keys(const toml::table& t, std::initializer_list<std::string_view> allowed,
                  std::string_view context) {
    for (const auto& [key, node] : t) {
      if (std::find(allowed.begin(), allowed.end(), key.str()) != allowed.end()) continue;
      fail(key.source().begin.line > 0 ? key.source().begin.line : line_of(node),
           fmt::format("unknown key '{}' in {} (expected one of: {})", key.str(), context,
                       fmt::join(allowed, ", ")));
    }
  }

  // An array of `key` in `t` with more than `limit` items is refused before any is read.
  void at_most(const toml::table& t, std::string_view key, size_t limit) {
    const toml::node* node = t.get(key);
    const toml::array* items = node ? node->as_array() : nullptr;
    if (items && items->size() > limit)
      fail(line_of(*node),
           fmt::format("'{}' has {} items; a lesson has at most {}", key, items->size(), limit));
  }

  const toml::node& require(const toml::table& t, std::string_view key, std::string_view context) {
    const toml::node* node = t.get(key);
    if (!node) fail(line_of(t), fmt::format("{} is missing '{}'", context, key));
    return *node;
  }
  [[noreturn]] void wrong_type(const toml::node& node, std::string_view key, std::string_view want) {
    fail(line_of(node), fmt::format("'{}' must be {}, got {}", key, want, type_name(node.type())));
  }

  // Every string of a lesson: no control character but a newline or a tab. A NUL would cut a
  // scenario argument short on the command line ("--save\0x" is "--save" to the parser but not to
  // the sandbox check), and an escape sequence would drive the terminal `lesson run` prints to.
  std::string as_string(const toml::node& node, std::string_view key) {
    const auto* s = node.as_string();
    if (!s) wrong_type(node, key, "a string");
    for (const char c : s->get())
      if ((static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t') || c == 0x7f)
        fail(line_of(node),
             fmt::format("'{}' holds the control character U+{:04X}: only newlines and tabs are "
                         "allowed",
                         key, static_cast<unsigned char>(c)));
    return s->get();
  }
  std::string string(const toml::table& t, std::string_view key, std::string_view context) {
    return as_string(require(t, key, context), key);
  }
  int64_t integer(const toml::table& t, std::string_view key, std::string_view context) {
    const toml::node& node = require(t, key, context);
    if (const auto* i = node.as_integer()) return i->get();
    wrong_type(node, key, "an integer");
  }
  double as_number(const toml::node& node, std::string_view key) {
    if (const auto* i = node.as_integer()) return static_cast<double>(i->get());
    if (const auto* f = node.as_floating_point()) return f->get();
    wrong_type(node, key, "a number");
  }
  const toml::table& table(const toml::table& t, std::string_view key, std::string_view context) {
    const toml::node& node = require(t, key, context);
    if (const auto* table = node.as_table()) return *table;
    wrong_type(node, key, "a table");
  }
  std::vector<const toml::node*> array(const toml::table& t, std::string_view key, std::string_view context) {
    const toml::node& node = require(t, key, context);
    const toml::array* a = node.as_array();
    if (!a) wrong_type(node, key, "an array");
    std::vector<const toml::node*> items;
    for (const toml::node& item : *a) items.push_back(&item);
    return items;
  }
  std::vector<const toml::table*> tables(const toml::table& t, std::string_view key,
                                         std::string_view context) {
    std::vector<const toml::table*> out;
    for (const toml::node* item : array(t, key, context)) {
      const toml::table* table = item->as_table();
      if (!table)
        fail(line_of(*item), fmt::format("'{}' must be an array of tables ([[{}]]), got {}", key, key,
                                         type_name(item->type())));
      out.push_back(table);
    }
    return out;
  }

  void read_scenario(const toml::table& t, Lesson& lesson) {
    check_keys(t, {"args", "expect_error"}, "[scenario]");
    if (t.contains("expect_error")) {
      lesson.expect_error = string(t, "expect_error", "[scenario]");
      if (lesson.expect_error.empty())
        fail(line_of(t, "expect_error"),
             "[scenario] expect_error must be a part of the error message the run ends with, not empty");
    }
    at_most(t, "args", kMaxScenarioArgs);
    for (const toml::node* arg : array(t, "args", "[scenario]"))
      lesson.scenario.push_back(as_string(*arg, "args"));
    const int64_t line = line_of(t, "args");
    if (is_torch_scenario(lesson.scenario)) {
      if (std::string problem = torch_scenario_problem(lesson.scenario); !problem.empty())
        fail(line, fmt::format("[scenario] args: {}", problem));
      return;
    }
    if (lesson.scenario.empty() || (lesson.scenario[0] != "train" && lesson.scenario[0] != "bench"))
      fail(line,
           "[scenario] args must start with \"train\" or \"bench\" (a dpscope command line) or \"launch\" (a "
           "PyTorch script)");
    for (const std::string& arg : lesson.scenario) {
      if (arg.find(kLessonScratch) != std::string::npos)
        fail(line, fmt::format("[scenario] args: {} is for [[scenarios]]: the lesson's own scenario writes "
                               "and reads {{scratch}}",
                               kLessonScratch));
      if (arg == "--trace" || arg.starts_with("--trace="))
        fail(line, "[scenario] args must not give --trace: the lesson chooses where the trace goes");
      if (is_help_flag(arg))
        fail(line, fmt::format("[scenario] args must not give {}: it prints help or the version instead of "
                               "running the scenario",
                               arg));
    }
    if (const std::string problem = scenario_sandbox_problem(lesson.scenario, kPlaceholderScratch, false);
        !problem.empty())
      fail(line, fmt::format("[scenario] args: {}", problem));
  }

  // [[scenarios]]: another run to compare with, by name; the same rules as [scenario] args, and no
  // knob applies to it.
  OtherScenario read_other_scenario(const toml::table& t, const Lesson& lesson) {
    const std::string context = fmt::format("[[scenarios]] {}", lesson.scenarios.size() + 1);
    check_keys(t, {"name", "args", "knobs"}, context);
    OtherScenario other;
    other.name = string(t, "name", context);
    if (other.name.empty() || other.name.size() > 64 ||
        other.name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") != std::string::npos)
      fail(line_of(t, "name"),
           fmt::format("{} name '{}' must be lower-case letters, digits and '-'", context, other.name));
    for (const OtherScenario& s : lesson.scenarios)
      if (s.name == other.name)
        fail(line_of(t, "name"), fmt::format("two [[scenarios]] are named '{}'", other.name));
    at_most(t, "args", kMaxScenarioArgs);
    for (const toml::node* arg : array(t, "args", context)) other.args.push_back(as_string(*arg, "args"));
    const int64_t line = line_of(t, "args");
    other.line = static_cast<int>(line);
    if (other.args.empty() || (other.args[0] != "train" && other.args[0] != "bench"))
      fail(line, fmt::format("{} args must start with \"train\" or \"bench\"", context));
    for (const std::string& arg : other.args) {
      if (arg == "--trace" || arg.starts_with("--trace="))
        fail(line,
             fmt::format("{} args must not give --trace: the lesson chooses where the trace goes", context));
      if (is_help_flag(arg)) fail(line, fmt::format("{} args must not give {}", context, arg));
    }
    // `{lesson-scratch}` (the lesson's own scenario's files, e.g. the data a PyTorch script wrote)
    // stands apart from this run's `{scratch}`: reading it is fine, writing there is not.
    std::vector<std::string> placed = other.args;
    for (std::string& arg : placed) arg = replace_lesson_scratch(arg, kPlaceholderLessonScratch.string());
    if (const std::string problem = scenario_sandbox_problem(placed, kPlaceholderScratch, false);
        !problem.empty())
      fail(line, fmt::format("{} args: {}", context, problem));
    if (t.contains("knobs"))
      for (const toml::node* item : array(t, "knobs", context)) {
        const std::string flag = as_string(*item, "knobs");
        const Knob* knob = lesson.find_knob(flag);
        if (knob == nullptr)
          fail(line_of(*item), fmt::format("{} knobs: '{}' is no knob of the lesson", context, flag));
        other.knobs.push_back(knob->flag);
      }
    return other;
  }

  // Every `@name(...)` of `e` names one of the lesson's [[scenarios]].
  void check_scenarios(const std::vector<std::string>& names, const Lesson& lesson, int64_t line,
                       const std::string& where) {
    for (const std::string& name : names) {
      const bool known = std::any_of(lesson.scenarios.begin(), lesson.scenarios.end(),
                                     [&](const OtherScenario& s) { return s.name == name; });
      if (!known)
        fail(line, fmt::format("{}: '@{}' names no [[scenarios]] of the lesson{}", where, name,
                               lesson.scenarios.empty() ? "" : fmt::format(" (scenarios: {})", [&] {
                                 std::vector<std::string> all;
                                 for (const OtherScenario& s : lesson.scenarios) all.push_back(s.name);
                                 return fmt::format("{}", fmt::join(all, ", "));
                               }())));
    }
  }

  Knob read_knob(const toml::table& t, const Lesson& lesson) {
    check_keys(t, {"flag", "label", "min", "max", "step", "choices", "switch", "default", "fails"},
               "[[knobs]]");
    Knob knob;
    knob.line = static_cast<int>(line_of(t));
    knob.flag = string(t, "flag", "[[knobs]]");
    if (!knob.flag.starts_with("--"))
      fail(line_of(t, "flag"), fmt::format("knob flag '{}' must start with --", knob.flag));
    if (knob.flag.size() < 3 || knob.flag.size() > 64 ||
        knob.flag.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-", 2) != std::string::npos)
      fail(line_of(t, "flag"),
           fmt::format("knob flag '{}' must be --NAME (lower-case letters, digits and '-')", knob.flag));
    if (is_help_flag(knob.flag) || knob.flag.starts_with("--trace") || names_a_file(knob.flag))
      fail(line_of(t, "flag"),
           fmt::format("knob flag {} cannot be a knob: {}", knob.flag,
                       is_help_flag(knob.flag) ? "it prints help or the version instead of running"
                                               : "it names a file, which a student must not choose"));
    knob.label = string(t, "label", "[[knobs]]");
    for (const std::string& arg : lesson.scenario)
      if (arg == knob.flag)
        fail(line_of(t, "flag"),
             fmt::format("{} is a knob: leave it out of [scenario] args (its default applies)", knob.flag));
    if (lesson.find_knob(knob.flag)) fail(line_of(t, "flag"), fmt::format("two knobs turn {}", knob.flag));
    const toml::node& def = require(t, "default", "[[knobs]]");
    const bool ranged = t.contains("min") || t.contains("max") || t.contains("step");
    if (t.contains("switch") && (ranged || t.contains("choices")))
      fail(line_of(t, "switch"),
           fmt::format("knob {}: a switch has no min, max, step or choices", knob.flag));
    if (t.contains("choices") && ranged)
      fail(line_of(t, "choices"),
           fmt::format("knob {}: give either choices or min/max/step, not both", knob.flag));
    if (t.contains("switch")) {
      const toml::node& node = *t.get("switch");
      if (!node.as_boolean() || !node.as_boolean()->get()) wrong_type(node, "switch", "true (or left out)");
      knob.is_switch = true;
      knob.choices = {"off", "on"};
      knob.default_value = as_string(def, "default");
    } else if (t.contains("choices")) {
      for (const toml::node* c : array(t, "choices", "[[knobs]]")) {
        std::string choice = as_string(*c, "choices");
        if (const std::string problem = choice_problem(choice); !problem.empty())
          fail(line_of(*c), fmt::format("knob {}: choice '{}' {}", knob.flag, choice, problem));
        if (std::find(knob.choices.begin(), knob.choices.end(), choice) != knob.choices.end())
          fail(line_of(*c), fmt::format("knob {}: choice '{}' is given twice", knob.flag, choice));
        knob.choices.push_back(std::move(choice));
      }
      if (knob.choices.empty()) fail(line_of(t, "choices"), "choices must not be empty");
      if (knob.choices.size() > static_cast<size_t>(kMaxKnobValues))
        fail(line_of(t, "choices"),
             fmt::format("knob {}: {} choices; at most {}", knob.flag, knob.choices.size(), kMaxKnobValues));
      knob.default_value = as_string(def, "default");
    } else {
      knob.numeric = true;
      knob.min = knob_number(t, "min", knob.flag);
      knob.max = knob_number(t, "max", knob.flag);
      if (t.contains("step")) knob.step = knob_number(t, "step", knob.flag);
      if (!(knob.min <= knob.max))
        fail(line_of(t, "max"),
             fmt::format("knob {}: needs min <= max, got {} > {}", knob.flag, knob.min, knob.max));
      if (!(knob.step >= kMinKnobStep))
        fail(line_of(t, "step"),
             fmt::format("knob {}: step must be at least {}, got {}", knob.flag, kMinKnobStep, knob.step));
      // A slider's stops: a bounded number, so the viewer and `lesson check` never walk millions.
      const double values = std::floor((knob.max - knob.min) / knob.step + 1e-9) + 1.0;
      if (!(values <= static_cast<double>(kMaxKnobValues)))
        fail(line_of(t, "step"),
             fmt::format("knob {}: min {} to max {} in steps of {} gives {:.0f} values; at most {}",
                         knob.flag, knob.min, knob.max, knob.step, values, kMaxKnobValues));
      const double value = knob_number(t, "default", knob.flag);
      knob.default_value = std::floor(value) == value ? fmt::format("{}", static_cast<int64_t>(value))
                                                      : fmt::format("{}", value);
    }
    if (const std::string problem = knob.check(knob.default_value); !problem.empty())
      fail(line_of(def), fmt::format("default: {}", problem));
    if (t.contains("fails")) read_knob_fails(table(t, "fails", "[[knobs]]"), knob);
    return knob;
  }

  // `fails = { t4 = "describes one machine" }`: values of the knob whose run is meant to fail, each
  // with a part of the error it ends with (`lesson check` proves it does).
  void read_knob_fails(const toml::table& fails, Knob& knob) {
    if (fails.size() > static_cast<size_t>(kMaxKnobValues))
      fail(line_of(fails), fmt::format("knob {}: fails names {} values; at most {}", knob.flag, fails.size(),
                                       kMaxKnobValues));
    for (const auto& [key, node] : fails) {
      const std::string value(key.str());
      if (const std::string problem = knob.check(value); !problem.empty())
        fail(line_of(node),
             fmt::format("knob {}: fails: '{}' is not a value of the knob: {}", knob.flag, value, problem));
      if (value == knob.default_value)
        fail(line_of(node), fmt::format("knob {}: fails: '{}' is the default, whose run is the lesson's own "
                                        "([scenario] expect_error declares a lesson whose run fails)",
                                        knob.flag, value));
      std::string text = as_string(node, "fails");
      if (text.empty())
        fail(line_of(node),
             fmt::format("knob {}: fails: '{}' must give a part of the error message, not \"\"", knob.flag,
                         value));
      knob.fails[value] = std::move(text);
    }
  }

  // A knob's numeric key: finite and at most kMaxKnobMagnitude in size.
  double knob_number(const toml::table& t, std::string_view key, const std::string& flag) {
    const toml::node& node = require(t, key, "[[knobs]] without choices");
    const double value = as_number(node, key);
    if (!(std::abs(value) <= kMaxKnobMagnitude))
      fail(line_of(node), fmt::format("knob {}: {} must be a finite number from -{:g} to {:g}, got {}", flag,
                                      key, kMaxKnobMagnitude, kMaxKnobMagnitude, value));
    return value;
  }

  // Why `choice` cannot be a knob's value on a command line; "" when it can.
  static std::string choice_problem(const std::string& choice) {
    if (choice.empty()) return "is empty";
    if (choice.size() > 256) return "is longer than 256 characters";
    if (choice.starts_with("-") &&
        !(choice.size() > 1 && std::isdigit(static_cast<unsigned char>(choice[1]))))
      return "starts with '-': it would be read as a flag";
    for (const char c : choice)
      if (std::iscntrl(static_cast<unsigned char>(c)) || c == ' ')
        return "holds a space or a control character";
    return "";
  }

  Chapter read_chapter(const toml::table& t, const Lesson& lesson) {
    const std::string context = fmt::format("[[chapters]] {}", lesson.chapters.size() + 1);
    check_keys(t, {"title", "trigger", "narration", "snippet_line", "expect", "compare"}, context);
    Chapter chapter;
    chapter.title = string(t, "title", context);
    chapter.narration = string(t, "narration", context);
    const std::string where =
        fmt::format("lesson {}, chapter {} '{}'", lesson.id, lesson.chapters.size() + 1, chapter.title);
    chapter.narration_text = text_template(t, "narration", where, chapter.narration);
    if (t.contains("expect")) {
      at_most(t, "expect", kMaxExpects);
      for (const toml::node* item : array(t, "expect", context)) {
        const std::string text = as_string(*item, "expect");
        try {
          chapter.expect.push_back({Expression::parse(text), static_cast<int>(line_of(*item))});
        } catch (const Error& e) {
          fail(line_of(*item), fmt::format("{}: expect '{}': {}", where, text, e.what()));
        }
        check_scenarios(chapter.expect.back().condition.scenarios(), lesson, line_of(*item),
                        fmt::format("{}: expect", where));
      }
    }
    const toml::table& trigger = table(t, "trigger", context);
    if (trigger.empty() || (trigger.size() == 1 && trigger.contains("nth")))
      fail(line_of(t, "trigger"),
           fmt::format("{} trigger {} matches every event: name at least one of its keys (type, name, "
                       "category, rank, step, ...)",
                       context, trigger.empty() ? "is empty and" : "has only nth and"));
    for (const auto& [key, node] : trigger) {
      FilterValue value;
      if (const auto* i = node.as_integer()) {
        value = i->get();
      } else if (const auto* s = node.as_string()) {
        value = s->get();
      } else {
        wrong_type(node, key.str(), "an integer or a string");
      }
      if (const std::string problem = set_filter_key(chapter.trigger, key.str(), value); !problem.empty())
        fail(line_of(node), fmt::format("{} trigger: {}", context, problem));
    }
    if (chapter.trigger.at)
      fail(line_of(t, "trigger"),
           fmt::format("{} trigger: at= reads a chapter's moment; a trigger makes one", context));
    if (chapter.trigger.nth == 0) chapter.trigger.nth = 1;
    std::ostringstream text;
    text << trigger;
    chapter.trigger.text = text.str();
    const int64_t line = integer(t, "snippet_line", context);
    if (line < 1 || line > lesson.snippet_lines())
      fail(line_of(t, "snippet_line"),
           fmt::format("{} snippet_line must be 1 to {} (the snippet's lines), got {}", context,
                       lesson.snippet_lines(), line));
    chapter.snippet_line = static_cast<int>(line);
    if (t.contains("compare")) read_compare(t, lesson, context, chapter);
    return chapter;
  }

  // `compare`: 2 to 4 distinct runs, each "main" or a [[scenarios]] name (read before the chapters).
  void read_compare(const toml::table& t, const Lesson& lesson, const std::string& context,
                    Chapter& chapter) {
    const int64_t line = line_of(t, "compare");
    chapter.compare_line = static_cast<int>(line);
    const std::vector<const toml::node*> items = array(t, "compare", context);
    if (items.size() < kMinCompared || items.size() > kMaxCompared)
      fail(line, fmt::format("{} compare must name {} to {} runs to show side by side, got {}", context,
                             kMinCompared, kMaxCompared, items.size()));
    std::vector<std::string> names;
    for (const toml::node* item : items) {
      const std::string name = as_string(*item, "compare");
      const bool known =
          name == kMainRun || std::any_of(lesson.scenarios.begin(), lesson.scenarios.end(),
                                          [&](const OtherScenario& s) { return s.name == name; });
      if (!known) {
        std::vector<std::string> all = {std::string(kMainRun)};
        for (const OtherScenario& s : lesson.scenarios) all.push_back(s.name);
        fail(line_of(*item), fmt::format("{} compare: '{}' is no run of the lesson (runs: {}; \"{}\" is the "
                                         "lesson's own)",
                                         context, name, fmt::join(all, ", "), kMainRun));
      }
      if (std::find(names.begin(), names.end(), name) != names.end())
        fail(line_of(*item), fmt::format("{} compare: '{}' is named twice", context, name));
      names.push_back(name);
    }
    chapter.compare = std::move(names);
  }

  Question read_question(const toml::table& t, const Lesson& lesson, int number) {
    const std::string context = fmt::format("question {}", number);
    check_keys(t, {"chapter", "prompt", "answer", "unit", "tolerance", "explain"}, context);
    Question q;
    const int64_t chapter = integer(t, "chapter", context);
    if (chapter < 1 || chapter > static_cast<int64_t>(lesson.chapters.size()))
      fail(line_of(t, "chapter"),
           fmt::format("{} chapter must be 1 to {}, got {}", context, lesson.chapters.size(), chapter));
    q.chapter = static_cast<int>(chapter);
    q.prompt = string(t, "prompt", context);
    const std::string where = fmt::format("lesson {}, {}", lesson.id, context);
    q.prompt_text = text_template(t, "prompt", where, q.prompt);
    const std::string answer = string(t, "answer", context);
    try {
      q.answer = Expression::parse(answer);
    } catch (const Error& e) {
      fail(line_of(t, "answer"), fmt::format("lesson {}, {}: answer {}", lesson.id, context, e.what()));
    }
    check_scenarios(q.answer.scenarios(), lesson, line_of(t, "answer"), fmt::format("{}: answer", where));
    q.unit = string(t, "unit", context);
    if (t.contains("tolerance")) {
      q.tolerance = as_number(*t.get("tolerance"), "tolerance");
      if (!(q.tolerance >= 0.0 && q.tolerance < 1.0))
        fail(line_of(t, "tolerance"),
             fmt::format("{} tolerance is relative: 0 to below 1, got {}", context, q.tolerance));
    }
    if (t.contains("explain")) {
      q.explain = as_string(*t.get("explain"), "explain");
      q.explain_text = text_template(t, "explain", where, q.explain);
    }
    return q;
  }

  // `key`'s text as a TextTemplate; a bad placeholder is one line naming the lesson and the item.
  TextTemplate text_template(const toml::table& t, std::string_view key, const std::string& where,
                             const std::string& text) {
    TextTemplate parsed;
    try {
      parsed = TextTemplate::parse(text);
    } catch (const Error& e) {
      fail(line_of(t, key), fmt::format("{}: {}: {}", where, key, e.what()));
    }
    check_scenarios(parsed.scenarios(), *lesson_, line_of(t, key), fmt::format("{}: {}", where, key));
    return parsed;
  }

  Exercise read_exercise(const toml::table& t, const Lesson& lesson, int number) {
    const std::string context = fmt::format("exercise {}", number);
    const std::string where = fmt::format("lesson {}, {}", lesson.id, context);
    check_keys(t, {"prompt", "knobs", "answer", "unit", "tolerance", "explain"}, context);
    Exercise x;
    x.line = static_cast<int>(line_of(t));
    x.prompt = string(t, "prompt", context);
    x.prompt_text = text_template(t, "prompt", where, x.prompt);
    for (const auto& [key, node] : table(t, "knobs", context)) {
      std::string value;
      if (const auto* i = node.as_integer()) {
        value = std::to_string(i->get());
      } else if (const auto* f = node.as_floating_point()) {
        value = fmt::format("{}", f->get());
      } else {
        value = as_string(node, key.str());
      }
      const Knob* knob = lesson.find_knob(key.str());
      if (knob == nullptr)
        fail(line_of(node), fmt::format("{}: '{}' is no knob of the lesson", where, key.str()));
      if (const std::string problem = knob->check(value); !problem.empty())
        fail(line_of(node), fmt::format("{}: {}", where, problem));
      x.knobs[knob->flag] = value;
    }
    if (x.knobs.empty())
      fail(line_of(t, "knobs"), fmt::format("{}: knobs must turn at least one knob", where));
    const std::string answer = string(t, "answer", context);
    try {
      x.answer = Expression::parse(answer);
    } catch (const Error& e) {
      fail(line_of(t, "answer"), fmt::format("{}: answer {}", where, e.what()));
    }
    if (x.answer.needs_moment())
      fail(line_of(t, "answer"),
           fmt::format("{}: answer uses at=, but an exercise has no chapter's moment", where));
    x.unit = string(t, "unit", context);
    if (t.contains("tolerance")) {
      x.tolerance = as_number(*t.get("tolerance"), "tolerance");
      if (!(x.tolerance >= 0.0 && x.tolerance < 1.0))
        fail(line_of(t, "tolerance"),
             fmt::format("{} tolerance is relative: 0 to below 1, got {}", context, x.tolerance));
    }
    if (t.contains("explain")) {
      x.explain = as_string(*t.get("explain"), "explain");
      x.explain_text = text_template(t, "explain", where, x.explain);
    }
    return x;
  }

  fs::path file_;
  const Lesson* lesson_ = nullptr;  // the lesson being read (its [[scenarios]] for `@name` checks)
};

}  // namespace

std::string lesson_path_problem(const fs::path& path) {
  const PathStatus status = path_status(path);
  if (status.kind == FileKind::kDirectory)
    return fmt::format(
        "lesson {} is a directory, not a lesson file: give a directory of lessons as "
        "--lessons-dir {}",
        path.string(), path.string());
  if (const std::string why = why_not_readable(path); !why.empty())
    return fmt::format("lesson {}{}{}", path.string(), why.rfind("is ", 0) == 0 ? " " : ": ", why);
  return "";
}

std::string Knob::check(const std::string& value) const {
  if (!numeric) {
    if (std::find(choices.begin(), choices.end(), value) != choices.end()) return "";
    return fmt::format("{} must be one of: {}; got '{}'", flag, fmt::join(choices, ", "), value);
  }
  double number = 0.0;
  size_t used = 0;
  // A decimal number as a command line takes it: no spaces, hex, "inf" or "nan" for stod to accept.
  const bool decimal = !value.empty() &&
                       (std::isdigit(static_cast<unsigned char>(value[0])) || value[0] == '-') &&
                       value.find_first_not_of("0123456789.-+eE") == std::string::npos;
  if (decimal) {
    try {
      number = std::stod(value, &used);
    } catch (const std::exception&) {
      used = 0;
    }
  }
  const double steps = (number - min) / step;
  const bool on_grid = std::abs(steps - std::round(steps)) < 1e-9;
  if (used == 0 || used != value.size() || !(number >= min && number <= max) || !on_grid)
    return fmt::format("{} must be a number from {} to {} in steps of {}, got '{}'", flag, min, max, step,
                       value);
  // On a grid of whole numbers a value is written as one: "2.0" passed here and then failed the
  // scenario's integer flag ("Could not convert: --devices = 2.0"), blamed on the lesson.
  const auto whole = [](double v) { return v == std::round(v); };
  if (whole(min) && whole(max) && whole(step) && value.find_first_not_of("0123456789-") != std::string::npos)
    return fmt::format("{} takes whole numbers: write '{:g}', not '{}'", flag, number, value);
  return "";
}

const Knob* Lesson::find_knob(std::string_view flag) const {
  for (const Knob& k : knobs)
    if (k.flag == flag || std::string_view(k.flag).substr(2) == flag) return &k;
  return nullptr;
}

int Lesson::snippet_lines() const {
  if (snippet.empty()) return 0;
  const auto newlines = std::count(snippet.begin(), snippet.end(), '\n');
  return static_cast<int>(newlines) + (snippet.back() == '\n' ? 0 : 1);
}

Lesson load_lesson(const std::filesystem::path& file) { return parse_lesson(read_lesson_text(file), file); }

Lesson parse_lesson(std::string_view text, const std::filesystem::path& file) {
  if (text.size() > kMaxLessonFileBytes)
    throw Error(ErrorKind::kFormat,
                fmt::format("{}: the text is {} bytes; a lesson file is at most {} bytes (1 MiB)",
                            file.string(), text.size(), kMaxLessonFileBytes));
  return LessonReader(file).read(text);
}

std::vector<std::filesystem::path> lesson_files(const std::filesystem::path& dir) {
  std::error_code ec;
  const fs::file_status status = fs::status(dir, ec);
  DPS_CHECK(fs::exists(status), ErrorKind::kIo, "lessons directory {} does not exist", dir.string());
  DPS_CHECK(
      fs::is_directory(status), ErrorKind::kIo, "lessons directory {} is not a directory ({})", dir.string(),
      fs::is_regular_file(status) ? "a file: give it as the lesson, not --lessons-dir" : "a special file");
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
    if (entry.path().extension() == ".toml") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<Lesson> load_lessons(const std::filesystem::path& dir) {
  std::vector<Lesson> lessons;
  for (const auto& file : lesson_files(dir)) lessons.push_back(load_lesson(file));
  return lessons;
}

namespace {
std::vector<std::string> with_knobs(const Lesson& lesson, std::vector<std::string> args,
                                    const std::map<std::string, std::string>& overrides,
                                    const std::vector<std::string>* only);
}  // namespace

std::vector<std::string> scenario_args(const Lesson& lesson,
                                       const std::map<std::string, std::string>& overrides) {
  std::map<const Knob*, std::string> turned;  // knob -> the flag that turned it, as given
  for (const auto& [flag, value] : overrides) {
    const Knob* knob = lesson.find_knob(flag);
    std::vector<std::string> flags;
    for (const Knob& k : lesson.knobs) flags.push_back(k.flag);
    DPS_CHECK(knob != nullptr, ErrorKind::kUsage, "lesson {} has no knob {} (its knobs: {})", lesson.id, flag,
              flags.empty() ? "none" : fmt::format("{}", fmt::join(flags, ", ")));
    const auto [seen, fresh] = turned.emplace(knob, flag);
    DPS_CHECK(fresh, ErrorKind::kUsage, "lesson {}: knob {} is turned twice ({} and {}); give it once",
              lesson.id, knob->flag, seen->second, flag);
    const std::string problem = knob->check(value);
    DPS_CHECK(problem.empty(), ErrorKind::kUsage, "lesson {}: {}", lesson.id, problem);
  }
  return with_knobs(lesson, lesson.scenario, overrides, nullptr);
}

std::vector<std::string> other_scenario_args(const Lesson& lesson, const OtherScenario& other,
                                             const std::map<std::string, std::string>& overrides) {
  (void)scenario_args(lesson, overrides);  // the same checks of the overrides
  return with_knobs(lesson, other.args, overrides, &other.knobs);
}

namespace {

// `args` with each knob (of `only`, when given) appended at its value.
std::vector<std::string> with_knobs(const Lesson& lesson, std::vector<std::string> args,
                                    const std::map<std::string, std::string>& overrides,
                                    const std::vector<std::string>* only) {
  for (const Knob& knob : lesson.knobs) {
    if (only != nullptr && std::find(only->begin(), only->end(), knob.flag) == only->end()) continue;
    std::string value = knob.default_value;
    for (const auto& [flag, v] : overrides)
      if (lesson.find_knob(flag) == &knob) value = v;
    if (knob.is_switch) {
      if (value == "on") args.push_back(knob.flag);
    } else if (value != "none") {
      args.push_back(knob.flag);
      args.push_back(value);
    }
  }
  return args;
}

}  // namespace

}  // namespace dpscope::lesson
