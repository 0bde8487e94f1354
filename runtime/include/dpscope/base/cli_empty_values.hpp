// Both programs' (dpscope, dpscope-viz) refusal of an option given an empty value, or an integer
// that does not fit. Header-only: it
// is CLI11's, which each program links and the library does not.
#pragma once

#include <CLI/CLI.hpp>

#include <charconv>
#include <cstdint>
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

// Refuses a decimal integer that does not fit an integer option (CLI11 type INT: 64-bit signed;
// UINT: unsigned): CLI11 reads it with strtoll/strtoull and keeps the saturated value, so `--steps
// 99999999999999999999` started a run of 9223372036854775807 steps, `--batch
// -9223372036854775809` was quoted as -9223372036854775808 and `-1` for an unsigned option became
// 2^64 - 1. Other spellings (0x10, 1e3) are CLI11's to read.
inline void refuse_unfit_integers(CLI::App& app) {
  for (CLI::Option* option : app.get_options()) {
    const std::string type = option->get_type_name();
    if (!option->nonpositional() || (type != "INT" && type != "UINT")) continue;
    const bool is_unsigned = type == "UINT";
    option->check(CLI::Validator(
        [is_unsigned](std::string& value) {
          const size_t digits_from = !value.empty() && (value[0] == '-' || value[0] == '+') ? 1 : 0;
          if (value.size() == digits_from ||
              value.find_first_not_of("0123456789", digits_from) != std::string::npos)
            return std::string();  // not a plain decimal integer
          const char* first = value.data() + (value[0] == '+' ? 1 : 0);
          const char* last = value.data() + value.size();
          std::errc ec{};
          if (is_unsigned) {
            uint64_t parsed = 0;
            ec = value[0] == '-' ? std::errc::result_out_of_range : std::from_chars(first, last, parsed).ec;
          } else {
            int64_t parsed = 0;
            ec = std::from_chars(first, last, parsed).ec;
          }
          if (ec == std::errc()) return std::string();
          return is_unsigned ? "must be an integer from 0 to 18446744073709551615, got '" + value + "'"
                             : "must be an integer from -9223372036854775808 to 9223372036854775807, got '" +
                                   value + "'";
        },
        "", "fits 64 bits"));
  }
  for (CLI::App* sub : app.get_subcommands({})) refuse_unfit_integers(*sub);
}

}  // namespace dpscope
