// libFuzzer target for lesson answer expressions (lesson/expression.hpp): any bytes are parsed, and
// what parses is evaluated on a small fixed trace. Its corpus (tests/fuzz/corpus/lesson_expression:
// every shipped lesson's answers and hostile ones) replays in the normal suite.
//
// Property: parse() refuses with Error(kFormat) or returns an expression; evaluate() returns a
// finite number or refuses with Error(kInvalidArgument). A crash (deep nesting once overflowed the
// stack), a sanitizer report, another exception or a non-finite value is a finding. Build and run:
// bench/fuzz_all.sh 60 lesson_expression.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "dpscope/base/error.hpp"
#include "dpscope/lesson/expression.hpp"
#include "dpscope/trace_tools/reader.hpp"

namespace {

// Two ranks, a compute span, a ring transfer, a counter and a values event: enough for every
// aggregate and field to find something.
const dpscope::trace::TraceData& fixed_trace() {
  static const dpscope::trace::TraceData data = dpscope::trace::parse_trace(
      R"({"type":"header","format":"dpscope-trace","version":"1.0","clock":"simulated","run":{"mode":"ddp","devices":2},"devices":[)"
      R"({"id":0,"name":"sim:0","kind":"sim","hardware":"h100","memory_bytes":80000000000,"peak_flops":67000000000000,"mem_bandwidth":3350000000000},)"
      R"({"id":1,"name":"sim:1","kind":"sim","hardware":"h100","memory_bytes":80000000000,"peak_flops":67000000000000,"mem_bandwidth":3350000000000}],)"
      R"("links":[],"params":[{"index":0,"name":"0.weight","shape":[4,2],"bytes":32}],"buckets":[]})"
      "\n"
      R"({"type":"samples","ts":5,"rank":0,"dev":0,"step":0,"phase":"data","indices":[7,3,5]})"
      "\n"
      R"({"type":"counter","ts":10,"rank":0,"dev":0,"step":0,"phase":"forward","name":"memory","values":{"parameters":100,"gradients":0}})"
      "\n"
      R"({"type":"span","ts":0,"rank":0,"dev":0,"step":0,"phase":"backward","name":"backward 0.Linear","cat":"compute","stream":"compute","dur":80})"
      "\n"
      R"({"type":"instant","ts":60,"rank":0,"dev":0,"step":0,"phase":"backward","name":"grad_ready","args":{"param":0}})"
      "\n"
      R"({"type":"transfer","ts":100,"rank":0,"dev":0,"step":1,"phase":"backward","name":"ring reduce-scatter","stream":"comm","dur":50,"src":0,"dst":1,"bytes":1000,"flow":1,"coll":3,"algo":"ring","algo_step":0,"chunk":0})"
      "\n"
      R"({"type":"values","ts":300,"rank":1,"dev":1,"step":1,"phase":"backward","name":"grad","param":0,"when":"before_reduce","values":[3.0,4.0],"norm":5.0})"
      "\n",
      "fixed.jsonl");
  return data;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(bytes), size);
  dpscope::lesson::Expression expression;
  try {
    expression = dpscope::lesson::Expression::parse(text);
  } catch (const dpscope::Error&) {
    return 0;  // refused: fine
  }
  try {
    const double value = expression.evaluate(fixed_trace());
    if (!std::isfinite(value)) std::abort();  // evaluate() promises a finite number or an error
  } catch (const dpscope::Error&) {
  }
  return 0;
}
