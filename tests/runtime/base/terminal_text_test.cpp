// printable_line (base/terminal_text.hpp): what a trace, a lesson or a rank wrote stays one line
// and sends no escape sequence to the user's terminal.
#include "dpscope/base/terminal_text.hpp"

#include <gtest/gtest.h>

namespace dpscope {
namespace {

TEST(PrintableLine, KeepsPlainTextAndUtf8AsTheyAre) {
  EXPECT_EQ(printable_line("all_reduce 'grad' \\ 1.5 MiB"), "all_reduce 'grad' \\ 1.5 MiB");
  EXPECT_EQ(printable_line("r\xc3\xa9seau \xe2\x86\x92 \xf0\x9f\x98\x80"),
            "r\xc3\xa9seau \xe2\x86\x92 \xf0\x9f\x98\x80");
  EXPECT_EQ(printable_line(""), "");
}

TEST(PrintableLine, NewlinesTabsAndReturnsAreWrittenOut) {
  EXPECT_EQ(printable_line("a\nb\tc\rd"), "a\\nb\\tc\\rd");
}

TEST(PrintableLine, EscapeSequencesReachNoTerminal) {
  // A colour, a window title (OSC ... BEL), DEL, and a NUL.
  EXPECT_EQ(printable_line("\x1b[31mred\x1b]0;title\x07"), "\\x1b[31mred\\x1b]0;title\\x07");
  EXPECT_EQ(printable_line(std::string("x\x7fy\0z", 5)), "x\\x7fy\\x00z");
}

TEST(PrintableLine, C1ControlsInUtf8AreWrittenOut) {
  // U+009B is a CSI on its own to terminals that take 8-bit controls; U+00A0 is a space, kept.
  EXPECT_EQ(printable_line("\xc2\x9b"
                           "31m \xc2\x85 \xc2\xa0"),
            "\\u009b31m \\u0085 \xc2\xa0");
  EXPECT_EQ(printable_line("end\xc2"), "end\xc2");  // a cut sequence is kept, not read past the end
}

TEST(PrintableText, KeepsTheLinesAndWritesOutEverythingElse) {
  EXPECT_EQ(printable_text("device  busy\nsim\x1b]0;t\x07:0  1 us\n"),
            "device  busy\nsim\\x1b]0;t\\x07:0  1 us\n");
  EXPECT_EQ(printable_text("no newline\tat the end"), "no newline\\tat the end");
  EXPECT_EQ(printable_text("\n\n"), "\n\n");
  EXPECT_EQ(printable_text(""), "");
}

}  // namespace
}  // namespace dpscope
