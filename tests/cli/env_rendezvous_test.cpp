// env:// across real processes: `dpscope launch` starts env_rendezvous_probe N times; the ranks
// meet in the TCPStore rank 0 hosts at MASTER_ADDR:MASTER_PORT (comm/env_rendezvous.hpp). A rank
// that never arrives and a configuration that differs end in one clear line within the timeout.
// read_env_rendezvous()'s checks of the variables run in this process.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <cstdlib>

#include "cli/run_limited.hpp"
#include "dpscope/comm/env_rendezvous.hpp"
#include "support/errors.hpp"
#include "support/ports.hpp"

namespace dpscope::testing {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

LimitedRun launch_probe(int ranks, const std::vector<std::string>& probe_args) {
  std::vector<std::string> argv = {
      DPSCOPE_CLI, "launch", "--nproc", std::to_string(ranks), "--master-port", std::to_string(free_port()),
      "--grace-s", "2",      "--",      DPSCOPE_ENV_PROBE};
  argv.insert(argv.end(), probe_args.begin(), probe_args.end());
  return run_limited(argv, {}, 30s);
}

TEST(EnvRendezvous, LaunchedProcessesMeetThroughTheTcpStore) {
  const LimitedRun r = launch_probe(4, {"mlp-784-512-10"});
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  for (int rank = 0; rank < 4; ++rank)
    EXPECT_THAT(r.out,
                HasSubstr(fmt::format("[rank {0}] rank {0} of 4 met all 4 ranks at 127.0.0.1:", rank)));
}

TEST(EnvRendezvous, ARankThatNeverArrivesFailsTheOthersWithinTheTimeout) {
  const LimitedRun r = launch_probe(3, {"cfg", "--skip-rank", "2"});
  ASSERT_FALSE(r.timed_out);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.out + r.err, HasSubstr("wait: timed out after 1500 ms; keys never set: ['arrived/2']"));
  EXPECT_LT(r.seconds, 15.0);
}

TEST(EnvRendezvous, RanksThatRunDifferentConfigurationsSayBoth) {
  const LimitedRun r = launch_probe(2, {"batch=32", "-but-64-here"});
  ASSERT_FALSE(r.timed_out);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.out + r.err, HasSubstr("rank 1 runs 'batch=32-but-64-here' but rank 0 runs 'batch=32'"));
}

// Sets the launcher's variables for one test (each test is its own process under ctest).
void set_env(std::initializer_list<std::pair<const char*, const char*>> vars) {
  for (const char* name :
       {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"})
    ::unsetenv(name);
  for (const auto& [name, value] : vars) ::setenv(name, value, 1);
}

TEST(EnvRendezvous, ReadsTheLaunchersVariablesAndNamesABadOne) {
  set_env({});
  EXPECT_FALSE(read_env_rendezvous().has_value());
  set_env({{"RANK", "3"},
           {"WORLD_SIZE", "8"},
           {"LOCAL_RANK", "1"},
           {"LOCAL_WORLD_SIZE", "2"},
           {"MASTER_ADDR", "10.1.2.3"},
           {"MASTER_PORT", "29611"}});
  const EnvRendezvous e = *read_env_rendezvous();
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.world_size, 8);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_world_size, 2);
  EXPECT_EQ(e.master_addr, "10.1.2.3");
  EXPECT_EQ(e.master_port, 29611);
  set_env({{"RANK", "0"}, {"WORLD_SIZE", "1"}});
  EXPECT_EQ(read_env_rendezvous()->master_port, 29500);  // torchrun's default
  auto message = [](std::initializer_list<std::pair<const char*, const char*>> vars) {
    set_env(vars);
    return error_of([] { read_env_rendezvous(); });
  };
  EXPECT_EQ(message({{"RANK", "1"}}).message,
            "env:// needs both RANK and WORLD_SIZE, but only RANK is set (start the processes with dpscope "
            "launch)");
  EXPECT_EQ(message({{"RANK", "4"}, {"WORLD_SIZE", "4"}}).message, "RANK=4 must be below WORLD_SIZE=4");
  EXPECT_EQ(message({{"RANK", "x"}, {"WORLD_SIZE", "4"}}).message,
            "RANK='x' is not a rank (0 to WORLD_SIZE - 1)");
  const Outcome port = message({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "70000"}});
  EXPECT_EQ(port.kind, ErrorKind::kUsage);
  EXPECT_EQ(port.message, "MASTER_PORT='70000' is not a port number (1 to 65535)");
  // Past the bound, the message names the bound (it said "1 or more" of 1048577).
  EXPECT_EQ(message({{"RANK", "0"}, {"WORLD_SIZE", "1048577"}}).message,
            "WORLD_SIZE='1048577' is not a world size (1 to 1048576)");
  EXPECT_EQ(message({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "-5"}}).message,
            "LOCAL_RANK='-5' is not a local rank (0 to LOCAL_WORLD_SIZE - 1)");
  set_env({});  // the tests after this one in the same process (the hostile matrix's runs) inherit them
}

}  // namespace
}  // namespace dpscope::testing
