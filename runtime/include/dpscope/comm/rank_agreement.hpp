// What the ranks of a multi-process job do before and around their work, so that no rank waits for a
// peer that runs something else or has already given up (docs/reliability.md, "nothing hangs"):
//
//   * agree_on_settings(): every rank checks that it runs rank 0's settings (the flags that decide
//     which collectives run: a rank with --trace meets its peers for clock ping-pongs, one with
//     -e 2K benchmarks one size more). Rank 0 broadcasts its list, every rank compares, and an
//     all-reduce tells every rank whether one differs, so all of them stop together. The rank that
//     differs names the flag and both values.
//   * broadcast_text(): one rank's text on every rank (rank 0's settings above; the cause of a failed
//     checkpoint write, so that every rank's error names it).
//   * run_as_rank(): runs a rank's work; an error aborts the group (its peers' pending and future
//     collectives fail at once with "aborted because rank R failed: ..." instead of waiting for the
//     timeout) and is rethrown; a normal end tells the group this rank finished (a peer still
//     waiting in a collective this rank never issued fails at once).
//
// Used by `dpscope train` and `dpscope bench` as processes (mpirun, dpscope launch). Rank threads
// get the same from spawn() (comm/spawn.hpp).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "dpscope/base/error.hpp"
#include "dpscope/comm/process_group.hpp"

namespace dpscope {

// One flag of a run as the user gave it: `value` as it should be shown ("16", "\"tr\""), or empty
// when the flag was not given.
struct RunSetting {
  std::string flag;  // "--batch"
  std::string value;
};

// Throws kMismatch on every rank unless every rank passed the same `settings` (the same flags with
// the same values). The differing rank's message: "rank 1 of 2 runs another configuration than
// rank 0: --trace is "tr" here but unset on rank 0 (every rank must be started with the same flags)";
// the others': "rank 1 runs another configuration than rank 0 (its error names the flag): ...".
// A collective call on every rank of `group`; bounded by the group's timeout.
void agree_on_settings(ProcessGroup& group, const std::vector<RunSetting>& settings);

// The most bytes broadcast_text() sends; a receiver refuses a longer length as another program's.
constexpr int64_t kMaxBroadcastTextBytes = int64_t{1} << 20;

// The first kMaxBroadcastTextBytes of rank `root`'s `text` on every rank (the other ranks' `text` is
// ignored). A collective call on every rank of `group`; throws kMismatch on a rank that receives a
// longer length (a peer that is not this program).
std::string broadcast_text(ProcessGroup& group, int root, const std::string& text);

// Runs `work()` as this rank's part of the job on `group` (see the file comment).
void run_as_rank(ProcessGroup& group, const std::function<void()>& work);

}  // namespace dpscope
