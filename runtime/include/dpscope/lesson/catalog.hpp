// Finding a lesson: the lessons directory beside the assets, a lesson by id or number, and the
// `--knob FLAG=VALUE` arguments a student turns. Shared by `dpscope lesson` and `dpscope-viz
// --lesson`, so both accept the same ids and knobs and word the same errors.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "dpscope/lesson/lesson.hpp"

namespace dpscope::lesson {

// `explicit_dir` when not empty; else ASSETS/lessons or ASSETS/../lessons (an installed tree, a
// source checkout). Throws Error(kIo) naming both places when neither exists.
std::filesystem::path find_lessons_dir(const std::filesystem::path& assets,
                                       const std::filesystem::path& explicit_dir = {});

// The lesson in `dir` whose id is `id`, or whose number is ("4" and "04" find "04-ddp"), or the
// file `id` itself when it is a path (ends in .toml or holds a '/'). Throws Error(kIo) saying what a
// path is when it is no lesson file (missing, a directory: use --lessons-dir, a FIFO: never
// opened), and Error(kUsage) "no lesson 'X' in DIR (lessons: ...)" when no lesson has that id.
Lesson find_lesson(const std::filesystem::path& dir, const std::string& id);

// `--knob FLAG=VALUE` arguments as a map; throws Error(kUsage) for one without `=`, a flag or a
// value ("--knob 'x': expected FLAG=VALUE, e.g. --knob devices=8"), or a flag given twice.
std::map<std::string, std::string> parse_knobs(const std::vector<std::string>& knobs);

}  // namespace dpscope::lesson
