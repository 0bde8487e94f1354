// check_output_paths(): every file `dpscope train` will write is checked before any work starts, so
// a missing directory or an output that would overwrite an input, another output, a checkpoint or a
// device node ends the run at once with one line, instead of throwing away a finished run at its
// end (or silently destroying the data). The rules are the output guard's (base/file_guard.hpp).
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "dpscope/base/error.hpp"
#include "dpscope/base/file_guard.hpp"
#include "dpscope/trace_tools/compressed.hpp"
#include "dpscope/trace_tools/rank_traces.hpp"
#include "dpscope/train/train.hpp"

namespace dpscope {
namespace {

// The names a run writes (and rotates) in --checkpoint-dir: checkpoint-NNNNNNNN.safetensors and
// their temporary files.
bool checkpoint_name(std::string_view name) {
  return name.starts_with("checkpoint-") && name.find(".safetensors") != std::string_view::npos;
}

// The names process ranks write in --trace DIR: rank-K.jsonl (.zst).
bool rank_trace_name(std::string_view name) { return trace::rank_of_file_name(name).has_value(); }

}  // namespace

void check_output_paths(const TrainConfig& config) {
  OutputGuard guard;
  if (!config.data.empty()) {
    const size_t comma = config.data.find(',');
    guard.add_input("--data", config.data.substr(0, comma));
    if (comma != std::string::npos) guard.add_input("--data", config.data.substr(comma + 1));
  }
  if (!config.init.empty()) guard.add_input("--init", config.init);
  if (!config.save.empty()) guard.add_output("--save", config.save);
  // Ranks that are processes: --trace names the directory each writes its rank-K.jsonl into.
  const bool trace_dir = config.one_process_per_rank();
  if (!config.trace.empty() && !trace_dir) guard.add_output("--trace", config.trace);
  if (!config.trace.empty() && trace_dir) guard.add_output_dir("--trace", config.trace, rank_trace_name);
  DPS_CHECK(!config.trace_zstd || !config.trace.empty(), ErrorKind::kUsage,
            "--trace-zstd compresses the trace: give --trace too");
  DPS_CHECK(!config.trace_zstd || trace_dir || trace::names_zstd_file(config.trace), ErrorKind::kUsage,
            "--trace-zstd: name the trace file '{}.zst' (one file's name says whether it is compressed)",
            config.trace);
  if (!config.checkpoint_dir.empty())
    guard.add_output_dir("--checkpoint-dir", config.checkpoint_dir, checkpoint_name);
  guard.check();
}

}  // namespace dpscope
