// fidelity_report DIR OUT.md: evaluates every published nccl-tests table of DIR
// (tests/data/nccl-tests) against the collectives' cost model and writes docs/fidelity.md; the
// tables of DIR/not-compared (outside the goal's size range) get a section of their own.
//
//   build/ci/bin/fidelity_report tests/data/nccl-tests docs/fidelity.md
//
// A user may run it on tables of their own, so it keeps dpscope's promise for bad input
// (docs/reliability.md): one line "fidelity_report: error: ...", exit code 2 for a bad argument or
// table and 1 for a failure at run time; OUT is checked before any table is read (never one of the
// tables, a directory or a FIFO) and replaced atomically.
#include <cstdio>
#include <filesystem>
#include <new>

#include <fmt/format.h>

#include "dpscope/base/atomic_file.hpp"
#include "dpscope/base/error.hpp"
#include "dpscope/base/file_guard.hpp"
#include "dpscope/base/terminal_text.hpp"
#include "dpscope/comm/nccl_fidelity.hpp"

namespace {

namespace fs = std::filesystem;

bool is_table_name(std::string_view name) { return name.ends_with(".csv"); }

// DIR must be a directory; OUT neither one of its tables nor anything but a regular file to replace.
void check_arguments(const fs::path& dir, const fs::path& out) {
  const dpscope::PathStatus status = dpscope::path_status(dir);
  if (status.kind != dpscope::FileKind::kDirectory) {
    const std::string why = dpscope::why_not_readable(dir);
    throw dpscope::Error(
        dpscope::ErrorKind::kUsage,
        fmt::format("TABLES_DIR '{}': {}", dir.string(),
                    why.empty() ? "is a file, not a directory of nccl-tests tables (*.csv)" : why));
  }
  dpscope::OutputGuard guard;
  guard.add_input_dir("TABLES_DIR", dir, is_table_name);
  std::error_code ec;
  int tables = 0;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    if (!is_table_name(e.path().filename().string())) continue;
    guard.add_input("table", e.path());
    ++tables;
  }
  if (ec)
    throw dpscope::Error(dpscope::ErrorKind::kIo,
                         fmt::format("cannot list TABLES_DIR '{}': {}", dir.string(), ec.message()));
  if (tables == 0)
    throw dpscope::Error(dpscope::ErrorKind::kUsage,
                         fmt::format("TABLES_DIR '{}' holds no nccl-tests table (*.csv)", dir.string()));
  // The tables outside the goal's size range are read too (their own section of OUT). A folder that
  // cannot be listed is reported when they are loaded.
  const fs::path not_compared = dir / dpscope::kNotComparedDir;
  std::error_code folder_ec;
  if (fs::is_directory(not_compared, folder_ec))
    for (const fs::directory_entry& e : fs::directory_iterator(not_compared, folder_ec))
      if (is_table_name(e.path().filename().string())) guard.add_input("table", e.path());
  guard.add_output("OUT", out);
  guard.check();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "fidelity_report: error: usage: fidelity_report TABLES_DIR OUT.md\n");
    return 2;
  }
  try {
    check_arguments(argv[1], argv[2]);
    std::vector<dpscope::FidelityResult> results, not_compared;
    for (const dpscope::MeasuredSystem& s : dpscope::load_measured_systems(argv[1]))
      results.push_back(dpscope::evaluate_fidelity(s));
    for (const dpscope::MeasuredSystem& s : dpscope::load_not_compared_systems(argv[1]))
      not_compared.push_back(dpscope::evaluate_fidelity(s));
    dpscope::AtomicFileWriter out{fs::path(argv[2])};
    out.write(dpscope::fidelity_markdown(results, not_compared));
    out.commit();
    for (const dpscope::FidelityResult& r : results)
      // A system's id is its table's file name: written out (base/terminal_text.hpp).
      fmt::print("{}: median {:.1f} %, worst {:.1f} %\n", dpscope::printable_line(r.system.id),
                 100 * r.median_error, 100 * r.worst_error);
    for (const dpscope::FidelityResult& r : not_compared)
      fmt::print("{} ({}): median {:.1f} %, worst {:.1f} %\n", dpscope::printable_line(r.system.id),
                 dpscope::kNotComparedDir, 100 * r.median_error, 100 * r.worst_error);
  } catch (const dpscope::Error& e) {
    std::fprintf(stderr, "fidelity_report: error: %s\n", dpscope::printable_line(e.what()).c_str());
    return e.is_usage_error() ? 2 : 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "fidelity_report: error: out of host memory (an allocation failed)\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fidelity_report: error: %s\n", dpscope::printable_line(e.what()).c_str());
    return 1;
  }
  return 0;
}
