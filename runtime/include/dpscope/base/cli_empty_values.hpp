// Both programs' (dpscope, dpscope-viz) refusal of an option given an empty value. Header-only: it
// is CLI11's, which each program links and the library does not.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace dpscope {

// Refuses an empty value for every option of `app` and its subcommands: CLI11 reads `--lr ''` as a
// zero (a run with lr 0), `launch --nproc ''` said "got 0", and `dpscope-viz --screenshot ''` meant no
// screenshot at all (the window opened and waited for ever under xvfb-run). Positional arguments are
// left alone (a program launched after `--` may take an empty argument; the viewer checks its traces
// as files).
inline void refuse_empty_values(CLI::App& app) {
  for (CLI::Option* option : app.get_options()) {
    if (!option->nonpositional() || option->get_expected_min() == 0) continue;  // flags take no value
    option->check(CLI::Validator(
        [](std::string& value) {
          return value.empty() ? std::string("the value is empty: give one") : std::string();
        },
        "", "not empty"));
  }
  for (CLI::App* sub : app.get_subcommands({})) refuse_empty_values(*sub);
}

}  // namespace dpscope
