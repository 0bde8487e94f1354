// `dpscope trace` (being written).
#include "commands.hpp"
#include "dpscope/core/error.hpp"

namespace dpscope::cli {

void register_trace(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("trace", "not yet available in this build");
  cmd->allow_extras();
  cmd->callback([] { throw Error(ErrorKind::kUnsupported, "'dpscope trace' is not yet available"); });
}

}  // namespace dpscope::cli
