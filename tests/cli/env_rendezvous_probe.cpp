// A rank process for env_rendezvous_test.cpp, started by `dpscope launch`: it reads the env://
// environment, meets the other ranks in the TCPStore rank 0 hosts, checks that every rank runs the
// same configuration (argv[1]; rank 1 adds argv[2] when there is one, to make a mismatch), and says
// whom it met. `--skip-rank K` makes rank K leave without arriving. Exit 1 with one line on error.
#include <cstdio>
#include <string>
#include <vector>

#include "dpscope/base/error.hpp"
#include "dpscope/comm/env_rendezvous.hpp"

int main(int argc, char** argv) {
  using namespace dpscope;
  try {
    const std::optional<EnvRendezvous> env = read_env_rendezvous();
    if (!env) {
      std::fprintf(stderr, "probe: not started by a launcher (no RANK, WORLD_SIZE)\n");
      return 3;
    }
    std::string config = argc > 1 ? argv[1] : "";
    int skip = -1;
    for (int i = 2; i + 1 < argc; ++i)
      if (std::string(argv[i]) == "--skip-rank") skip = std::stoi(argv[i + 1]);
    if (env->rank == skip) return 0;  // leaves without ever arriving
    if (argc > 2 && std::string(argv[2]) != "--skip-rank" && env->rank == 1) config += argv[2];
    const std::shared_ptr<Store> store = env_store(*env, Milliseconds(1500));
    const std::string me = std::to_string(env->rank);
    if (env->rank == 0) store->set("config", config);
    const std::string rank0 = store->get_string("config");
    DPS_CHECK(rank0 == config, ErrorKind::kMismatch, "rank {} runs '{}' but rank 0 runs '{}'", env->rank,
              config, rank0);
    store->set("arrived/" + me, me);
    std::vector<std::string> everyone;
    for (int r = 0; r < env->world_size; ++r) everyone.push_back("arrived/" + std::to_string(r));
    store->wait(everyone);
    std::printf("rank %d of %d met all %d ranks at %s:%u (local rank %d)\n", env->rank, env->world_size,
                env->world_size, env->master_addr.c_str(), env->master_port, env->local_rank);
    std::fflush(stdout);
    // Rank 0 hosts the store: it stays until everyone has read what they need.
    store->set("done/" + me, me);
    if (env->rank == 0) {
      std::vector<std::string> finished;
      for (int r = 0; r < env->world_size; ++r) finished.push_back("done/" + std::to_string(r));
      store->wait(finished);
    }
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "probe: error: %s\n", e.what());
    return 1;
  }
}
