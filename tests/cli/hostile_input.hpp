// The hostile-input matrix's shared parts: a row (Case), the fixtures every row may use, and small
// file helpers. Rows live in one file per area (hostile_input_test.cpp: flags, readers and outputs;
// hostile_*_cases.cpp: lessons, inputs and outputs, processes, training runs) and are run by
// hostile_input_test.cpp.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

namespace dpscope::testing {

namespace fs = std::filesystem;
using std::chrono::seconds;

// Shared fixtures, made once by the release `dpscope`: a good trace and a checkpoint directory.
struct Fixtures {
  fs::path dir;
  fs::path trace;        // a 2-step single-device training trace
  fs::path checkpoints;  // checkpoint-00000001 and -00000002 of one run
};

inline const std::string kTrain = "train --dataset spirals:64 --model 2-8-3 --batch 16 --seed 1";
#ifdef DPSCOPE_VIZ
inline const std::string kViz = DPSCOPE_VIZ;
#else
inline const std::string kViz;     // the visualizer is not built: its rows skip
#endif
#ifdef DPSCOPE_FIDELITY_REPORT
inline const std::string kReport = DPSCOPE_FIDELITY_REPORT;
#else
inline const std::string kReport;  // fidelity_report is not built: its rows skip
#endif

struct Case {
  std::string name;
  // Split on spaces; {dir} = the case's scratch directory, {fx} = the fixtures, {empty} = ''.
  std::string args;
  int exit_code = 2;
  std::string error_contains;  // text the one error line must contain ({dir} as in args)
  std::function<void(const fs::path& dir, const Fixtures& fx)> setup = {};
  std::map<std::string, std::string> env = {};  // {dir} in a value as in args
  std::string pending = {};                     // non-empty: skipped with this reason until the fix is merged
  std::string program = DPSCOPE_CLI;
  seconds limit = seconds(30);
  // Expected "dpscope: error:" lines: 1 for one process; one per rank for a launcher's rows.
  int error_lines = 1;
  // Runs after the program: checks that no input, output or device node changed (EXPECT_*).
  std::function<void(const fs::path& dir, const Fixtures& fx)> verify = {};
  // A launcher's rows where this rank fails first (-1: none): a peer its launcher stops before the
  // peer heard why says "was stopped by SIGTERM" instead; the failing rank's own line and the
  // launcher's always name the cause.
  int failing_rank = -1;
  // A launcher's rows whose failing rank fails as it starts: this many peers may be stopped before
  // they can say anything (still starting), each then named in the launcher's line ("(rank 1
  // printed no error line)") in place of a line of its own.
  int may_be_silent = 0;
  // Text stdout must contain ({dir} as in args): what a row that succeeds printed of its input.
  std::string stdout_contains = {};
  // The program that speaks on stderr when `program` is a wrapper (/bin/sh running dpscope-viz):
  // its lines start with that name. Empty: `program`'s own.
  std::string speaker = {};
};

// gtest prints a failing row by its name, not as bytes.
inline void PrintTo(const Case& c, std::ostream* os) {
  *os << c.name << ": " << fs::path(c.program).filename().string() << " " << c.args;
}

inline void write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

inline std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

// A row that runs `script` under /bin/sh ({dir}/run.sh): for redirections of dpscope's own stdout
// and stderr, which the matrix cannot give on a command line. DPSCOPE in it is the release dpscope.
inline Case shell_row(std::string name, std::string script, int exit_code, std::string error_contains) {
  Case c{std::move(name), "{dir}/run.sh", exit_code, std::move(error_contains),
         [script](const fs::path& d, const Fixtures& fx) {
           write_file(d / "run.sh", replace_all(replace_all(replace_all(script, "DPSCOPE", DPSCOPE_CLI),
                                                            "{dir}", d.string()),
                                                "{fx}", fx.dir.string()));
         }};
  c.program = "/bin/sh";
  return c;
}

inline std::vector<std::string> split_words(const std::string& text) {
  std::vector<std::string> words;
  std::istringstream in(text);
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

// Copies the fixture checkpoints into `dir`/ckpt and flips one bit of the newest one's metadata.
inline void corrupt_copy_of_checkpoints(const fs::path& dir, const Fixtures& fx, bool both) {
  fs::copy(fx.checkpoints, dir / "ckpt");
  for (const char* name : {"checkpoint-00000002.safetensors", "checkpoint-00000001.safetensors"}) {
    const fs::path file = dir / "ckpt" / name;
    std::string bytes = read_file(file);
    const size_t at = bytes.find("\"steps_done\":\"");
    ASSERT_NE(at, std::string::npos);
    bytes[at + 14] = static_cast<char>(bytes[at + 14] ^ 0x04);
    write_file(file, bytes);
    if (!both) break;
  }
}

// The rows of each area (one file each).
std::vector<Case> hostile_cases();           // hostile_input_test.cpp: flags, readers, outputs
std::vector<Case> hostile_io_cases();        // hostile_io_cases.cpp: input and output guards
std::vector<Case> hostile_lesson_cases();    // hostile_lesson_cases.cpp: lesson files and their scenarios
std::vector<Case> hostile_process_cases();   // hostile_process_cases.cpp: launch, mpirun, timeouts
std::vector<Case> hostile_training_cases();  // hostile_training_cases.cpp: sizes, values, checkpoints
std::vector<Case>
hostile_recent_cases();  // hostile_recent_cases.cpp: import, bench, fidelity_report, lesson 14
std::vector<Case> hostile_pass4_cases();  // hostile_pass4_cases.cpp: presets, viewer flags, report headers
std::vector<Case> hostile_pass5_cases();  // hostile_pass5_cases.cpp: trace text on the terminal, the store
std::vector<Case> hostile_pass6_cases();  // hostile_pass6_cases.cpp: launch's own output, paths on success
std::vector<Case> hostile_pass7_cases();  // hostile_pass7_cases.cpp: training and the viewer on a lost stdout

}  // namespace dpscope::testing
