// Text from files, traces and other processes on its way to a terminal: an error line quotes a
// trace's event name, a lesson's question, a rank's own error. Such text may hold a newline (which
// would split the one `dpscope: error:` line in two) or an escape sequence (which a terminal obeys:
// it can recolour, retitle or clear the user's terminal). Used by the error lines of `dpscope`
// (runtime/cli/main.cpp), `dpscope-viz` (visualizer/app/main.cpp) and fidelity_report, by the line a
// stopped rank prints (base/termination_notice.cpp), which `dpscope launch` quotes, by `trace stats`'
// table, and wherever a path, a file's text or a flag's value is printed on success or in a warning
// (`trace`'s "wrote ..." lines, `train`'s summary, `lesson`, `presets`, `bench`'s header,
// dpscope-viz's benchmarks); docs/reliability.md, "Fifth pass" and "Sixth pass".
#pragma once

#include <string>
#include <string_view>

namespace dpscope {

// `text` with every control character written out as an escape a reader can see: '\n' as "\n",
// '\t' as "\t", '\r' as "\r", any other C0 byte or DEL as "\xHH", and the C1 controls U+0080 ..
// U+009F (UTF-8 0xC2 0x80 .. 0xC2 0x9F; U+009B is a CSI to many terminals) as "\u00HH". A
// backslash stays a backslash; every other byte, UTF-8 or not, is kept.
std::string printable_line(std::string_view text);

// Text of several lines (a table, a report) whose cells quote a trace: each line as printable_line
// writes it, the '\n' between lines kept. A '\n' inside a quoted name still ends a line there, but no
// escape sequence reaches the terminal (`dpscope trace stats`).
std::string printable_text(std::string_view text);

}  // namespace dpscope
