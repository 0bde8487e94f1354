// `dpscope train` (being written).
#include "commands.hpp"
#include "dpscope/core/error.hpp"

namespace dpscope::cli {

void register_train(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("train", "not yet available in this build");
  cmd->allow_extras();
  cmd->callback([] { throw Error(ErrorKind::kUnsupported, "'dpscope train' is not yet available"); });
}

}  // namespace dpscope::cli
