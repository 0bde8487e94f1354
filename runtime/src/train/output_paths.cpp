// check_output_paths(): every file `dpscope train` will write is checked before any work starts, so
// a missing directory or an output that would overwrite an input ends the run at once with one
// line, instead of throwing away a finished run at its end (or silently destroying the data).
#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "dpscope/base/error.hpp"
#include "dpscope/trace_format/compressed.hpp"
#include "dpscope/train/train.hpp"

namespace dpscope {
namespace {

namespace fs = std::filesystem;

struct NamedPath {
  std::string flag;  // "--save"
  std::string path;
};

// Two spellings of one file ("out/w.safetensors", "./out/../out/w.safetensors", a symlink to it).
bool same_file(const std::string& a, const std::string& b) {
  std::error_code error;
  if (fs::exists(a, error) && fs::exists(b, error)) return fs::equivalent(a, b, error);
  return fs::weakly_canonical(a, error) == fs::weakly_canonical(b, error);
}

bool writable_directory(const fs::path& dir) { return ::access(dir.c_str(), W_OK | X_OK) == 0; }

// A file output: its directory exists and is writable, and the path is not a directory.
void check_output_file(const NamedPath& output) {
  const fs::path file(output.path);
  const fs::path dir = file.has_parent_path() ? file.parent_path() : fs::path(".");
  std::error_code error;
  DPS_CHECK(fs::is_directory(dir, error), ErrorKind::kUsage,
            "{} {}: cannot write {}: directory '{}' does not exist", output.flag, output.path,
            output.flag == "--trace" ? "trace" : "weights", dir.string());
  DPS_CHECK(writable_directory(dir), ErrorKind::kUsage, "{} {}: directory '{}' is not writable", output.flag,
            output.path, dir.string());
  DPS_CHECK(!fs::is_directory(file, error), ErrorKind::kUsage, "{} {} is a directory; give a file name",
            output.flag, output.path);
}

// A directory output (--checkpoint-dir; --trace of mpi ranks, one file per rank): a writable
// directory, or one that can be created inside the nearest existing one.
void check_output_dir(const char* flag, const std::string& path) {
  std::error_code error;
  fs::path existing = fs::absolute(path, error);
  while (!fs::exists(existing, error) && existing.has_parent_path() && existing != existing.parent_path())
    existing = existing.parent_path();
  DPS_CHECK(fs::is_directory(existing, error), ErrorKind::kUsage, "{} {}: '{}' is not a directory", flag,
            path, existing.string());
  DPS_CHECK(writable_directory(existing), ErrorKind::kUsage, "{} {}: directory '{}' is not writable", flag,
            path, existing.string());
}

}  // namespace

void check_output_paths(const TrainConfig& config) {
  std::vector<NamedPath> inputs;
  if (!config.data.empty()) {
    const size_t comma = config.data.find(',');
    inputs.push_back({"--data", config.data.substr(0, comma)});
    inputs.push_back({"--data", config.data.substr(comma + 1)});
  }
  if (!config.init.empty()) inputs.push_back({"--init", config.init});

  std::vector<NamedPath> outputs;
  if (!config.save.empty()) outputs.push_back({"--save", config.save});
  // Ranks that are processes: --trace names the directory each writes its rank-K.jsonl into.
  const bool trace_dir = config.one_process_per_rank();
  if (!config.trace.empty() && !trace_dir) outputs.push_back({"--trace", config.trace});
  if (!config.trace.empty() && trace_dir) check_output_dir("--trace", config.trace);
  DPS_CHECK(!config.trace_zstd || !config.trace.empty(), ErrorKind::kUsage,
            "--trace-zstd compresses the trace: give --trace too");
  DPS_CHECK(!config.trace_zstd || trace_dir || trace::names_zstd_file(config.trace), ErrorKind::kUsage,
            "--trace-zstd: name the trace file '{}.zst' (one file's name says whether it is compressed)",
            config.trace);
  for (const NamedPath& output : outputs) {
    check_output_file(output);
    for (const NamedPath& input : inputs)
      DPS_CHECK(!same_file(output.path, input.path), ErrorKind::kUsage,
                "{} {} is the same file as the input {} {}: it would be overwritten", output.flag,
                output.path, input.flag, input.path);
  }
  DPS_CHECK(config.save.empty() || config.trace.empty() || trace_dir || !same_file(config.save, config.trace),
            ErrorKind::kUsage, "--trace {} is the same file as --save {}: give them different names",
            config.trace, config.save);
  if (!config.checkpoint_dir.empty()) check_output_dir("--checkpoint-dir", config.checkpoint_dir);
}

}  // namespace dpscope
