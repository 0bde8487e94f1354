// Lessons directory, lesson lookup by id or number, and knob arguments (catalog.hpp).
#include "dpscope/lesson/catalog.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "dpscope/base/error.hpp"

namespace dpscope::lesson {

namespace fs = std::filesystem;

namespace {
// True when `text` is a non-empty run of digits.
bool all_digits(const std::string& text) {
  return !text.empty() && text.size() < 10 && text.find_first_not_of("0123456789") == std::string::npos;
}
}  // namespace

fs::path find_lessons_dir(const fs::path& assets, const fs::path& explicit_dir) {
  if (!explicit_dir.empty()) return explicit_dir;
  std::error_code ec;
  for (const fs::path& dir : {assets / "lessons", assets / ".." / "lessons"})
    if (fs::is_directory(dir, ec)) return dir.lexically_normal();
  throw Error(ErrorKind::kIo,
              fmt::format("no lessons found next to the assets ({}/lessons or {}/../lessons); "
                          "give --lessons-dir DIR",
                          assets.string(), assets.string()));
}

Lesson find_lesson(const fs::path& dir, const std::string& id) {
  std::error_code ec;
  if (id.ends_with(".toml") && fs::is_regular_file(id, ec)) return load_lesson(id);
  std::vector<std::string> ids;
  for (const fs::path& file : lesson_files(dir)) {
    const std::string stem = file.stem().string();
    const std::string number = stem.substr(0, stem.find('-'));
    if (stem == id || (all_digits(id) && all_digits(number) && std::stoi(id) == std::stoi(number)))
      return load_lesson(file);
    ids.push_back(stem);
  }
  throw Error(ErrorKind::kUsage, fmt::format("no lesson '{}' in {} (lessons: {})", id, dir.string(),
                                             ids.empty() ? "none" : fmt::format("{}", fmt::join(ids, ", "))));
}

std::map<std::string, std::string> parse_knobs(const std::vector<std::string>& knobs) {
  std::map<std::string, std::string> values;
  for (const std::string& k : knobs) {
    const size_t eq = k.find('=');
    DPS_CHECK(eq != std::string::npos && eq > 0 && eq + 1 < k.size(), ErrorKind::kUsage,
              "--knob '{}': expected FLAG=VALUE, e.g. --knob devices=8", k);
    values[k.substr(0, eq)] = k.substr(eq + 1);
  }
  return values;
}

}  // namespace dpscope::lesson
