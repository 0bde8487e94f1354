// The scenario sandbox (lesson/sandbox.hpp): which flags name files, and whether their paths stay
// inside the lesson's scratch directory, lexically or resolved on the file system.
#include "dpscope/lesson/sandbox.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <utility>

namespace dpscope::lesson {

namespace fs = std::filesystem;

namespace {

// `text` as an absolute path without `.`, `..` or a trailing separator; with `on_disk`, symbolic
// links of its existing part resolved too.
fs::path resolved(const std::string& text, bool on_disk) {
  std::error_code ec;
  fs::path path = fs::absolute(fs::path(text), ec);
  if (ec) path = fs::path(text);
  path = path.lexically_normal();
  if (on_disk) {
    fs::path canonical = fs::weakly_canonical(path, ec);
    if (!ec) path = canonical.lexically_normal();
  }
  if (!path.has_filename() && path.has_relative_path()) path = path.parent_path();
  return path;
}

// Whether `path` is `dir` or lies below it, compared component by component ("/a/bc" is not in "/a/b").
bool within(const fs::path& path, const fs::path& dir) {
  auto p = path.begin();
  for (auto d = dir.begin(); d != dir.end(); ++d, ++p)
    if (p == path.end() || *p != *d) return false;
  return true;
}

}  // namespace

bool is_help_flag(std::string_view arg) {
  for (std::string_view flag : kScenarioHelpFlags)
    if (arg == flag || (flag.starts_with("--") && arg.starts_with(flag) && arg.size() > flag.size() &&
                        arg[flag.size()] == '='))
      return true;
  return false;
}

bool names_a_file(std::string_view flag) {
  return std::find(std::begin(kScenarioOutputFlags), std::end(kScenarioOutputFlags), flag) !=
             std::end(kScenarioOutputFlags) ||
         std::find(std::begin(kScenarioInputFlags), std::end(kScenarioInputFlags), flag) !=
             std::end(kScenarioInputFlags);
}

namespace {

std::string replace_all(std::string text, std::string_view placeholder, const std::string& value) {
  for (size_t at = text.find(placeholder); at != std::string::npos;
       at = text.find(placeholder, at + value.size()))
    text.replace(at, placeholder.size(), value);
  return text;
}

}  // namespace

std::string replace_scratch(std::string text, const std::string& scratch) {
  return replace_all(std::move(text), "{scratch}", scratch);
}

std::string replace_lesson_scratch(std::string text, const std::string& dir) {
  return replace_all(std::move(text), kLessonScratch, dir);
}

std::string scenario_sandbox_problem(const std::vector<std::string>& args, const fs::path& scratch,
                                     bool on_disk) {
  const fs::path root = resolved(scratch.string(), on_disk);
  struct Named {
    std::string flag, text;  // as written: "--save", "{scratch}/w.safetensors"
    fs::path path;           // resolved
  };
  std::vector<Named> outputs, inputs;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (!arg.starts_with("--")) continue;
    const size_t eq = arg.find('=');
    const std::string flag = arg.substr(0, eq);
    if (!names_a_file(flag)) continue;
    std::string value;
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      return fmt::format("{} needs a path after it", flag);
    }
    const bool output = std::find(std::begin(kScenarioOutputFlags), std::end(kScenarioOutputFlags), flag) !=
                        std::end(kScenarioOutputFlags);
    if (output) {
      const fs::path path = resolved(replace_scratch(value, scratch.string()), on_disk);
      if (!within(path, root))
        return fmt::format(
            "{} '{}' writes outside the lesson's scratch directory: a scenario writes only inside "
            "{{scratch}} (e.g. \"{}\", \"{{scratch}}/ckpt\")",
            flag, value, flag == "--save" ? "{scratch}/model.safetensors" : "{scratch}/out");
      outputs.push_back({flag, value, path});
      continue;
    }
    // --data x.npy,y.npy names two files.
    for (size_t from = 0; from <= value.size();) {
      const size_t comma = flag == "--data" ? value.find(',', from) : std::string::npos;
      const std::string part =
          value.substr(from, comma == std::string::npos ? std::string::npos : comma - from);
      inputs.push_back({flag, part, resolved(replace_scratch(part, scratch.string()), on_disk)});
      if (comma == std::string::npos) break;
      from = comma + 1;
    }
  }
  for (const Named& in : inputs)
    for (const Named& out : outputs)
      if (within(in.path, out.path) || within(out.path, in.path))
        return fmt::format("{} '{}' is also written by {} '{}': a scenario must not read what it writes",
                           in.flag, in.text, out.flag, out.text);
  return "";
}

}  // namespace dpscope::lesson
