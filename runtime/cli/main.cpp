// dpscope — the command-line front door: train, bench, sampler, trace, lesson, presets.
//
// Every failure is one line on stderr, "dpscope: error: <what>", with exit code 2 for usage
// errors (bad flags, missing or malformed files) and 1 for runtime failures; never a crash.
#include <cstdio>
#include <exception>

#include "commands.hpp"
#include "dpscope/base/error.hpp"

int main(int argc, char** argv) {
  CLI::App app{"dpscope: watch how multi-GPU data-parallel training works", "dpscope"};
  app.set_version_flag("--version", "dpscope " DPSCOPE_VERSION);
  app.require_subcommand(1);
  bool verbose = false;
  app.add_flag("--verbose", verbose, "print where an error was raised");
  dpscope::cli::register_train(app);
  dpscope::cli::register_bench(app);
  dpscope::cli::register_sampler(app);
  dpscope::cli::register_trace(app);
  dpscope::cli::register_presets(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "dpscope: error: %s\n", e.what());
    return 2;
  } catch (const dpscope::Error& e) {
    std::fprintf(stderr, "dpscope: error: %s\n", e.what());
    if (verbose)
      std::fprintf(stderr, "  (raised at %s, kind: %s)\n", e.where().c_str(), dpscope::to_string(e.kind()));
    return e.is_usage_error() ? 2 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dpscope: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
