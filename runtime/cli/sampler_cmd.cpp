// `dpscope sampler`: arrives with its milestone; until then it says so and exits 2.
#include "commands.hpp"
#include "dpscope/core/error.hpp"

namespace dpscope::cli {

void register_sampler(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("sampler", "not yet available in this build");
  cmd->allow_extras();
  cmd->callback([] {
    throw Error(ErrorKind::kUnsupported, "'dpscope sampler' is not yet available (it arrives with its milestone)");
  });
}

}  // namespace dpscope::cli
