#!/usr/bin/env python3
"""dpscope_torch's trace words (python/dpscope_torch/schema.py) against docs/trace-format.md's vocabulary
table, row by row in both directions; the C++ header is held to the same table by
TraceVocabulary.DocsAgreeWithTheHeader, so writer and reader share one contract. Needs no PyTorch.
Usage: schema_test.py SOURCE_DIR
"""
import os
import re
import sys

src = sys.argv[1]
sys.path.insert(0, os.path.join(src, "python"))
from dpscope_torch import schema  # noqa: E402  (the package imports torch lazily)

ROWS = {
    "event types": schema.EVENT_TYPES,
    "span categories": schema.SPAN_CATEGORIES,
    "instant names": schema.INSTANT_NAMES,
    "counter names": schema.COUNTER_NAMES,
    "values names": schema.VALUES_NAMES,
    "values `when`": schema.VALUES_WHEN,
    "buckets `reason`": schema.BUCKETS_REASONS,
}

with open(os.path.join(src, "docs", "trace-format.md"), encoding="utf-8") as f:
    text = f.read()
failures = []
table = {}
for line in text.splitlines():
    m = re.match(r"^\| ([^|]+?) \| (.+) \|$", line)
    if m and m.group(1) in ROWS:
        table[m.group(1)] = re.findall(r"`([^`]+)`", m.group(2))
for row, words in ROWS.items():
    if row not in table:
        failures.append(f"docs/trace-format.md has no vocabulary row '{row}'")
    elif list(words) != table[row]:
        failures.append(f"'{row}': dpscope_torch writes {list(words)}, the format says {table[row]}")
m = re.search(r'^# dpscope trace format \(version ([0-9.]+)\)', text, re.M)
if not m or m.group(1) != schema.VERSION:
    failures.append(f"format version: dpscope_torch writes {schema.VERSION}, the docs say {m and m.group(1)}")
for f in failures:
    print(f"FAIL: {f}")
if failures:
    sys.exit(1)
print("PASS (schema)")
