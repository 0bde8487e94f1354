// Lessons directory, lesson lookup by id or number, and knob arguments (catalog.hpp).
#include "dpscope/lesson/catalog.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>

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
  // A path ("lessons/04-ddp.toml", "./mine.toml", "/tmp/x") is that file and nothing else: when it
  // is missing, a directory or a FIFO, say so (load_lesson checks it without opening it).
  const bool is_path = id.ends_with(".toml") || id.find('/') != std::string::npos;
  if (is_path) return load_lesson(id);
  std::vector<std::string> ids;
  std::vector<fs::path> by_number;  // files whose number is `id`'s (01-alpha, 1-beta for "1")
  for (const fs::path& file : lesson_files(dir)) {
    const std::string stem = file.stem().string();
    const std::string number = stem.substr(0, stem.find('-'));
    if (stem == id) return load_lesson(file);  // an id names one file
    if (all_digits(id) && all_digits(number) && std::stoi(id) == std::stoi(number)) by_number.push_back(file);
    ids.push_back(stem);
  }
  // A number several files share picked the first in name order without a word.
  if (by_number.size() > 1) {
    std::vector<std::string> stems;
    for (const fs::path& f : by_number) stems.push_back(f.stem().string());
    throw Error(ErrorKind::kUsage,
                fmt::format("lesson {} is ambiguous in {}: {} share its number; give the id", id,
                            dir.string(), fmt::join(stems, ", ")));
  }
  if (by_number.size() == 1) return load_lesson(by_number.front());
  // Not an id: a name in the current directory ("mydir", "fifo") is described as what it is.
  struct stat st {};
  if (!id.empty() && ::lstat(id.c_str(), &st) == 0)
    if (std::string problem = lesson_path_problem(id); !problem.empty()) throw Error(ErrorKind::kIo, problem);
  throw Error(ErrorKind::kUsage, fmt::format("no lesson '{}' in {} (lessons: {})", id, dir.string(),
                                             ids.empty() ? "none" : fmt::format("{}", fmt::join(ids, ", "))));
}

std::map<std::string, std::string> parse_knobs(const std::vector<std::string>& knobs) {
  std::map<std::string, std::string> values;
  for (const std::string& k : knobs) {
    const size_t eq = k.find('=');
    DPS_CHECK(eq != std::string::npos && eq > 0 && eq + 1 < k.size(), ErrorKind::kUsage,
              "--knob '{}': expected FLAG=VALUE, e.g. --knob devices=8", k);
    const std::string flag = k.substr(0, eq);
    const auto [at, fresh] = values.emplace(flag, k.substr(eq + 1));
    DPS_CHECK(fresh, ErrorKind::kUsage, "--knob {} is given twice ({}={} and {}); give each knob once", flag,
              flag, at->second, k);
  }
  return values;
}

}  // namespace dpscope::lesson
