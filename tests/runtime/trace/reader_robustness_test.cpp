// The reader never crashes on damaged input: a deterministic corpus of mutated real traces (bit
// flips, odd bytes, truncations, duplicated and deleted ranges, swapped lines, extreme numbers)
// goes through parse_trace in both modes. The only exception allowed is dpscope::Error, and what
// lenient mode returns is internally consistent, exports to valid JSON and yields statistics.
// (tests/fuzz/trace_reader_fuzz.cpp explores further with libFuzzer: bench/fuzz_trace_reader.sh.)
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <typeinfo>

#include "dpscope/base/error.hpp"
#include "dpscope/trace_tools/chrome_export.hpp"
#include "dpscope/trace_tools/reader.hpp"
#include "dpscope/trace_tools/stats.hpp"
#include "trace_test_util.hpp"

namespace dpscope::trace {
namespace {

constexpr int kCases = 3000;
constexpr uint32_t kSeed = 20240611;

std::string mutate(std::string text, std::mt19937& rng) {
  auto pick = [&](size_t n) {
    return n == 0 ? size_t{0} : std::uniform_int_distribution<size_t>(0, n - 1)(rng);
  };
  static constexpr char kSpecialChars[] = "{}[]\":,\n\\-.0123456789eE \t\r\x00\xff\xc3";
  static constexpr std::string_view kSpecial(kSpecialChars, sizeof(kSpecialChars) - 1);  // keeps the NUL
  static constexpr std::string_view kNumbers[] = {"-1",
                                                  "1e309",
                                                  "18446744073709551616",
                                                  "9223372036854775808",
                                                  "-9223372036854775809",
                                                  "0.5",
                                                  "null",
                                                  "true",
                                                  "\"\"",
                                                  "{}",
                                                  "[]"};
  const int mutations = 1 + static_cast<int>(pick(4));
  for (int m = 0; m < mutations && !text.empty(); ++m) {
    switch (pick(8)) {
      case 0: text[pick(text.size())] ^= static_cast<char>(1u << pick(8)); break;
      case 1: text[pick(text.size())] = kSpecial[pick(kSpecial.size())]; break;
      case 2: text[pick(text.size())] = static_cast<char>(pick(256)); break;
      case 3: text.resize(pick(text.size() + 1)); break;
      case 4: {  // duplicate a range somewhere else
        const size_t a = pick(text.size());
        const size_t len = pick(std::min<size_t>(text.size() - a, 400) + 1);
        text.insert(pick(text.size() + 1), text.substr(a, len));
        break;
      }
      case 5: {
        const size_t a = pick(text.size());
        text.erase(a, pick(std::min<size_t>(text.size() - a, 200) + 1));
        break;
      }
      case 6: {  // swap two lines
        std::vector<std::string> lines;
        std::stringstream in(text);
        for (std::string line; std::getline(in, line);) lines.push_back(line);
        if (lines.size() >= 2) std::swap(lines[pick(lines.size())], lines[pick(lines.size())]);
        text.clear();
        for (const std::string& line : lines) text += line + "\n";
        break;
      }
      case 7: {  // replace a number with an extreme or mistyped value
        const size_t at = text.find_first_of("0123456789", pick(text.size()));
        if (at == std::string::npos) break;
        const size_t end = text.find_first_not_of("0123456789.e-", at);
        text.replace(at, (end == std::string::npos ? text.size() : end) - at,
                     kNumbers[pick(std::size(kNumbers))]);
        break;
      }
    }
  }
  return text;
}

// What lenient parsing promises about the TraceData it returns, whatever the input.
void expect_consistent(const TraceData& d, const std::string& label) {
  uint32_t last_line = 0;
  for (const Event& e : d.events) {
    ASSERT_GT(e.line, last_line) << label;
    last_line = e.line;
    ASSERT_NE(d.device(e.dev), nullptr) << label;
    ASSERT_GE(e.dur_ns, 0) << label;
    ASSERT_TRUE(e.name == kNoString || e.name < d.strings.size()) << label;
    ASSERT_TRUE(e.cat == kNoString || e.cat < d.strings.size()) << label;
    ASSERT_LE(d.min_ts_ns, e.ts_ns) << label;
    ASSERT_GE(d.max_end_ns, e.end_ns()) << label;
    switch (e.type) {
      case EventType::kSpan:
      case EventType::kInstant:
        ASSERT_TRUE(e.payload == kNoPayload || static_cast<size_t>(e.payload) < d.args.size()) << label;
        break;
      case EventType::kTransfer:
        ASSERT_NE(d.device(d.transfer(e).src), nullptr) << label;
        ASSERT_NE(d.device(d.transfer(e).dst), nullptr) << label;
        break;
      case EventType::kCounter: ASSERT_LT(static_cast<size_t>(e.payload), d.counters.size()) << label; break;
      case EventType::kValues: ASSERT_LT(static_cast<size_t>(e.payload), d.values.size()) << label; break;
      case EventType::kSamples: ASSERT_LT(static_cast<size_t>(e.payload), d.samples.size()) << label; break;
      case EventType::kBuckets: ASSERT_LT(static_cast<size_t>(e.payload), d.buckets.size()) << label; break;
    }
  }
  for (size_t i = 1; i < d.problems.size(); ++i)
    ASSERT_GT(d.problems[i].line, d.problems[i - 1].line) << label;
}

TEST(TraceReaderRobustness, MutatedTracesNeverCrashTheReaderExporterOrStats) {
  const std::string original =
      testing::read_file(testing::record_sample_trace(testing::scratch_dir() / "t.jsonl", 3));
  ASSERT_GT(parse_trace(original).events.size(), 30u);
  std::mt19937 rng(kSeed);
  int parsed = 0;
  int refused = 0;
  for (int i = 0; i < kCases; ++i) {
    const std::string text = mutate(original, rng);
    const std::string label = fmt::format("case {}", i);
    try {
      const TraceData data = parse_trace(text, "fuzz", {.strict = false});
      ++parsed;
      expect_consistent(data, label);
      std::ostringstream chrome;
      export_chrome(data, chrome);
      EXPECT_TRUE(nlohmann::json::accept(chrome.str())) << label;
      (void)format_stats(compute_stats(data), data, true);
    } catch (const Error& e) {
      ++refused;  // a damaged header: refused with a message
      EXPECT_EQ(e.kind(), ErrorKind::kFormat) << label;
    } catch (const std::exception& e) {
      ADD_FAILURE() << label << ": unexpected " << typeid(e).name() << ": " << e.what();
    }
    try {
      const TraceData strict = parse_trace(text, "fuzz", {.strict = true});
      EXPECT_TRUE(strict.problems.empty()) << label;
    } catch (const Error&) {
    } catch (const std::exception& e) {
      ADD_FAILURE() << label << " (strict): unexpected " << typeid(e).name() << ": " << e.what();
    }
    if (HasFatalFailure()) return;
  }
  EXPECT_EQ(parsed + refused, kCases);
  EXPECT_GT(parsed, kCases / 2) << "most mutations leave the header intact";
}

}  // namespace
}  // namespace dpscope::trace
