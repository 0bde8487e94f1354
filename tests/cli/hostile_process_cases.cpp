// Hostile-input rows, processes: dpscope launch, mpirun, configuration checks across ranks,
// timeouts. A launcher's row expects one "dpscope: error:" line per process that can still speak: each
// rank that fails or is stopped, and dpscope launch itself (its line quotes the first failing rank's).
// mpirun runs with -q, which keeps OpenMPI's own boxes ("Primary job terminated normally, but ...")
// off stderr (docs/processes.md); every wait is bounded by a small --timeout.
#include <string>

#include "cli/hostile_input.hpp"
#include "support/ports.hpp"

namespace dpscope::testing {
namespace {

const std::string kCli = DPSCOPE_CLI;
// Two mpi ranks on the CPU.
const std::string kC =
    " train --mode ddp --device cpu --backend mpi --devices 2 --model 2-8-3 --dataset spirals:256 --batch 16";

#ifdef DPSCOPE_MPIRUN
const std::string kMpirun = DPSCOPE_MPIRUN;
#else
const std::string kMpirun;  // no MPI in this build: its rows skip
#endif
const std::map<std::string, std::string> kMpiEnv = {{"OMPI_ALLOW_RUN_AS_ROOT", "1"},
                                                    {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"},
                                                    {"OMPI_MCA_btl_vader_single_copy_mechanism", "none"},
                                                    {"OMPI_MCA_rmaps_base_oversubscribe", "1"}};

// A row whose program is mpirun.
Case mpirun_case(std::string name, std::string args, int exit_code, std::string error_contains,
                 int error_lines, std::function<void(const fs::path&, const Fixtures&)> setup = {}) {
  Case c{std::move(name), "-q " + std::move(args), exit_code, std::move(error_contains), std::move(setup)};
  c.env = kMpiEnv;
  c.program = kMpirun;
  c.error_lines = error_lines;
  c.limit = seconds(30);
  return c;
}

// A row of `dpscope launch --nproc 2` running {dir}/rank.sh (a shell script, since rows split their
// arguments on spaces) with `script` in it.
Case launch_case(std::string name, const std::string& script, int exit_code, std::string error_contains,
                 int error_lines, std::map<std::string, std::string> env = {}) {
  Case c{std::move(name),
         "launch --nproc 2 --grace-s 1 --master-port " + std::to_string(free_port()) +
             " -- /bin/sh {dir}/rank.sh",
         exit_code, std::move(error_contains), [script](const fs::path& d, const Fixtures&) {
           write_file(d / "rank.sh", replace_all(script, "{dir}", d.string()));
         }};
  c.env = std::move(env);
  c.env.insert(kMpiEnv.begin(), kMpiEnv.end());
  if (kMpirun.empty()) c.program = "";  // the ranks run --backend mpi: skipped without MPI
  c.error_lines = error_lines;
  c.limit = seconds(30);
  return c;
}

// A launcher's row with a rank that is stopped before it can say anything (it only sleeps, or is
// still starting when the other fails): the launcher's line names it in place of its own.
Case with_silent_peer(Case c) {
  c.may_be_silent = 1;
  return c;
}

}  // namespace

std::vector<Case> hostile_process_cases() {
  return {
      // ---- a rank that fails alone tells its peers; none finalizes alone or hangs ----
      // The command that hung: --resume from A on rank 0, from the empty B on rank 1 (it hung in
      // MPI_Finalize and the model check): the directories are part of the configuration.
      mpirun_case("MpirunResumeFromAnotherDirectoryOnOneRank",
                  "-np 1 " + kCli + kC + " --steps 4 --resume --checkpoint-dir {dir}/A : -np 1 " + kCli + kC +
                      " --steps 4 --resume --checkpoint-dir {dir}/B",
                  2, "another configuration than rank 0", 2,
                  [](const fs::path& d, const Fixtures&) {
                    fs::create_directories(d / "A");
                    fs::create_directories(d / "B");
                  }),
      // The same flags, but rank 1 runs in a directory whose ckpt/ is empty: it fails after the
      // configuration check, aborts the group, and rank 0 stops at once naming it.
      mpirun_case("MpirunResumeWithoutCheckpointsOnOneRankAbortsThePeers",
                  "-np 1 /bin/sh {dir}/r0.sh : -np 1 /bin/sh {dir}/r1.sh", 2,
                  "--resume: no checkpoint in 'ckpt'", 2,
                  [](const fs::path& d, const Fixtures&) {
                    for (const char* r : {"r0", "r1"}) {
                      fs::create_directories(d / r / "ckpt");
                      write_file(d / (std::string(r) + ".sh"),
                                 "cd " + (d / r).string() + " && exec " + kCli + kC +
                                     " --steps 4 --resume --checkpoint-dir ckpt --timeout 10\n");
                    }
                  }),
      // bench with -e 1K on one rank and -e 2K on the other hung without a word.
      mpirun_case("MpirunBenchWithAnotherMaxSizeOnOneRank",
                  "-np 1 " + kCli + " bench all_reduce --backend mpi --devices 2 -e 1K : -np 1 " + kCli +
                      " bench all_reduce --backend mpi --devices 2 -e 2K",
                  2, "another configuration than rank 0", 2),
      // ---- every flag that changes which collectives run is compared ----
      launch_case("LaunchTraceOnRankZeroOnly",
                  "if [ $RANK = 0 ]; then exec " + kCli + kC + " --steps 2 --trace {dir}/tr; else exec " +
                      kCli + kC + " --steps 2; fi\n",
                  2, "another configuration than rank 0", 3),
      mpirun_case(
          "MpirunCheckpointsOnRankZeroOnly",
          "-np 1 " + kCli + kC + " --steps 2 --checkpoint-dir {dir}/c : -np 1 " + kCli + kC + " --steps 2", 2,
          "another configuration than rank 0", 2),
      mpirun_case(
          "MpirunAnotherTimeoutOnOneRank",
          "-np 1 " + kCli + kC + " --steps 2 --timeout 5 : -np 1 " + kCli + kC + " --steps 2 --timeout 6", 2,
          "another configuration than rank 0", 2),
      // ---- one line per process, the right words ----
      // Rank 0 fails alone: rank 1 learns why from the store, unless the launcher stops it first;
      // then it says so, or, stopped while still starting (on a loaded CI machine), the launcher's
      // line names it. Rank 0 itself always says its own error (it once said "stopped by SIGTERM"
      // when the launcher, reaping rank 1, stopped it while it unwound).
      [] {
        Case c =
            launch_case("LaunchOmpiServerThatCannotStart", "exec " + kCli + kC + " --steps 2 --timeout 10\n",
                        1, "ompi-server (/bin/false) could not start: it exited with status 1", 3,
                        {{"DPSCOPE_OMPI_SERVER", "/bin/false"}});
        c.failing_rank = 0;
        return with_silent_peer(c);
      }(),
      // Ranks that run different collectives: each says so, OpenMPI's text stays off stderr.
      mpirun_case("MpirunMismatchedCollectives",
                  "-np 2 " + kCli + kC + " --steps 4 --pitfall mismatched-collective --timeout 10", 2,
                  "Detected mismatch between collectives", 2),
      // A rank killed with SIGKILL: mpirun stops the other, which says why (the killed one cannot).
      mpirun_case("MpirunRankKilled",
                  "-np 1 " + kCli + kC + " --steps 1000000 --timeout 10 : -np 1 /bin/sh {dir}/r1.sh", 137,
                  "was stopped by SIGTERM", 1,
                  [](const fs::path& d, const Fixtures&) {
                    write_file(d / "r1.sh", "(sleep 1; kill -9 $$) & exec " + kCli + kC +
                                                " --steps 1000000 --timeout 10\n");
                  }),
      // The same two under dpscope launch (MPI singletons over TCP): OpenMPI's 16-line box "An MPI
      // communication peer process has unexpectedly disconnected" stays off stderr.
      launch_case("LaunchMismatchedCollectives",
                  "exec " + kCli + kC + " --steps 4 --pitfall mismatched-collective --timeout 10\n", 2,
                  "Detected mismatch between collectives", 3),
      launch_case("LaunchRankKilled",
                  "if [ $RANK = 1 ]; then (sleep 1; kill -9 $$) & fi; exec " + kCli + kC +
                      " --steps 1000000 --timeout 10\n",
                  1, "", 2),
      // ---- --timeout bounds every wait ----
      // A rank stopped with SIGSTOP: the other fails after --timeout (it waited gloo's 30 minutes).
      launch_case("LaunchRankStoppedFailsThePeerAfterTheTimeout",
                  "if [ $RANK = 1 ]; then (sleep 1; kill -STOP $$) & fi; exec " + kCli + kC +
                      " --steps 1000000 --timeout 2\n",
                  1, "", 3),
      // The same under mpirun: rank 0's MPI_Finalize, which waits for every process, is bounded
      // after the failure (it waited for the stopped rank for ever); mpirun then stops rank 1.
      mpirun_case("MpirunRankStoppedFailsThePeerAfterTheTimeout",
                  "-np 1 " + kCli + kC + " --steps 1000000 --timeout 2 : -np 1 /bin/sh {dir}/r1.sh", 1, "", 2,
                  [](const fs::path& d, const Fixtures&) {
                    write_file(d / "r1.sh", "(sleep 1; kill -STOP $$) & exec " + kCli + kC +
                                                " --steps 1000000 --timeout 2\n");
                  }),
      // A rank that never arrives: the rendezvous fails after --timeout (it took the store's 300 s).
      // Rank 1 only sleeps: the launcher's line names it.
      with_silent_peer(launch_case(
          "LaunchRankNeverArrivesFailsTheRendezvousAfterTheTimeout",
          "if [ $RANK = 1 ]; then exec sleep 30; fi; exec " + kCli + kC + " --steps 2 --timeout 2\n", 1, "",
          3)),
      {"TrainTimeoutZero", kTrain + " --steps 1 --timeout 0", 2, "--timeout must be a number of seconds"},
      {"TrainTimeoutNegative", kTrain + " --steps 1 --timeout -1", 2,
       "--timeout must be a number of seconds"},
      {"TrainTimeoutNotANumber", kTrain + " --steps 1 --timeout nan", 2, "--timeout"},
      {"TrainTimeoutInfinite", kTrain + " --steps 1 --timeout inf", 2, "--timeout"},
      {"TrainTimeoutPastADay", kTrain + " --steps 1 --timeout 1e9", 2,
       "--timeout must be a number of seconds"},
      {"BenchTimeoutZero", "bench all_reduce --devices 2 -e 1K --timeout 0", 2,
       "--timeout must be a number of seconds"},
      {"BenchTimeoutPastADay", "bench all_reduce --devices 2 -e 1K --timeout 1e9", 2,
       "--timeout must be a number of seconds"},
  };
}

}  // namespace dpscope::testing
