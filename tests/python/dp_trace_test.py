#!/usr/bin/env python3
"""nn.DataParallel runs recorded by dpscope_torch, checked against what PyTorch itself saw: one ctest test
per case.

Without a GPU nn.DataParallel calls its module unsplit, so the CPU cases run DataParallel.forward on the
stand-in of dp_standin.py (scatter = torch.chunk, PyTorch's own replicate with a CPU Broadcast whose
backward reduce-adds, replicas called in turn, gather = torch.cat); the `cuda` case runs the real
nn.DataParallel and is skipped (exit 77), saying so, where no GPU is found.

Usage: /usr/bin/python3 dp_trace_test.py SOURCE_DIR DPSCOPE_BIN CASE
"""
import copy
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

try:
    import torch
except ImportError:
    print("SKIP: this Python has no PyTorch (scripts/install-deps.sh installs python3-torch)")
    sys.exit(77)

SRC, DPSCOPE, CASE = sys.argv[1], sys.argv[2], sys.argv[3]
HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "dp_train.py")
TIMEOUT_S = 300
failures = []


def fail(message):
    failures.append(message)
    print(f"FAIL: {message}")


def check(condition, message):
    if not condition:
        fail(message)
    return condition


def env():
    return dict(os.environ, PYTHONPATH=os.path.join(SRC, "python"), OMP_NUM_THREADS="1")


def train(args, zero_change_dir=None, expect_rc=0):
    program = [sys.executable]
    if zero_change_dir is not None:
        program += ["-m", "dpscope_torch.run", "--trace-dir", zero_change_dir]
    cmd = [*program, SCRIPT, *args]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env(), timeout=TIMEOUT_S)
    if expect_rc is not None and out.returncode != expect_rc:
        fail(f"exit {out.returncode} (expected {expect_rc}): {' '.join(cmd)}\n{out.stdout}\n{out.stderr}")
    return out


def read(path):
    with open(path, encoding="utf-8") as f:
        lines = [json.loads(line) for line in f]
    return lines[0], lines[1:]


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def strict_stats(path):
    out = subprocess.run([DPSCOPE, "trace", "stats", path, "--per-step"], capture_output=True, text=True,
                         timeout=TIMEOUT_S)
    check(out.returncode == 0, f"dpscope trace stats {path} refused the trace: {out.stderr}")
    return out.stdout


