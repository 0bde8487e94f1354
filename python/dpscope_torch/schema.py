"""The words of dpscope's trace format that this package writes (docs/trace-format.md, "Vocabulary").

One contract: the C++ recorder's words live in runtime/include/dpscope/trace_format/events.hpp, the
documentation's table is checked against them (TraceVocabulary.DocsAgreeWithTheHeader), and these
lists against the same table (tests/python/schema_test.py). A word added on one side and not the
other fails a test.
"""

FORMAT = "dpscope-trace"
VERSION = "1.0"

EVENT_TYPES = ("span", "instant", "counter", "transfer", "values", "samples", "buckets")
SPAN_CATEGORIES = ("compute", "copy", "comm", "reduce", "collective", "optimizer", "phase")
INSTANT_NAMES = ("grad_ready", "bucket_launched", "bucket_done", "work_completed", "checkpoint_saved", "error")
COUNTER_NAMES = ("memory", "loss")
VALUES_NAMES = ("grad", "all_reduce")
VALUES_WHEN = ("local", "before_reduce", "after_reduce", "after_step")
BUCKETS_REASONS = ("initial", "rebuilt")

# Not in the vocabulary table, but fixed by the format's event fields.
PHASES = ("none", "data", "forward", "backward", "optimizer", "checkpoint")
STREAMS = ("compute", "comm", "copy")
MEMORY_KEYS = ("parameters", "gradients", "optimizer_state", "activations", "buffers", "capacity")

# Times must stay in [-2^62, 2^62) ns (readers refuse others); steps at most 2^31 - 1.
MAX_ABS_TIME_NS = 1 << 62
MAX_STEP = (1 << 31) - 1
