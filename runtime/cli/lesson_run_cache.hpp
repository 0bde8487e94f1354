// `dpscope lesson run --reuse-runs DIR`: the traces of scenario runs already made, kept by their
// exact command line, so that turning a knob reruns only the runs the knob changes.
//
// dpscope-viz's lesson panel reruns the lesson at every knob change. Most knobs change only the
// main scenario: the comparison runs ([[scenarios]]) that do not take the knob, and the main run
// when a knob returns to a value seen before, would be made again for nothing. A simulated run is a
// pure function of its command line (a simulated clock, seeded data: the same bytes every time, as
// scripts/compare-traces.py checks), so its trace can be reused as it is. Only such runs are kept:
// not a run on a measured clock (`--device cpu`, a real PyTorch run), not one that writes files of
// its own (`{scratch}`), not one that ended in an error.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace dpscope::cli {

class LessonRunCache {
 public:
  // Makes `dir` when missing. Throws Error(kUsage) when it exists and is not a directory.
  explicit LessonRunCache(std::filesystem::path dir);

  // Copies the kept trace of `args` to `trace`: false when there is none.
  bool restore(const std::vector<std::string>& args, const std::filesystem::path& trace) const;
  // Keeps `trace`, just written by a successful run of `args` on a clock of kind `clock` (the
  // trace header's), when it can be reused: a simulated clock. The caller asks only for runs that
  // write no files of their own and are not PyTorch runs.
  void keep(const std::vector<std::string>& args, const std::filesystem::path& trace,
            const std::string& clock) const;

 private:
  std::filesystem::path entry(const std::vector<std::string>& args, const char* suffix) const;
  std::filesystem::path dir_;
};

}  // namespace dpscope::cli
