// `dpscope bench`: arrives with its milestone; until then it says so and exits 2.
#include "commands.hpp"
#include "dpscope/core/error.hpp"

namespace dpscope::cli {

void register_bench(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("bench", "not yet available in this build");
  cmd->allow_extras();
  cmd->callback([] {
    throw Error(ErrorKind::kUnsupported, "'dpscope bench' is not yet available (it arrives with its milestone)");
  });
}

}  // namespace dpscope::cli