def chunk_sizes(rows, parts):
    """torch.chunk's split (what DataParallel's scatter does): ceil(rows/parts) rows, the last smaller."""
    size = -(-rows // parts)
    return [min(size, rows - begin) for begin in range(0, rows, size)]


def stride_of(shape):
    """The recorder's sampling stride (docs/trace-format.md, `values`), to compare with PyTorch's grads."""
    numel = math.prod(shape)
    stride = max(1, numel // 32)
    if len(shape) >= 2:
        while stride > 1 and math.gcd(stride, shape[-1]) != 1:
            stride -= 1
    return stride


def close(a, b, tol=1e-6):
    return len(a) == len(b) and all(abs(x - y) <= tol * max(1.0, abs(y)) for x, y in zip(a, b))


def check_run(path, dump, devices):
    """Everything a recorded DataParallel run must agree with: the batches, the losses, the gradients."""
    strict_stats(path)
    header, events = read(path)
    ref = load(dump)
    run = header["run"]
    check(run["mode"] == "dp" and run["devices"] == devices and run["source"] == "dpscope_torch", f"header run {run}")
    kinds = [d["kind"] for d in header["devices"]]
    check(kinds.count("host") == 1 and len(kinds) == devices + 1, f"header devices {kinds}")
    host = next(d["id"] for d in header["devices"] if d["kind"] == "host")
    names = [p["name"] for p in header["params"]]
    check(names == ref["params"], f"parameters {names} != PyTorch's {ref['params']}")
    params = len(names)
    steps = len(ref["losses"])
    by_step = {}
    for e in events:
        by_step.setdefault(e["step"], []).append(e)
    check(sorted(by_step) == list(range(steps)), f"steps {sorted(by_step)} != 0..{steps - 1}")
    for step in range(steps):
        evs = by_step.get(step, [])
        batch = ref["batches"][step]
        sizes = chunk_sizes(len(batch), devices)
        k = len(sizes)  # replicas that ran: there may be fewer chunks than devices
        where = f"step {step} (batch of {len(batch)} on {devices} devices: {sizes})"
        # Each replica's samples are its chunk of the batch, in order; together the whole batch.
        samples = sorted((e for e in evs if e["type"] == "samples"), key=lambda e: e["rank"])
        check([e["rank"] for e in samples] == list(range(k)) and all(e["dev"] == e["rank"] for e in samples),
              f"{where}: samples on ranks {[e['rank'] for e in samples]}")
        check([len(e["indices"]) for e in samples] == sizes, f"{where}: samples per replica "
              f"{[len(e['indices']) for e in samples]}")
        check([i for e in samples for i in e["indices"]] == batch, f"{where}: the replicas' samples are not the batch")
        forwards = {e["rank"]: e for e in evs if e["type"] == "span" and e["name"].startswith("forward replica")}
        check(sorted(forwards) == list(range(k)) and [forwards[j]["args"]["rows"] for j in range(k)] == sizes,
              f"{where}: forward replica spans {sorted(forwards)}")
        # One gradient-ready per replica and parameter.
        ready = sorted((e["rank"], e["args"]["param"]) for e in evs
                       if e["type"] == "instant" and e["name"] == "grad_ready")
        check(ready == [(j, p) for j in range(k) for p in range(params)], f"{where}: grad_ready {ready}")
        # The copies: scatter host -> replica, replicate 0 -> replica, gather replica -> 0, its gradient
        # 0 -> replica, the reduce-add replica -> 0.
        copies = sorted((e["phase"], e["src"], e["dst"], e["name"]) for e in evs if e["type"] == "transfer")
        want = sorted([("forward", host, j, "copy H2D") for j in range(k)] +
                      [("forward", 0, j, "copy D2D") for j in range(1, k)] +
                      [("forward", j, 0, "copy D2D") for j in range(1, k)] +
                      [("backward", 0, j, "copy D2D") for j in range(1, k)] +
                      [("backward", j, 0, "copy D2D") for j in range(1, k)])
        check(copies == want, f"{where}: transfers {copies} != {want}")
        reduce_add = [e for e in evs if e["type"] == "span" and e["name"] == "reduce_add"]
        if check(len(reduce_add) == 1, f"{where}: {len(reduce_add)} reduce_add spans"):
            r = reduce_add[0]
            check(r["dev"] == 0 and r["args"]["replicas"] == k, f"{where}: reduce_add {r}")
            # On GPUs each device has a clock of its own, anchored to the host's to within microseconds.
            slack = 100_000 if header["devices"][0]["kind"] == "cuda" else 0
            last_ready = max(e["ts"] for e in evs if e["type"] == "instant" and e["name"] == "grad_ready")
            check(r["ts"] + slack >= last_ready, f"{where}: the reduce-add starts before the last replica gradient")
        phases = [e["name"] for e in sorted((e for e in evs if e["type"] == "span" and e["cat"] == "phase"),
                                            key=lambda e: e["ts"])]
        want = ["data", "forward", "backward"] + ([] if step in ref.get("skipped", []) else ["optimizer"])
        check(phases == want, f"{where}: phases {phases}")
        losses = [e["values"]["loss"] for e in evs if e["type"] == "counter" and e["name"] == "loss"]
        check(losses == [ref["losses"][step]], f"{where}: loss {losses} != the script's {ref['losses'][step]}")
        # Values: each replica's gradient (`local`) and their sum on device 0 (`after_reduce`).
        local = {(e["rank"], e["param"]): e["values"] for e in evs if e["type"] == "values" and e["when"] == "local"}
        after = {e["param"]: e for e in evs if e["type"] == "values" and e["when"] == "after_reduce"}
        check(sorted(local) == [(j, p) for j in range(k) for p in range(params)], f"{where}: local values {sorted(local)}")
        check(sorted(after) == list(range(params)) and all(e["dev"] == 0 for e in after.values()),
              f"{where}: after_reduce values {sorted(after)}")
        for p in range(params):
            if p in after and all((j, p) in local for j in range(k)):
                summed = [sum(local[(j, p)][i] for j in range(k)) for i in range(len(local[(0, p)]))]
                check(close(after[p]["values"], summed), f"{where}: parameter {p}'s reduced values are not the "
                      "sum of the replicas'")
        if step == steps - 1:
            for p, grad in enumerate(ref["last_grads"]):
                shape = header["params"][p]["shape"]
                want = grad[::stride_of(shape)][:32]
                check(p in after and after[p]["values"] == want, f"{where}: parameter {p}'s after_reduce values "
                      "differ from PyTorch's .grad")
    return header, events


def kinds_of(events):
    """The words of a trace: event types, instant / counter / transfer names, span categories, values' when."""
    return {
        "types": {e["type"] for e in events},
        "instants": {e["name"] for e in events if e["type"] == "instant"},
        "counters": {e["name"] for e in events if e["type"] == "counter"},
        "transfers": {e["name"] for e in events if e["type"] == "transfer"},
        "categories": {e["cat"] for e in events if e["type"] == "span"},
        "when": {e["when"] for e in events if e["type"] == "values"},
        "reduce_add": any(e["type"] == "span" and e["name"] == "reduce_add" for e in events),
    }


def main():
    tmp = tempfile.mkdtemp(prefix="dpscope-torch-dp-")
    try:
        trace, dump = os.path.join(tmp, "dp.jsonl"), os.path.join(tmp, "dump.json")
        if CASE == "standin_watch_api":
            for devices in ("4", "2"):
                train(["--standin", devices, "--watch", trace, "--dump", dump])
                check_run(trace, dump, int(devices))
        elif CASE == "standin_uneven":
            # 42 rows in batches of 10 on 4 devices: 3,3,3,1 four times, then 1,1 (two replicas only);
            # batches of 5: 2,2,1 (three replicas).
            train(["--standin", "4", "--samples", "42", "--batch", "10", "--epochs", "1", "--watch", trace,
                   "--dump", dump])
            check_run(trace, dump, 4)
            train(["--standin", "4", "--samples", "10", "--batch", "5", "--epochs", "1", "--watch", trace,
                   "--dump", dump])
            check_run(trace, dump, 4)
            # DataParallel(dim=1): the batch split along its columns.
            train(["--standin", "3", "--samples", "20", "--batch", "8", "--epochs", "1", "--dim", "1", "--watch", trace,
                   "--dump", dump])
            header, _ = check_run(trace, dump, 3)
            check(header["run"]["dim"] == 1, f"header run dim {header['run']['dim']}")
        elif CASE == "standin_skipped_step":
            # A batch without optimizer.step() (GradScaler skipping a step whose gradients are not finite)
            # is a step of its own: its forward, backward, reduce-add and loss, no optimizer phase; the
            # next forward begins the next step (it was merged into it).
            train(["--standin", "3", "--skip-step-every", "3", "--watch", trace, "--dump", dump])
            check(len(load(dump)["skipped"]) == 2, "the script skipped no step")
            check_run(trace, dump, 3)
        elif CASE == "standin_same_weights":
            # Watching changes nothing: the gradients (summed by the reduce-add) and the weights after
            # every step are bit-identical to an unwatched run's.
            plain = os.path.join(tmp, "plain.json")
            train(["--standin", "3", "--dump", plain])
            train(["--standin", "3", "--watch", trace, "--dump", dump])
            a, b = load(plain), load(dump)
            check(a["weights"] == b["weights"] and a["last_grads"] == b["last_grads"] and a["losses"] == b["losses"],
                  "a watched run's weights, gradients or losses differ from the unwatched run's")
        elif CASE == "standin_zero_change":
            trace_dir = os.path.join(tmp, "trace")
            train(["--standin", "3", "--dump", dump], zero_change_dir=trace_dir)
            strict_stats(trace_dir)
            header, events = read(os.path.join(trace_dir, "rank-0.jsonl"))
            ref = load(dump)
            check(header["run"]["mode"] == "dp" and header["run"]["script"] == "dp_train.py", f"run {header['run']}")
            losses = [e["values"]["loss"] for e in events if e["type"] == "counter" and e["name"] == "loss"]
            check(losses == ref["losses"], f"losses {losses} != the script's {ref['losses']}")
            reduce_adds = [e for e in events if e["type"] == "span" and e["name"] == "reduce_add"]
            check(len(reduce_adds) == len(ref["losses"]), f"{len(reduce_adds)} reduce_add spans")
        elif CASE == "standin_vocabulary":
            # The same words as dpscope's own DataParallel (train --mode dp), each replica on one device.
            train(["--standin", "3", "--watch", trace, "--dump", dump, "--sizes", "2-16-16-3"])
            ours_header, ours = read(trace)
            theirs_path = os.path.join(tmp, "runtime.jsonl")
            out = subprocess.run([DPSCOPE, "train", "--mode", "dp", "--device", "sim", "--devices", "3", "--model",
                                  "2-16-16-3", "--dataset", "blobs:40", "--batch", "10", "--steps", "2", "--trace",
                                  theirs_path], capture_output=True, text=True, timeout=TIMEOUT_S)
            check(out.returncode == 0, f"dpscope train --mode dp: {out.stderr}")
            theirs_header, theirs = read(theirs_path)
            a, b = kinds_of(ours), kinds_of(theirs)
            for key in ("types", "instants", "counters", "when", "reduce_add"):
                check(a[key] == b[key], f"{key}: dpscope_torch writes {a[key]}, dpscope's DataParallel {b[key]}")
            check(a["transfers"] <= b["transfers"], f"transfers: {a['transfers']} not among {b['transfers']}")
            # Phase spans are the one addition (markers of the format, docs/trace-format.md).
            check(a["categories"] - b["categories"] == {"phase"} and b["categories"] <= a["categories"],
                  f"span categories: {a['categories']} vs {b['categories']}")
            check([p["name"] for p in ours_header["params"]] == [p["name"] for p in theirs_header["params"]],
                  "parameter names differ from dpscope's nn.Sequential names")
            for name, evs in (("dpscope_torch", ours), ("dpscope", theirs)):
                devices = {}
                for e in evs:
                    devices.setdefault(e["rank"], set()).add(e["dev"])
                check(sorted(devices) == [0, 1, 2] and all(len(d) == 1 for d in devices.values()) and
                      len(set.union(*devices.values())) == 3, f"{name}: each replica's events on a device of its own: "
                      f"{devices}")
        elif CASE == "standin_viewer":
            # dpscope-viz draws the one trace as dpscope's own DataParallel: a card per device, the host.
            viz = os.path.join(os.path.dirname(DPSCOPE), "dpscope-viz")
            if shutil.which("xvfb-run") is None or not os.path.exists(viz):
                print("SKIP: no xvfb-run or dpscope-viz to draw with")
                sys.exit(77)
            train(["--standin", "3", "--watch", trace, "--epochs", "1"])
            png, boxes = os.path.join(tmp, "dp.png"), os.path.join(tmp, "boxes.jsonl")
            out = subprocess.run(["xvfb-run", "-a", viz, trace, "--screenshot", png, "--stage-boxes", boxes, "--size",
                                  "1280x720", "--seek", "0.5"], capture_output=True, text=True, timeout=TIMEOUT_S)
            check(out.returncode == 0, f"dpscope-viz: exit {out.returncode}: {out.stderr}")
            with open(boxes, encoding="utf-8") as f:
                drawn = sorted(json.loads(line)["device"] for line in f)
            check(drawn == ["cpu:0", "cpu:1", "cpu:2", "host"], f"the stage drew {drawn}")
        elif CASE == "error_instant":
            out = train(["--standin", "2", "--watch", trace, "--fail-at-step", "2"], expect_rc=1)
            check("failing on purpose at step 2" in out.stderr, f"the error is not reported: {out.stderr}")
            strict_stats(trace)
            _, events = read(trace)
            errors = [e for e in events if e["type"] == "instant" and e["name"] == "error"]
            if check(len(errors) == 1, f"{len(errors)} error instants"):
                check("failing on purpose at step 2" in errors[0]["args"]["message"] and errors[0]["step"] == 1,
                      f"error instant {errors[0]}")
        elif CASE == "usage_errors":
            sys.path.insert(0, os.path.join(SRC, "python"))
            sys.path.insert(0, HERE)
            import dpscope_torch
            from dp_standin import CpuDataParallel

            net = torch.nn.Linear(3, 2)
            for make, error, text in [
                (lambda: dpscope_torch.watch(CpuDataParallel(net, 2), tmp, values_every=-1), ValueError,
                 "dpscope_torch.watch: values_every must be between 0 and 2147483647, got -1"),
                (lambda: dpscope_torch.watch(CpuDataParallel(net, 2), tmp, values_every=1.5), ValueError,
                 "dpscope_torch.watch: values_every must be an integer, got 1.5"),
                (lambda: dpscope_torch.watch(CpuDataParallel(net, 2), os.path.join(tmp, "d.jsonl")),
                 dpscope_torch.TraceError, f"trace file '{os.path.join(tmp, 'd.jsonl')}' is a directory"),
                (lambda: dpscope_torch.watch(CpuDataParallel(net, 2), os.path.join(tmp, "missing", "t.jsonl")),
                 dpscope_torch.TraceError, "cannot write trace"),
            ]:
                os.makedirs(os.path.join(tmp, "d.jsonl"), exist_ok=True)
                try:
                    make().close()
                    fail(f"no error: expected {text}")
                except error as e:
                    check(str(e).startswith(text), f"error {e!r}, expected {text}")
            # A deep copy of a watched model's module (an EMA copy, say) and of the model carry no hook of
            # ours: their forwards are not recorded into the watched model's trace.
            dp = CpuDataParallel(torch.nn.Linear(3, 2), 2)
            with dpscope_torch.watch(dp, os.path.join(tmp, "copied.jsonl")):
                module, whole = copy.deepcopy(dp.module), copy.deepcopy(dp)
                check(not module._forward_pre_hooks and not module._forward_hooks and not whole._forward_pre_hooks
                      and "scatter" not in whole.__dict__, "a deep copy of a watched model carries its hooks")
            if not torch.cuda.is_available():
                # The real nn.DataParallel without a GPU keeps no device_ids and runs its module unsplit:
                # watch() refuses it; the zero-change mode says so and runs the script unrecorded.
                try:
                    dpscope_torch.watch(torch.nn.DataParallel(net), tmp).close()
                    fail("watch() of a DataParallel without device_ids did not refuse")
                except ValueError as e:
                    check(str(e).startswith("dpscope_torch.watch: this DataParallel has no device_ids (PyTorch "
                                            "found no GPU)"), f"{e}")
                script, trace_dir = os.path.join(tmp, "cpu_dp.py"), os.path.join(tmp, "zero")
                with open(script, "w", encoding="utf-8") as f:
                    f.write("import torch\nm = torch.nn.DataParallel(torch.nn.Linear(3, 2))\n"
                            "m(torch.randn(4, 3)).sum().backward()\nprint('ran')\n")
                out = subprocess.run([sys.executable, "-m", "dpscope_torch.run", "--trace-dir", trace_dir, script],
                                     capture_output=True, text=True, env=env(), timeout=TIMEOUT_S)
                check(out.returncode == 0 and out.stdout.strip() == "ran" and
                      "dpscope_torch: nn.DataParallel found no GPU and calls its module unsplit: not recorded"
                      in out.stderr, f"zero-change, DataParallel without GPU: {out.returncode} {out.stderr!r}")
                check(not os.path.exists(os.path.join(trace_dir, "rank-0.jsonl")), "a trace was written")
        elif CASE == "cuda":
            gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
            if gpus == 0:
                print("SKIP: no CUDA GPU on this machine (the real nn.DataParallel splits only on CUDA)")
                sys.exit(77)
            keep = os.environ.get("DPSCOPE_KEEP_TRACE")
            if gpus >= 2:
                train(["--device-ids", "0,1", "--watch", trace, "--dump", dump])
                header, _ = check_run(trace, dump, 2)
                check([d["kind"] for d in header["devices"]] == ["cuda", "cuda", "host"], f"{header['devices']}")
            else:
                # One GPU: device_ids=[0] scatters the batch and calls the module itself (no replicas,
                # no gather, no reduce-add): samples, the scatter's copy, replica 0's forward and
                # gradients. Then device_ids=[0, 0], two replicas on one GPU, if PyTorch allows it.
                train(["--device-ids", "0", "--watch", trace, "--dump", dump])
                strict_stats(trace)
                header, events = read(trace)
                ref = load(dump)
                ready = [e for e in events if e["type"] == "instant" and e["name"] == "grad_ready"]
                check(len(ready) == len(ref["losses"]) * len(header["params"]), f"{len(ready)} grad_ready")
                losses = [e["values"]["loss"] for e in events if e["type"] == "counter" and e["name"] == "loss"]
                check(losses == ref["losses"], f"losses {losses} != {ref['losses']}")
                copies = [e for e in events if e["type"] == "transfer"]
                check(len(copies) == len(ref["losses"]) and all(e["name"] == "copy H2D" for e in copies),
                      f"one scatter copy per step: {len(copies)}")
                memory = [e for e in events if e["type"] == "counter" and e["name"] == "memory"]
                check(memory and all(m["values"]["capacity"] > 0 for m in memory), "GPU memory counters")
                if keep:
                    os.makedirs(keep, exist_ok=True)
                    shutil.copy(trace, os.path.join(keep, "dp-one-gpu.jsonl"))
                twice = os.path.join(tmp, "twice.jsonl")
                out = train(["--device-ids", "0,0", "--watch", twice, "--dump", dump], expect_rc=None)
                if out.returncode == 0:
                    print("NOTE: nn.DataParallel(device_ids=[0, 0]) runs: checked as two replicas")
                    check_run(twice, dump, 2)
                    trace = twice
                else:
                    last = (out.stderr.strip().splitlines() or ["?"])[-1]
                    print(f"NOTE: nn.DataParallel(device_ids=[0, 0]) refused by PyTorch: {last}")
            if keep:
                os.makedirs(keep, exist_ok=True)
                shutil.copy(trace, os.path.join(keep, "dp.jsonl"))
        else:
            fail(f"unknown case {CASE}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        sys.exit(1)
    print(f"PASS ({CASE})")


if __name__ == "__main__":
    main()
