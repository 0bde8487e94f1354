// libFuzzer target for the trace reader: any bytes go through parse_trace (lenient and strict);
// whatever lenient mode accepts is exported to Chrome JSON and summarized. The only allowed
// failure is a dpscope::Error; a crash, a sanitizer report or another exception is a bug.
// Build and run: bench/fuzz_trace_reader.sh [SECONDS]. A fixed-seed corpus of the same kind runs in
// the normal test suite (tests/runtime/trace/reader_robustness_test.cpp).
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string_view>

#include "dpscope/base/error.hpp"
#include "dpscope/trace_tools/chrome_export.hpp"
#include "dpscope/trace_tools/reader.hpp"
#include "dpscope/trace_tools/stats.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(bytes), size);
  try {
    const dpscope::trace::TraceData data = dpscope::trace::parse_trace(text, "fuzz", {.strict = false});
    std::ostringstream chrome;
    dpscope::trace::export_chrome(data, chrome);
    (void)dpscope::trace::format_stats(dpscope::trace::compute_stats(data), data, /*per_step=*/true);
  } catch (const dpscope::Error&) {
    // a refused header: fine
  }
  try {
    (void)dpscope::trace::parse_trace(text, "fuzz", {.strict = true});
  } catch (const dpscope::Error&) {
  }
  return 0;
}
