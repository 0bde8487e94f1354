// libFuzzer target for lesson files (lesson/lesson.hpp): any bytes go through parse_lesson() as the
// text of 09-fuzz.toml; what loads is turned into its scenario's command line, with each knob at
// each of its ends, and sandbox-checked. Its corpus (tests/fuzz/corpus/lesson_file: the shipped
// lessons and hostile ones) replays in the normal suite.
//
// Property: a text is refused with Error(kFormat) naming the file, or loads into a lesson whose
// scenario writes only inside {scratch} and asks for no help. A crash (deep TOML nesting and dotted
// keys once overflowed the stack), a sanitizer report or another exception is a finding. Build and
// run: bench/fuzz_all.sh 60 lesson_file.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "dpscope/base/error.hpp"
#include "dpscope/lesson/lesson.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  namespace lesson = dpscope::lesson;
  const std::string_view text(reinterpret_cast<const char*>(bytes), size);
  lesson::Lesson loaded;
  try {
    loaded = lesson::parse_lesson(text, "/fuzz/09-fuzz.toml");
  } catch (const dpscope::Error& e) {
    if (std::string_view(e.what()).find("09-fuzz.toml") == std::string_view::npos)
      std::abort();  // names the file
    return 0;
  }
  // A loaded scenario is inside its sandbox, whatever its knobs say.
  if (!lesson::scenario_sandbox_problem(lesson::scenario_args(loaded), "/{scratch}", false).empty())
    std::abort();
  for (const lesson::Knob& knob : loaded.knobs) {
    for (const std::string& value :
         knob.numeric ? std::vector<std::string>{knob.default_value} : knob.choices) {
      try {
        const auto args = lesson::scenario_args(loaded, {{knob.flag, value}});
        if (!lesson::scenario_sandbox_problem(args, "/{scratch}", false).empty()) std::abort();
      } catch (const dpscope::Error&) {
      }
    }
  }
  return 0;
}
