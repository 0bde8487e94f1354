// `dpscope sampler`: prints one rank's DistributedSampler indices, one per line (PyTorch-identical).
#include <fmt/format.h>

#include <charconv>
#include <cstdint>
#include <string>

#include "commands.hpp"
#include "dpscope/base/error.hpp"
#include "dpscope/data/distributed_sampler.hpp"

namespace dpscope::cli {

void register_sampler(CLI::App& app) {
  struct Args {
    int64_t len = -1;
    DistributedSamplerOptions options;
    int64_t epoch = 0;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("sampler", "print one rank's DistributedSampler indices, one per line");
  cmd->add_option("--len", args->len, "dataset length")->required();
  cmd->add_option("--replicas", args->options.num_replicas, "num_replicas (world size)")
      ->capture_default_str();
  cmd->add_option("--rank", args->options.rank, "this rank")->capture_default_str();
  cmd->add_option("--seed", args->options.seed, "seed")
      // "-1" would otherwise wrap to 2^64 - 1 (CLI11's range check printed 1.8e308), and 2^64 or more
      // became 2^64 - 1 without a word (CLI11 saturates): the digits must fit 64 bits.
      ->check(CLI::Validator(
          [](std::string& value) {
            uint64_t seed = 0;
            const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), seed);
            return !value.empty() && ec == std::errc() && end == value.data() + value.size()
                       ? std::string()
                       : fmt::format("must be an integer from 0 to {}, got '{}'", UINT64_MAX, value);
          },
          "", "seed"))
      ->capture_default_str();
  cmd->add_option("--epoch", args->epoch, "epoch passed to set_epoch()")->capture_default_str();
  cmd->add_flag("--shuffle,!--no-shuffle", args->options.shuffle, "shuffle (default on, as in PyTorch)");
  cmd->add_flag("--drop-last", args->options.drop_last, "drop the tail instead of padding");
  cmd->callback([args] {
    DPS_CHECK(args->len >= 0, ErrorKind::kUsage, "--len must be >= 0, got {}", args->len);
    DPS_CHECK(args->epoch >= 0, ErrorKind::kUsage, "--epoch must be >= 0, got {}", args->epoch);
    DistributedSampler sampler(args->len, args->options);
    sampler.set_epoch(args->epoch);
    // Written a block at a time: the text of two billion indices would be a second copy of them, and
    // more.
    fmt::memory_buffer out;
    for (int64_t i : sampler.indices()) {
      fmt::format_to(std::back_inserter(out), "{}\n", i);
      if (out.size() >= (size_t{1} << 16)) {
        std::fwrite(out.data(), 1, out.size(), stdout);
        out.clear();
      }
    }
    std::fwrite(out.data(), 1, out.size(), stdout);
  });
}

}  // namespace dpscope::cli
