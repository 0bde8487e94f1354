// What a lesson's scenario may write (docs/lessons.md, "What a scenario may write"): only inside the
// lesson's scratch directory. load_lesson() (lesson.hpp) checks a scenario's text with it, and
// `dpscope lesson run|check|handout` checks the resolved paths again just before the run.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace dpscope::lesson {

// The scenario's sandbox (docs/lessons.md, "What a scenario may write"). Every `train` and `bench`
// flag that names a file or directory the run writes: its value must lie inside the lesson's
// scratch directory (`{scratch}`), after `..` and symbolic links are resolved. A flag that reads
// (`--init`, `--data`) may name any file, but none that the scenario writes.
inline constexpr std::string_view kScenarioOutputFlags[] = {"--save", "--trace", "--trace-dir",
                                                            "--checkpoint-dir"};
inline constexpr std::string_view kScenarioInputFlags[] = {"--init", "--data"};
// Flags that print text and stop instead of running: never part of a scenario.
inline constexpr std::string_view kScenarioHelpFlags[] = {"-h", "--help", "--help-all", "--version"};

// Returns "" when every output of `args` (a scenario with `{scratch}` not yet replaced) lies inside
// `scratch` and no input is an output; else the reason, naming the argument as written. With
// `on_disk`, paths are resolved on the file system (std::filesystem::weakly_canonical, on both
// sides: symbolic links and `..`); without, lexically (load_lesson checks with a placeholder
// directory before any exists).
std::string scenario_sandbox_problem(const std::vector<std::string>& args,
                                     const std::filesystem::path& scratch, bool on_disk);

// Whether `arg` asks for help or the version (`--help`, `-h`, `--help=x`, ...).
bool is_help_flag(std::string_view arg);

// Whether `flag` names a file the scenario writes or reads (kScenarioOutputFlags, kScenarioInputFlags).
bool names_a_file(std::string_view flag);

// `text` with every `{scratch}` replaced by `scratch`.
std::string replace_scratch(std::string text, const std::string& scratch);

// In a [[scenarios]] run, the lesson's own scenario's scratch directory (`OUT/ID.scratch`), to read
// what that run wrote: lesson 14's simulated run reads the initial weights and the data set its
// PyTorch run exported. Only inputs may name it: the sandbox checks it as a directory apart.
inline constexpr std::string_view kLessonScratch = "{lesson-scratch}";

// `text` with every `{lesson-scratch}` replaced by `dir`.
std::string replace_lesson_scratch(std::string text, const std::string& dir);

}  // namespace dpscope::lesson
