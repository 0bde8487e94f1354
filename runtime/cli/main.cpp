// dpscope — the command-line front door: train, bench, sampler, trace, lesson, presets, launch.
//
// Every failure is one line on stderr, "dpscope: error: <what>", with exit code 2 for usage
// errors (bad flags, missing or malformed files) and 1 for runtime failures; never a crash, never a
// raw exception text (std::bad_alloc becomes "out of host memory"). What the line quotes from a
// file, a trace or a rank is written out, control characters escaped (base/terminal_text.hpp).

#include <fmt/format.h>

#include <cstdio>
#include <exception>
#include <new>
#include <string>
#include <system_error>
#include <vector>

#include "commands.hpp"
#include "dpscope/base/cli_empty_values.hpp"
#include "dpscope/base/error.hpp"
#include "dpscope/base/standard_descriptors.hpp"
#include "dpscope/base/terminal_text.hpp"
#include "dpscope/base/termination_notice.hpp"

namespace {

// `dpscope frobnicate` used to say "A subcommand is required"; name the word and the commands. The
// first argument that is not an option is the command (the only global option, --verbose, takes no
// value); a command made of subcommands (trace, lesson: neither takes options of its own) takes the
// next one as its subcommand the same way. Returns the message, or "" when the words are known (or
// help or the version is asked for, or a command's subcommand is missing: the command says which
// it takes).
std::string unknown_command_message(const CLI::App& app, int argc, char** argv) {
  const CLI::App* level = &app;
  std::string path;  // the commands read so far: "" or "trace "
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word == "--" || word == "-h" || word == "--help" || word == "--version") return "";
    if (!word.empty() && word[0] == '-') continue;
    std::vector<std::string> names;
    const CLI::App* next = nullptr;
    for (const CLI::App* sub : level->get_subcommands({})) {
      names.push_back(sub->get_name());
      if (sub->get_name() == word) next = sub;
    }
    if (next == nullptr)
      return fmt::format("unknown {}command '{}' (expected one of: {})", path, word, fmt::join(names, ", "));
    if (next->get_subcommands({}).empty()) return "";
    level = next;
    path += word + " ";
  }
  if (level != &app) return "";  // a command without its subcommand says what it takes itself
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands({})) names.push_back(sub->get_name());
  return fmt::format("a command is required: one of {} (dpscope --help lists them)", fmt::join(names, ", "));
}

}  // namespace

int main(int argc, char** argv) {
  dpscope::hold_closed_standard_descriptors();
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
  dpscope::cli::register_lesson(app);
  dpscope::cli::register_launch(app);
  dpscope::refuse_empty_values(app);  // a lesson's scenario is parsed with the same rule
  dpscope::refuse_unfit_integers(app);
  try {
    if (const std::string unknown = unknown_command_message(app, argc, argv); !unknown.empty()) {
      std::fprintf(stderr, "dpscope: error: %s\n", dpscope::printable_line(unknown).c_str());
      return 2;
    }
    app.parse(argc, argv);
    dpscope::check_standard_output_written();  // what a command printed is its result
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "dpscope: error: %s\n", dpscope::printable_line(e.what()).c_str());
    return 2;
  } catch (const dpscope::Error& e) {
    dpscope::hold_termination();  // a rank of a job prints its own error, once (base/termination_notice.hpp)
    std::fprintf(stderr, "dpscope: error: %s\n", dpscope::printable_line(e.what()).c_str());
    if (verbose)
      std::fprintf(stderr, "  (raised at %s, kind: %s)\n", e.where().c_str(), dpscope::to_string(e.kind()));
    return e.is_usage_error() ? 2 : 1;
  } catch (const std::system_error& e) {
    // fmt::print throws this ("cannot write to file") when stdio's buffer for stdout fills and cannot
    // be written (a long output on a full disk or a closed stdout): the loss the check above reports,
    // named the same way.
    dpscope::hold_termination();
    const std::string what =
        std::ferror(stdout) != 0
            ? dpscope::output_lost("standard output", e.code().value(), "what it shows is incomplete").what()
            : std::string(e.what());
    std::fprintf(stderr, "dpscope: error: %s\n", dpscope::printable_line(what).c_str());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr,
                 "dpscope: error: out of host memory (an allocation failed); try smaller sizes or counts\n");
    return 1;
  } catch (const std::exception& e) {
    dpscope::hold_termination();
    std::fprintf(stderr, "dpscope: error: %s\n", dpscope::printable_line(e.what()).c_str());
    return 1;
  }
  return 0;
}
