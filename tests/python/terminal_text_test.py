#!/usr/bin/env python3
"""dpscope_torch's printable_line (python/dpscope_torch/writer.py) writes a line as dpscope's C++
printable_line does (runtime/include/dpscope/base/terminal_text.hpp): the cases of
tests/runtime/base/terminal_text_test.cpp, as Python text. Needs no PyTorch.
Usage: terminal_text_test.py SOURCE_DIR
"""
import os
import sys

sys.path.insert(0, os.path.join(sys.argv[1], "python"))
from dpscope_torch.writer import printable_line  # noqa: E402  (the package imports torch lazily)

CASES = [
    ("all_reduce 'grad' \\ 1.5 MiB", "all_reduce 'grad' \\ 1.5 MiB"),
    ("r\u00e9seau \u2192 \U0001F600", "r\u00e9seau \u2192 \U0001F600"),
    ("", ""),
    ("a\nb\tc\rd", "a\\nb\\tc\\rd"),
    ("\x1b[31mred\x1b]0;title\x07", "\\x1b[31mred\\x1b]0;title\\x07"),
    ("x\x7fy\x00z", "x\\x7fy\\x00z"),
    ("\u009b31m \u0085 \u00a0", "\\u009b31m \\u0085 \u00a0"),  # C1 controls written out, a no-break space kept
    ("end\udcc2", "end\udcc2"),  # a byte that was not UTF-8 (surrogateescape) is kept, as the C++ keeps it
]

failures = [f"printable_line({text!r}) = {printable_line(text)!r}, expected {want!r}"
            for text, want in CASES if printable_line(text) != want]
for failure in failures:
    print(f"FAIL: {failure}")
if failures:
    sys.exit(1)
print("PASS (terminal_text)")
