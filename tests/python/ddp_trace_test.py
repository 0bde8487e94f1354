#!/usr/bin/env python3
"""Real PyTorch DDP runs (gloo, CPU processes under `dpscope launch`) recorded by dpscope_torch, checked
against what PyTorch itself reports: one ctest test per case.

Usage: /usr/bin/python3 ddp_trace_test.py SOURCE_DIR DPSCOPE_BIN CASE
Exit 77 (ctest: skipped) when this Python has no PyTorch.
"""
import contextlib
import json
import math
import os
import resource
import re
import shutil
import subprocess
import sys
import tempfile
import time

try:
    import torch
    from torch.utils.data.distributed import DistributedSampler
except ImportError:
    print("SKIP: this Python has no PyTorch (scripts/install-deps.sh installs python3-torch)")
    sys.exit(77)

SRC, DPSCOPE, CASE = sys.argv[1], sys.argv[2], sys.argv[3]
TUTORIAL = os.path.join(SRC, "examples", "pytorch", "ddp_tutorial.py")
VARIANTS = os.path.join(SRC, "tests", "python", "ddp_variants.py")  # DDP's options and loops' habits
TIMEOUT_S = 180
failures = []


def fail(message):
    failures.append(message)
    print(f"FAIL: {message}")


def check(condition, message):
    if not condition:
        fail(message)
    return condition


def launch_cmd(nproc):
    # --master-port 0: the launcher draws a port nobody listens on, below the kernel's ephemeral range,
    # so neither a test beside this one (ctest -j) nor any process's outgoing connection takes it.
    return [DPSCOPE, "launch", "--nproc", str(nproc), "--master-addr", "127.0.0.1", "--master-port", "0", "--"]


def launch(nproc, args, zero_change_dir=None, expect_rc=0, file_limit=None):
    """Runs the tutorial on `nproc` ranks; zero_change_dir: under `python3 -m dpscope_torch.run`;
    file_limit: no file written larger than that many bytes (RLIMIT_FSIZE: a disk that fills)."""
    env = dict(os.environ, PYTHONPATH=os.path.join(SRC, "python"), OMP_NUM_THREADS="1")
    program = [sys.executable]
    if zero_change_dir is not None:
        program += ["-m", "dpscope_torch.run", "--trace-dir", zero_change_dir]
    cmd = [*launch_cmd(nproc), *program, TUTORIAL, *args]
    limit = None if file_limit is None else (lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (file_limit,) * 2))
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=TIMEOUT_S, preexec_fn=limit)
    if out.returncode != expect_rc:
        fail(f"exit {out.returncode} (expected {expect_rc}): {' '.join(cmd)}\n{out.stdout}\n{out.stderr}")
    return out


def end_session(job):
    """Ends a launcher started with start_new_session and every rank it started: SIGTERM (the
    launcher passes it on), then SIGKILL to whatever of that session is left (each rank has a
    process group of its own, but the launcher's session)."""
    job.terminate()
    try:
        job.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        pass
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == job.pid:  # the session id
            try:
                os.kill(int(entry), 9)
            except OSError:
                pass
    job.communicate()


RANK0_ONLY_SCRIPT = """
import datetime, sys, time, torch, torch.distributed as dist
import dpscope_torch
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=8))
ddp = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 2))
optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1)
watcher = dpscope_torch.watch(ddp, sys.argv[1], optimizer=optimizer) if dist.get_rank() == 0 else None
if dist.get_rank() != 0:
    time.sleep(3)  # (its all-reduce then times out after rank 0's wait, which is what is checked)
for _ in range(3):
    optimizer.zero_grad()
    ddp(torch.randn(8, 4)).sum().backward()
    optimizer.step()
"""


WATCH_ERRORS_SCRIPT = """
import sys, torch, torch.distributed as dist
import dpscope_torch
dist.init_process_group("gloo", rank=0, world_size=1)
ddp = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(2, 2))
for model, every in ((torch.nn.Linear(2, 2), 10), (ddp, 2.5), (ddp, 2**32)):
    try:
        dpscope_torch.watch(model, sys.argv[1], values_every=every)
        print("accepted")
    except (TypeError, ValueError) as e:
        print(f"{type(e).__name__}: {e}")
"""


def read_rank(trace_dir, rank):
    with open(os.path.join(trace_dir, f"rank-{rank}.jsonl"), encoding="utf-8") as f:
        lines = [json.loads(line) for line in f]
    return lines[0], lines[1:]


def dump_of(dump, rank):
    with open(f"{dump}.rank{rank}", encoding="utf-8") as f:
        return json.load(f)


def strict_stats(trace_dir):
    out = subprocess.run([DPSCOPE, "trace", "stats", trace_dir, "--per-step"], capture_output=True, text=True,
                         timeout=TIMEOUT_S)
    check(out.returncode == 0, f"dpscope trace stats {trace_dir} refused the trace: {out.stderr}")
    return out.stdout


def sampler_batches(dataset, world, rank, epoch, batch, set_epoch, shuffle=True, drop_last=False):
    sampler = DistributedSampler(range(dataset), num_replicas=world, rank=rank, shuffle=shuffle, seed=0,
                                 drop_last=drop_last)
    if set_epoch:
        sampler.set_epoch(epoch)
    indices = list(sampler)
    return [indices[i:i + batch] for i in range(0, len(indices), batch)]


def check_bucket_times(rank, events, launched, done):
    """A bucket's all-reduce ends after it is launched and before its backward returns: DDP's
    backward waits for every bucket (on the CPU the waiter stamps the end before it hands the result
    to DDP), so bucket_done can be late by the waiter's wake-up but never past the backward phase's end."""
    backward = {e["step"]: (e["ts"], e["ts"] + e["dur"]) for e in events
                if e["type"] == "span" and e["cat"] == "phase" and e["name"] == "backward"}
    starts = {(e["step"], e["args"]["bucket"]): e["ts"] for e in launched}
    for e in done:
        step, bucket = e["step"], e["args"]["bucket"]
        start = starts.get((step, bucket))
        begin, end = backward.get(step, (None, None))
        check(start is not None and end is not None and begin <= start <= e["ts"] <= end,
              f"rank {rank} step {step} bucket {bucket}: launched {start}, done {e['ts']}, backward {begin}-{end}")


def check_bucket_limits(rank, run, params, rebuilt, sparse=()):
    """The header's limits (first_bucket_mb, bucket_cap_mb) cut PyTorch's rebuilt buckets where PyTorch
    cut them: one dtype, so bucket i closed as the parameter that brought it to its limit came (the
    first bucket's limit is its own; PyTorch 2.x lowers it to a bucket_cap_mb given explicitly). A
    parameter with sparse gradients (`sparse`) is a bucket of its own, outside the limits."""
    if len({p["bytes"] // max(1, math.prod(p["shape"])) for p in params}) != 1:
        return  # several dtypes: each has buckets of its own
    rebuilt = [group for group in rebuilt if not set(group) & set(sparse)]
    limits = [round(run["first_bucket_mb"] * (1 << 20)), round(run["bucket_cap_mb"] * (1 << 20))]
    for i, group in enumerate(rebuilt):
        sizes = [params[index]["bytes"] for index in group]
        limit = limits[min(i, 1)]
        closed = sum(sizes) >= limit or i == len(rebuilt) - 1
        check(sum(sizes) - sizes[-1] < limit and closed,
              f"rank {rank}: rebuilt bucket {i} of {sum(sizes)} bytes ({sizes}) was not cut at the header's limit "
              f"{limit} (first_bucket_mb {run['first_bucket_mb']}, bucket_cap_mb {run['bucket_cap_mb']})")


def check_run(trace_dir, dump, world, used_params=None, lossy=False):
    """Everything a recorded run must agree with: PyTorch's logging data, the sampler, the losses."""
    strict_stats(trace_dir)
    headers = {}
    for rank in range(world):
        header, events = read_rank(trace_dir, rank)
        headers[rank] = header
        ref = dump_of(dump, rank)
        log = ref["logging"]
        run = header["run"]
        check(run["process"]["rank"] == rank and run["process"]["world_size"] == world, f"rank {rank}: process entry {run['process']}")
        # Clocks of one machine: the offset is within its uncertainty (plus the clock's own jitter).
        process = run["process"]
        check(abs(process["clock_offset_ns"]) <= process["clock_uncertainty_ns"] + 2_000_000,
              f"rank {rank}: clock offset {process['clock_offset_ns']} ns beyond +/- {process['clock_uncertainty_ns']} ns")
        names = [p["name"] for p in header["params"]]
        check(names == ref["params"], f"rank {rank}: parameters {names} != PyTorch's {ref['params']}")
        # Buckets: the header's are DDP's first assignment, the `rebuilt` event its rebuild.
        sizes = [int(s) for s in log["bucket_sizes"].split(",")]
        check([b["bytes"] for b in header["buckets"]] == sizes,
              f"rank {rank}: header buckets {header['buckets']} != PyTorch's bucket_sizes {sizes}")
        rebuilt = [e for e in events if e["type"] == "buckets" and e["reason"] == "rebuilt"]
        if int(log.get("has_rebuilt_buckets", 0)):
            want_params = [[int(i) for i in group.split()] for group in log["rebuilt_per_bucket_param_indices"].split(",")]
            want_bytes = [int(s) for s in log["rebuilt_bucket_sizes"].split(",")]
            if check(len(rebuilt) == 1, f"rank {rank}: {len(rebuilt)} rebuilt bucket events, PyTorch rebuilt once"):
                got = rebuilt[0]["buckets"]
                check([b["params"] for b in got] == want_params and [b["bytes"] for b in got] == want_bytes,
                      f"rank {rank}: rebuilt buckets {got} != PyTorch's {want_params} {want_bytes}")
                check_bucket_limits(rank, run, header["params"], want_params, ref.get("sparse_params", ()))
                # DDP rebuilds as the 2nd step's forward begins (with static_graph the 3rd's: its first
                # backward only records the graph; checked by hand with _get_ddp_logging_data() after
                # each forward): before any bucket of that step is launched (the viewer shows the new
                # buckets from their first launch on).
                at = 2 if run.get("static_graph") else 1
                check(rebuilt[0]["step"] == at, f"rank {rank}: buckets rebuilt at step {rebuilt[0]['step']}, DDP rebuilds in step {at}")
                launches = [e["ts"] for e in events if e["type"] == "instant" and e["name"] == "bucket_launched"
                            and e["step"] == at]
                check(rebuilt[0]["phase"] == "forward" and launches and rebuilt[0]["ts"] < min(launches),
                      f"rank {rank}: rebuilt buckets stamped {rebuilt[0]['ts']} ({rebuilt[0]['phase']}), "
                      f"after the step's first launch {min(launches) if launches else None}")
        steps = len(ref["losses"])
        # One gradient-ready per used parameter per step; the last step's order is PyTorch's.
        # (a dynamic graph or parameters frozen in training: the script counted each step's own)
        per_step = ref.get("used_params") if used_params == "per_step" else None
        params = len(names) if used_params is None or per_step is not None else used_params
        ready = {}
        for e in events:
            if e["type"] == "instant" and e["name"] == "grad_ready":
                ready.setdefault(e["step"], []).append((e["ts"], e["args"]["param"]))
        check(sorted(ready) == list(range(steps)), f"rank {rank}: gradient-ready steps {sorted(ready)} != 0..{steps - 1}")
        for step, got in ready.items():
            if per_step is not None:
                params = per_step[step]
            check(len(got) == params and len({p for _, p in got}) == params,
                  f"rank {rank} step {step}: {len(got)} gradient-ready instants for {params} parameters")
        order = [int(i) for i in log.get("prev_iteration_grad_ready_order_indices", "").split(",") if i.strip()]
        # (with a dynamic graph, whose steps differ, PyTorch's order is one of the steps', not always
        # the last's: with two heads used in turn, it gave the first step's for the last)
        if order and steps - 1 in ready:
            last = [p for _, p in sorted(ready[steps - 1], key=lambda x: x[0])]
            orders = [[p for _, p in sorted(got, key=lambda x: x[0])] for got in ready.values()]
            check(last == order[:len(last)] or last == order or (per_step is not None and order in orders),
                  f"rank {rank}: last step's gradient-ready order {last} != PyTorch's {order}")
        # Every bucket launched is done, once per step, with its all-reduce span.
        launched = [e for e in events if e["type"] == "instant" and e["name"] == "bucket_launched"]
        done = [e for e in events if e["type"] == "instant" and e["name"] == "bucket_done"]
        spans = [e for e in events if e["type"] == "span" and e["cat"] == "collective"]
        check(len(launched) == len(done) == len(spans) and len(launched) >= steps,
              f"rank {rank}: {len(launched)} launched, {len(done)} done, {len(spans)} all-reduce spans for {steps} steps")
        if header["devices"][0]["kind"] == "cpu":  # (on a GPU the stamps are CUDA events: not checked yet)
            own = [e for e in launched if e["step"] < steps]  # (not a joined rank's shadow steps: no backward)
            check_bucket_times(rank, events, own, [e for e in done if e["step"] < steps])
        # Samples: each step's indices are DistributedSampler's, epoch by epoch: the batch the
        # DataLoader returned, once (micro-batches cut from it, a second view of it, take none).
        samples = [e for e in events if e["type"] == "samples"]
        if ref.get("sampler", True):
            want = []
            for epoch in range(ref["epochs"]):
                batches = sampler_batches(ref["dataset"], world, rank, epoch, ref["batch"], ref["set_epoch"],
                                          ref.get("shuffle", True), ref.get("drop_last", False))
                want += [(epoch, batch) for batch in batches[:len(batches) - ref.get("batches_dropped", 0)]]
            by_step = {}
            for e in samples:
                by_step.setdefault(e["step"], (e.get("epoch"), []))[1].extend(e["indices"])
            check([by_step[k] for k in sorted(by_step)] == want,
                  f"rank {rank}: samples differ from DistributedSampler's ({len(samples)} events, {len(want)} batches)")
            check(sorted(by_step) == list(range(steps)) and len(samples) == steps,
                  f"rank {rank}: samples steps {sorted(by_step)}, {len(samples)} events for {steps} steps")
        else:
            check(not samples, f"rank {rank}: {len(samples)} samples events without a watched sampler")
        # The loss of every step, as the script saw it.
        losses = [e["values"]["loss"] for e in sorted((e for e in events if e["type"] == "counter" and e["name"] == "loss"),
                                                      key=lambda e: e["step"])]
        check(losses == ref["losses"], f"rank {rank}: losses {losses[:3]}... != the script's {ref['losses'][:3]}...")
        # Phases tile each step in order.
        for step in range(steps):
            phases = [e["name"] for e in sorted((e for e in events if e["type"] == "span" and e["cat"] == "phase"
                                                 and e["step"] == step), key=lambda e: e["ts"])]
            forwards = ["forward"] * ref.get("forwards_per_backward", 1)  # (each forward is a span of its own)
            want_phases = ["data"] + (forwards + ["backward"]) * ref.get("micro_batches", 1)
            if step not in ref.get("skipped", ()):  # (a step whose optimizer.step() was not called: none)
                want_phases.append("optimizer")
            check(phases == want_phases, f"rank {rank} step {step}: phases {phases}")
    # Averaged gradients: identical on every rank, the mean of the ranks' own (values events).
    values = {}
    for rank in range(world):
        _, events = read_rank(trace_dir, rank)
        for e in events:
            if e["type"] == "values":
                values[(rank, e["step"], e["param"], e["when"])] = e["values"]
    keys = {(s, p) for (_, s, p, w) in values if w == "after_reduce"}
    check(len(keys) > 0, "no gradient values were recorded")
    for step, param in sorted(keys):
        after = [values.get((r, step, param, "after_reduce")) for r in range(world)]
        before = [values.get((r, step, param, "before_reduce")) for r in range(world)]
        if not check(all(a == after[0] for a in after) and None not in before,
                     f"step {step} param {param}: averaged gradients differ across ranks"):
            continue
        if lossy:
            continue  # (a compressing hook's result is not the exact mean)
        mean = [sum(col) / world for col in zip(*before)]
        check(all(math.isclose(a, m, rel_tol=1e-5, abs_tol=1e-7) for a, m in zip(after[0], mean)),
              f"step {step} param {param}: the average {after[0][:3]} is not the ranks' mean {mean[:3]}")
    return headers


def run_variants(args, trace_dir=None, start="spawn", nproc=2, expect_rc=0):
    """Runs tests/python/ddp_variants.py (watched under `python3 -m dpscope_torch.run` when trace_dir is
    given): `start` env under `dpscope launch`, else one process that starts its `nproc` ranks itself."""
    env = dict(os.environ, PYTHONPATH=os.path.join(SRC, "python"), OMP_NUM_THREADS="1")
    program = [sys.executable]
    if trace_dir is not None:
        program += ["-m", "dpscope_torch.run", "--trace-dir", trace_dir]
    cmd = [*program, VARIANTS, "--start", start, *args]
    if start == "env":
        cmd = [*launch_cmd(nproc), *cmd]
    else:
        cmd += ["--nproc", str(nproc), "--port", str(free_port())]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=TIMEOUT_S)
    if out.returncode != expect_rc:
        fail(f"exit {out.returncode} (expected {expect_rc}): {' '.join(cmd)}\n{out.stdout}\n{out.stderr}")
    return out


def free_port():
    """A port for MASTER_PORT that nothing listens on now (a script that spawns its ranks sets it)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def watched_and_plain(tmp, name, args, start="spawn", nproc=2, lossy=False, used_params=None):
    """One variant run twice, unwatched and watched: the same exit status, the same weights and losses
    on every rank, and the trace checked against PyTorch's own account (check_run). Returns the
    trace directory."""
    trace_dir, dump, plain = (os.path.join(tmp, name, part) for part in ("trace", "dump.json", "plain.json"))
    os.makedirs(os.path.join(tmp, name))
    run_variants(args + ["--dump", plain], start=start, nproc=nproc)
    run_variants(args + ["--dump", dump], trace_dir=trace_dir, start=start, nproc=nproc)
    for rank in range(nproc):
        if not check(os.path.exists(f"{dump}.rank{rank}") and os.path.exists(f"{plain}.rank{rank}"),
                     f"{name}: rank {rank} wrote no account of its run"):
            return trace_dir
        a, b = dump_of(plain, rank), dump_of(dump, rank)
        check(a["weights_sha256"] == b["weights_sha256"] and a["losses"] == b["losses"],
              f"{name}: rank {rank}: the watched run's weights or losses differ from the unwatched run's")
    files = sorted(os.listdir(trace_dir)) if os.path.isdir(trace_dir) else []
    if check(files == [f"rank-{r}.jsonl" for r in range(nproc)], f"{name}: trace files {files}, expected one per rank"):
        check_run(trace_dir, dump, nproc, used_params=used_params, lossy=lossy)
    return trace_dir


def variants_case(tmp):
    if CASE == "spawn_and_process":
        # PyTorch's DDP tutorial shape: one process started under dpscope_torch.run that starts its
        # ranks itself, with torch.multiprocessing.spawn, or multiprocessing.Process under the fork
        # and the spawn start methods: every rank writes its own trace.
        watched_and_plain(tmp, "spawn", ["--destroy"], start="spawn")  # (the tutorial's cleanup())
        watched_and_plain(tmp, "fork", [], start="fork", nproc=3)
        watched_and_plain(tmp, "process", [], start="process")
        # A spawned rank that raises: the parent exits 1 as unwatched, each rank's trace ends with the
        # error instant and stays readable.
        failing = os.path.join(tmp, "failing")
        run_variants(["--raise-at-end"], expect_rc=1)
        out = run_variants(["--raise-at-end"], trace_dir=failing, expect_rc=1)
        check("fails on purpose (--raise-at-end)" in out.stderr, f"the parent does not report the rank's error: {out.stderr[-800:]}")
        strict_stats(failing)
        for rank in range(2):
            errors = [e for e in read_rank(failing, rank)[1] if e.get("name") == "error"]
            check(len(errors) == 1 and f"rank {rank} fails on purpose" in errors[0]["args"]["message"],
                  f"rank {rank}: error instants {errors}")
    elif CASE == "ddp_options":
        # DDP's options and the habits of real loops, in two launches (each variant compared with its
        # unwatched run): a user's comm hook registered after DDP is built (fp16 compression; PowerSGD
        # with its state), gradient_as_bucket_view, static_graph, BatchNorm's broadcast buffers, two
        # parameter groups with momentum and an LR scheduler (which wraps optimizer.step), a forward
        # returning a dict (and a tuple), zero_grad(set_to_none=True), an eval forward under no_grad
        # between steps, a second DDP model, DataLoader workers, destroy_process_group() at the end,
        # an embedding + LSTM + Transformer encoder layer, three ranks.
        watched_and_plain(tmp, "mlp", ["--model", "batchnorm", "--gradient-as-bucket-view", "--hook", "fp16",
                                       "--param-groups", "--dict-output", "--set-to-none", "--eval-between",
                                       "--second-model", "--workers", "2", "--destroy"], start="env", lossy=True)
        trace_dir = watched_and_plain(tmp, "sequence", ["--model", "sequence", "--static-graph", "--hook", "powersgd",
                                                        "--frozen"], start="env", nproc=3, lossy=True)
        stats = strict_stats(trace_dir)
        check("straggler:" in stats, f"trace stats says nothing of stragglers:\n{stats}")
    elif CASE == "accumulate_and_join":
        # Gradient accumulation under no_sync(), the micro-batches cut from each batch the loader returns
        # (fetched as trained on): a backward that reduces nothing logs no gradient-ready
        # (the step's gradients are ready in its last micro-batch's backward, whose buckets launch).
        watched_and_plain(tmp, "accumulate", ["--accumulate", "2", "--stream"], start="env")
        # Uneven inputs under DDP's Join (and no DistributedSampler): rank 1 runs out of batches one
        # step early, then joins the all-reduces of rank 0's last step with zeros; they are that step's.
        trace_dir = watched_and_plain(tmp, "join", ["--uneven", "--no-sampler", "--epochs", "1"], start="env")
        launched = [{e["step"] for e in read_rank(trace_dir, r)[1] if e.get("name") == "bucket_launched"}
                    for r in range(2)]
        check(launched[0] == launched[1] and len(launched[0]) == len(dump_of(os.path.join(tmp, "join", "dump.json"), 0)["losses"]),
              f"the joined rank's all-reduces are not its peer's steps: steps {sorted(launched[0])} and {sorted(launched[1])}")
        strict_stats(trace_dir)


def loop_habits_case(tmp):
    if CASE == "loop_habits":
        # Habits of real loops, in one launch each way: clip_grad_norm_ between backward and step, the
        # forward under CPU autocast (bfloat16), one step in 5 without optimizer.step() (GradScaler's
        # skip; the last of the 10 steps is one), rank 0 saving a checkpoint between barriers every 3 steps,
        # DistributedSampler(shuffle=False, drop_last=True) over 67 samples, a seed per rank (DDP
        # broadcasts rank 0's weights).
        checkpoint = os.path.join(tmp, "checkpoint.pt")
        trace_dir = watched_and_plain(tmp, "habits", ["--clip", "0.5", "--autocast", "--skip-every", "5",
                                                      "--checkpoint", checkpoint, "--checkpoint-every", "3",
                                                      "--no-shuffle", "--drop-last", "--samples", "67",
                                                      "--seed-per-rank"], start="env")
        ref = dump_of(os.path.join(tmp, "habits", "dump.json"), 0)
        check(len(ref["losses"]) == 10 and ref["skipped"] == [4, 9], f"the skipped steps: {ref['skipped']}")
        for rank in range(2):
            optimizer = {e["step"] for e in read_rank(trace_dir, rank)[1] if e.get("name") == "optimizer"}
            check(optimizer == set(range(10)) - {4, 9}, f"rank {rank}: optimizer phases in steps {sorted(optimizer)}")
        check(os.path.exists(checkpoint), "rank 0 saved no checkpoint")
        # A script that resumes from it (loaded before DDP is built), with a seed per rank, on 3 ranks
        # started by forkserver, each parameter in a bucket of its own after the rebuild.
        trace_dir = watched_and_plain(tmp, "resume", ["--resume", checkpoint, "--seed-per-rank", "--samples", "66",
                                                      "--bucket-cap-mb", "0.000001"], start="forkserver", nproc=3)
        _, events = read_rank(trace_dir, 0)
        before = [e for e in events if e["type"] == "values" and e["when"] == "before_reduce" and e["step"] == 0]
        check(len(before) == 4, f"before_reduce values of step 0: {len(before)} events")
    elif CASE == "dynamic_graph":
        # find_unused_parameters=True with a dynamic graph: one head on even steps, the other on odd
        # ones; the first layer frozen (requires_grad_(False)) from the second epoch on, as when
        # fine-tuning (without find_unused_parameters DDP itself stops: checked below); tied weights
        # (an embedding shared with the output layer) on 4 ranks.
        watched_and_plain(tmp, "branches", ["--model", "branches", "--find-unused", "--freeze-after", "1",
                                            "--epochs", "3"], start="env", used_params="per_step")
        ref = dump_of(os.path.join(tmp, "branches", "dump.json"), 0)
        check(ref["used_params"][:4] == [4] * 4 and ref["used_params"][4:] == [2] * 8,
              f"the parameters with gradients per step: {ref['used_params']}")
        watched_and_plain(tmp, "tied", ["--model", "tied", "--samples", "128"], start="spawn", nproc=4)
        # Frozen without find_unused_parameters: DDP raises at the next forward, watched or not (exit
        # 1 both ways), and the trace ends with that error.
        frozen = os.path.join(tmp, "frozen")
        run_variants(["--freeze-after", "1"], start="env", expect_rc=1)
        run_variants(["--freeze-after", "1"], trace_dir=frozen, start="env", expect_rc=1)
        strict_stats(frozen)
        for rank in range(2):
            errors = [e for e in read_rank(frozen, rank)[1] if e.get("name") == "error"]
            check(len(errors) == 1 and "Expected to have finished reduction" in errors[0]["args"]["message"]
                  and errors[0]["step"] == 5, f"rank {rank}: error instants {errors}")
    elif CASE == "long_run":
        # 1,500 steps in one process (a one-rank group): what the watcher keeps does not grow with the
        # steps, nor does its step time, nor the trace's lines per step; the bucket buffer DDP replaced
        # when it rebuilt its buckets is let go (before, our tensor over it was kept for the whole
        # run: as many bytes again as all the gradients).
        env = dict(os.environ, PYTHONPATH=os.path.join(SRC, "python"), OMP_NUM_THREADS="1")
        out = subprocess.run([sys.executable, os.path.join(SRC, "tests", "python", "long_run.py"),
                              os.path.join(tmp, "long"), "1500"], capture_output=True, text=True, env=env,
                             timeout=TIMEOUT_S)
        if not check(out.returncode == 0, f"long_run.py: exit {out.returncode}: {out.stderr[-2000:]}"):
            return
        got = json.loads(out.stdout.splitlines()[-1])
        early, late = got["marks"]["300"], got["marks"]["1500"]
        check(early["state"] == late["state"], f"the watcher's containers grew: {early['state']} -> {late['state']}")
        check(late["objects"] - early["objects"] <= 50, f"Python objects {early['objects']} -> {late['objects']}")
        check(late["handed_bytes"] == got["bucket_bytes"],
              f"the watcher holds {late['handed_bytes']} bytes of bucket buffers, "
              f"the buckets have {got['bucket_bytes']}")
        check(got["last_ms"] < 3 * got["first_ms"] + 1.0,  # (loose: CI shares its cores; the sizes above are exact)
              f"step time grew: {got['first_ms']:.3f} ms (steps 300-499) -> {got['last_ms']:.3f} ms (last 200)")
        check(got["lines_first"] == got["lines_last"], f"lines per step {got['lines_first']} -> {got['lines_last']}")
        strict_stats(os.path.join(tmp, "long"))


EXIT_WORK_SCRIPT = """
import atexit, sys, torch, torch.distributed as dist, weakref
dist.init_process_group("gloo")
rank = dist.get_rank()
log = open(f"{sys.argv[1]}.log{rank}", "w")  # written each step, never closed: the interpreter flushes it
atexit.register(lambda: open(f"{sys.argv[1]}.atexit{rank}", "w").write("ran"))
ddp = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(),
                                                                    torch.nn.Linear(8, 2)))
optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1)
for step in range(3):
    optimizer.zero_grad()
    ddp(torch.randn(8, 4)).sum().backward()
    optimizer.step()
    log.write(f"step {step}\\n")
# A training-mode forward whose output is never backpropagated (a loss logged without no_grad): its
# graph, and the input it saved, are freed when the script lets them go, watched or not.
x = torch.randn(8, 4)
kept = weakref.ref(x)
float(ddp(x).sum())
del x
print(f"rank {rank}: graph freed: {kept() is None}", flush=True)
"""


FAIL_MID_BACKWARD_SCRIPT = """
import time, torch, torch.distributed as dist
dist.init_process_group("gloo")
rank = dist.get_rank()
fail = [False]
class Boom(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)
    @staticmethod
    def backward(ctx, g):
        if fail[0]:
            raise RuntimeError("rank 0 fails mid-backward")
        return g
layers = [torch.nn.Linear(16, 1024), torch.nn.Linear(1024, 1024), torch.nn.Linear(1024, 4)]
model = torch.nn.Sequential(layers[0], torch.nn.ReLU(), layers[1], torch.nn.ReLU(), layers[2])
class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.m = model
    def forward(self, x):
        return self.m[4](self.m[3](self.m[2](Boom.apply(self.m[1](self.m[0](x))))))
ddp = torch.nn.parallel.DistributedDataParallel(M(), bucket_cap_mb=1)
optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01)
for step in range(4):
    if step == 2 and rank == 1:
        time.sleep(30)  # late to step 2, whose first bucket rank 0 has launched when it fails
    fail[0] = step == 2 and rank == 0
    optimizer.zero_grad()
    ddp(torch.randn(8, 16)).pow(2).mean().backward()
    optimizer.step()
"""


GAN_SCRIPT = """
import sys, torch, torch.distributed as dist, torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
dist.init_process_group("gloo")
torch.manual_seed(0)
G = DDP(nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 8)))  # built first: the one watched
D = DDP(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)))
opt_g, opt_d = torch.optim.Adam(G.parameters(), 1e-3), torch.optim.Adam(D.parameters(), 1e-3)
bce, g = nn.BCEWithLogitsLoss(), torch.Generator().manual_seed(dist.get_rank() + 1)
for _ in range(4):  # the DCGAN tutorial's order: fake = G(z), D's step, then G's backward and step
    real, z = torch.randn(16, 8, generator=g), torch.randn(16, 4, generator=g)
    D.zero_grad()
    bce(D(real), torch.ones(16, 1)).backward()
    fake = G(z)
    bce(D(fake.detach()), torch.zeros(16, 1)).backward()
    opt_d.step()
    G.zero_grad()
    err_g = bce(D(fake), torch.ones(16, 1))
    err_g.backward()
    opt_g.step()
    print(f"loss {err_g.item()!r}", flush=True)
"""


def loop_shapes_case(tmp):
    """Shapes of real loops the watcher must follow without changing the run: a sparse embedding
    (DDP reduces its gradient alone), DDP's built-in C++ hooks registered after it is built (they
    go inside the watcher's hook), optimizer.step(closure) (the forward and backward inside the
    step), torch.autograd.backward(loss); and under dpscope_torch.run, what the interpreter's exit
    does for the script (its atexit handlers, its open files flushed)."""
    watched_and_plain(tmp, "sparse", ["--model", "sparse", "--hook", "builtin", "--closure"], start="env")
    watched_and_plain(tmp, "autograd", ["--autograd-backward", "--hook", "builtin-fp16", "--param-groups"],
                      start="env", lossy=True)
    # The samples of each step are the training batch's: a validation DataLoader with a
    # DistributedSampler of its own (which dpscope_torch.run watches too) every 2 steps, a second
    # forward of each batch (two views), batches fetched one at a time by 2 workers.
    watched_and_plain(tmp, "samples", ["--stream", "--two-views", "--validate-every", "2", "--workers", "2"],
                      start="env")
    script, out = os.path.join(tmp, "exit_work.py"), os.path.join(tmp, "exit")
    with open(script, "w", encoding="utf-8") as f:
        f.write(EXIT_WORK_SCRIPT)
    env = dict(os.environ, PYTHONPATH=os.path.join(SRC, "python"), OMP_NUM_THREADS="1")
    for watched in (False, True):
        for rank in range(2):
            for suffix in ("log", "atexit"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(f"{out}.{suffix}{rank}")
        program = [sys.executable] + (["-m", "dpscope_torch.run", "--trace-dir", os.path.join(tmp, "exit_trace")]
                                      if watched else [])
        run = subprocess.run([*launch_cmd(2), *program, script, out], capture_output=True, text=True, env=env,
                             timeout=TIMEOUT_S)
        what = "watched" if watched else "unwatched"
        check(run.returncode == 0, f"exit work, {what}: exit {run.returncode}: {run.stderr[-1500:]}")
        for rank in range(2):
            check(f"rank {rank}: graph freed: True" in run.stdout, f"{what}: rank {rank} kept a forward's graph: {run.stdout}")
            with open(f"{out}.log{rank}", encoding="utf-8") as f:
                check(f.read() == "step 0\nstep 1\nstep 2\n", f"{what}: rank {rank}'s unclosed log lost its lines")
            check(os.path.exists(f"{out}.atexit{rank}"), f"{what}: rank {rank}'s atexit handler did not run")
    # A GAN in the DCGAN tutorial's order under dpscope_torch.run: the generator (watched) is in its
    # forward while the discriminator's optimizer steps; that step() is not the generator's, whose
    # steps keep their gradients, buckets and losses.
    script = os.path.join(tmp, "gan.py")
    with open(script, "w", encoding="utf-8") as f:
        f.write(GAN_SCRIPT)
    gan_trace = os.path.join(tmp, "gan_trace")
    run = subprocess.run([*launch_cmd(2), sys.executable, "-m", "dpscope_torch.run", "--trace-dir", gan_trace, script],
                         capture_output=True, text=True, env=env, timeout=TIMEOUT_S)
    if check(run.returncode == 0, f"gan: exit {run.returncode}: {run.stderr[-1500:]}"):
        for rank in range(2):
            printed = [float(line.split()[-1]) for line in run.stdout.splitlines() if line.startswith(f"[rank {rank}] loss")]
            _, events = read_rank(gan_trace, rank)
            ready = {}
            for e in events:
                if e.get("name") == "grad_ready":
                    ready[e["step"]] = ready.get(e["step"], 0) + 1
            losses = [e["values"]["loss"] for e in sorted((e for e in events if e.get("name") == "loss"),
                                                           key=lambda e: e["step"])]
            check(ready == {step: 4 for step in range(4)} and losses == printed,
                  f"gan rank {rank}: gradient-ready per step {ready}, losses {losses} (printed {printed})")
    # A rank that fails mid-backward, a bucket of its launched and its peer late: the job ends as soon
    # as unwatched (its exit tells the peer), where the watcher waited 30 s for that all-reduce.
    script = os.path.join(tmp, "fail_mid_backward.py")
    with open(script, "w", encoding="utf-8") as f:
        f.write(FAIL_MID_BACKWARD_SCRIPT)
    started = time.monotonic()
    run = subprocess.run([*launch_cmd(2), sys.executable, "-m", "dpscope_torch.run", "--trace-dir",
                          os.path.join(tmp, "fail_trace"), script], capture_output=True, text=True, env=env,
                         timeout=TIMEOUT_S)
    took = time.monotonic() - started
    check(run.returncode == 1 and "rank 0 fails mid-backward" in run.stderr and took < 20,
          f"a rank failing mid-backward: exit {run.returncode} after {took:.0f} s: {run.stderr[-1200:]}")


def main():
    tmp = tempfile.mkdtemp(prefix="dpscope-torch-")
    try:
        trace_dir, dump = os.path.join(tmp, "trace"), os.path.join(tmp, "dump.json")
        if CASE == "mlp_zero_change":
            launch(2, ["--dump", dump], zero_change_dir=trace_dir)
            check_run(trace_dir, dump, 2)
        elif CASE == "mlp_watch_api":
            # A model past the first bucket's 1 MiB, cut at 0.5 MB: several buckets after the rebuild.
            launch(2, ["--dump", dump, "--trace-dir", trace_dir, "--bucket-cap-mb", "0.5", "--sizes", "256-512-512-512-10"])
            _, events = read_rank(trace_dir, 0)
            rebuilt = [e for e in events if e["type"] == "buckets" and e["reason"] == "rebuilt"]
            check(rebuilt and len(rebuilt[0]["buckets"]) >= 3, f"expected several buckets after the rebuild: {rebuilt}")
            check_run(trace_dir, dump, 2)
        elif CASE == "conv_unused_parameter":
            launch(2, ["--model", "conv", "--dump", dump, "--epochs", "1"], zero_change_dir=trace_dir)
            header, _ = read_rank(trace_dir, 0)
            unused = [p["index"] for p in header["params"] if p["name"].startswith("unused.")]
            check(len(unused) == 2, f"the unused layer's parameters: {unused}")
            check_run(trace_dir, dump, 2, used_params=len(header["params"]) - len(unused))
        elif CASE == "no_set_epoch":
            launch(2, ["--dump", dump, "--no-set-epoch"], zero_change_dir=trace_dir)
            check_run(trace_dir, dump, 2)
            _, events = read_rank(trace_dir, 0)
            by_epoch = {}
            for e in events:
                if e["type"] == "samples":
                    by_epoch.setdefault(e["epoch"], []).append(e["indices"])
            check(sorted(by_epoch) == [0, 1] and by_epoch[0] == by_epoch[1],
                  "without set_epoch the second epoch (pass) must repeat the first's order")
        elif CASE == "same_weights_as_unwatched":
            # Three ranks: averaging multiplies by 1/3, not exact in binary; the watched run must still
            # compute the same bits as the unwatched one.
            plain = os.path.join(tmp, "plain.json")
            launch(3, ["--dump", plain, "--epochs", "1"])
            launch(3, ["--dump", dump, "--epochs", "1"], zero_change_dir=trace_dir)
            a, b = dump_of(plain, 0), dump_of(dump, 0)
            check(a["weights_sha256"] == b["weights_sha256"] and a["losses"] == b["losses"],
                  "a watched run's weights or losses differ from the unwatched run's")
        elif CASE == "error_instant":
            out = launch(2, ["--fail-at-step", "3"], zero_change_dir=trace_dir, expect_rc=1)
            check("failing on purpose" in out.stderr, f"the launcher does not name the error: {out.stderr}")
            strict_stats(trace_dir)
            for rank in range(2):
                _, events = read_rank(trace_dir, rank)
                errors = [e for e in events if e["type"] == "instant" and e["name"] == "error"]
                if check(len(errors) == 1, f"rank {rank}: {len(errors)} error instants"):
                    # Raised before the 4th step's forward (0-based step 3), after its batch was read:
                    # that step's data phase.
                    check("failing on purpose at step 3" in errors[0]["args"]["message"] and errors[0]["step"] == 3
                          and errors[0]["phase"] == "data", f"rank {rank}: error instant {errors[0]}")
            # The trace's disk full mid-run (a file size limit stands in; Python ignores SIGXFSZ, so a
            # write past it fails with EFBIG): the run goes on to its end unrecorded from there, each rank
            # says so in one line, its trace is cut back to its last whole step (the strict reader takes
            # it), and the run's status is 1.
            full = os.path.join(tmp, "full")
            limit = 24_000
            out = launch(2, ["--epochs", "2"], zero_change_dir=full, expect_rc=1, file_limit=limit)
            check("epoch 2/2" in out.stdout, f"the run did not go on to its end: {out.stdout!r}")
            line = (f"dpscope: error: cannot write trace '{os.path.join(full, 'rank-0.jsonl')}': File too large; the "
                    "trace ends at its last whole step, the run goes on unrecorded")
            check(out.stderr.count(line) == 1 and "Traceback" not in out.stderr, f"disk full: {out.stderr!r}")
            strict_stats(full)
            with open(os.path.join(full, "rank-0.jsonl"), "rb") as f:
                written = f.read()
            steps = {json.loads(l).get("step") for l in written.splitlines()} - {None}
            check(0 < len(written) <= limit and written.endswith(b"\n") and 0 < len(steps) < 16,
                  f"disk full: rank 0's trace has {len(written)} bytes, steps {sorted(steps)}")
        elif CASE in ("straggler_mlp", "straggler_conv"):
            # A delay in rank 1's backward (mid-backward, where per-rank step times cannot show it:
            # the all-reduce makes every rank's backward as long): `trace stats` names rank 1; the
            # same job without the delay names nobody.
            # 32 steps: by chance alone one rank of a clean job is last in 3 of 4 of them with a
            # probability near 0.3 % (a binomial tail), on a machine however busy.
            model = ["--model", "conv"] if CASE == "straggler_conv" else []
            clean_dir = os.path.join(tmp, "clean")
            launch(2, model + ["--straggler", "1:25", "--epochs", "1"], zero_change_dir=trace_dir)
            launch(2, model + ["--epochs", "4"], zero_change_dir=clean_dir)
            named = strict_stats(trace_dir)
            check(re.search(r"straggler: rank 1 is the straggler in \d+ of \d+ steps", named) is not None,
                  f"a 25 ms delay in rank 1's backward is not named:\n{named}")
            clean = strict_stats(clean_dir)
            # A job without a delay can still have a real straggler: on a machine busier than it has
            # cores, the scheduler may starve one rank for a whole run (seen under a loaded ctest -j2:
            # one rank 24 ms late in 32 of 32 steps, and the diagnosis rightly named it). Such a
            # starvation comes and goes; a diagnosis that names an even job's rank comes every time.
            # So the clean job gets up to three runs, and one of them must name nobody.
            for attempt in range(2):
                if re.search(r"rank \d+ is the straggler", clean) is None:
                    break
                print(f"NOTE: clean run {attempt + 1} names a straggler (a starved rank?); running it again:\n"
                      + "\n".join(line for line in clean.splitlines() if "straggler:" in line))
                shutil.rmtree(clean_dir)
                launch(2, model + ["--epochs", "4"], zero_change_dir=clean_dir)
                clean = strict_stats(clean_dir)
            check(re.search(r"rank \d+ is the straggler", clean) is None and "straggler:" in clean,
                  f"three runs without a delay each name a straggler; the last:\n{clean}")
        elif CASE == "cuda_nccl":
            # On GPUs: NCCL, one GPU per rank (at most 2), times from CUDA events.
            gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
            if gpus == 0:
                print("SKIP: no CUDA GPU on this machine")
                sys.exit(77)
            world = min(gpus, 2)
            launch(world, ["--device", "cuda", "--dump", dump], zero_change_dir=trace_dir)
            check_run(trace_dir, dump, world)
            header, events = read_rank(trace_dir, 0)
            check(header["run"]["backend"] == "nccl" and header["devices"][0]["kind"] == "cuda",
                  f"header run/devices: {header['run']} {header['devices']}")
            memory = [e for e in events if e["type"] == "counter" and e["name"] == "memory"]
            check(memory and all(m["values"]["capacity"] > 0 for m in memory), "GPU memory counters carry the capacity")
            keep = os.environ.get("DPSCOPE_KEEP_TRACE")
            if keep:
                shutil.copytree(trace_dir, keep, dirs_exist_ok=True)
        elif CASE == "live_follow":
            # dpscope-viz --follow draws a run while it is still running: both ranks' cards, a
            # screenshot taken before the launcher has exited.
            viz = os.path.join(os.path.dirname(DPSCOPE), "dpscope-viz")
            if shutil.which("xvfb-run") is None or not os.path.exists(viz):
                print("SKIP: no xvfb-run or dpscope-viz to draw with")
                sys.exit(77)
            env = dict(os.environ, PYTHONPATH=os.path.join(SRC, "python"), OMP_NUM_THREADS="1")
            job = subprocess.Popen([*launch_cmd(2), sys.executable, "-m", "dpscope_torch.run",
                                    "--trace-dir", trace_dir, TUTORIAL, "--epochs", "200", "--straggler", "1:5"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
            try:
                # Until both ranks have written a few steps.
                for _ in range(600):
                    ready = all(os.path.exists(os.path.join(trace_dir, f"rank-{r}.jsonl")) for r in range(2))
                    if ready and min(os.path.getsize(os.path.join(trace_dir, f"rank-{r}.jsonl")) for r in range(2)) > 50000:
                        break
                    if job.poll() is not None:
                        break
                    time.sleep(0.1)
                png, boxes = os.path.join(tmp, "live.png"), os.path.join(tmp, "boxes.jsonl")
                out = subprocess.run(["xvfb-run", "-a", viz, "--follow", trace_dir, "--screenshot", png,
                                      "--stage-boxes", boxes, "--size", "1280x720"],
                                     capture_output=True, text=True, timeout=TIMEOUT_S)
                check(out.returncode == 0, f"dpscope-viz --follow: exit {out.returncode}: {out.stderr}")
                check(job.poll() is None, "the run ended before the screenshot: it was not taken live")
                with open(png, "rb") as f:
                    check(f.read(8) == b"\x89PNG\r\n\x1a\n", "the screenshot is not a PNG")
                with open(boxes, encoding="utf-8") as f:
                    drawn = sorted(json.loads(line)["device"] for line in f)
                check(drawn == ["cpu:0", "cpu:1"], f"the live stage drew {drawn}, not both ranks")
            finally:
                job.terminate()
                job.wait(timeout=60)
        elif CASE == "api_teardown":
            # watch() in the script itself, the model and its gloo group destroyed as the script ends:
            # PyTorch 1.13's ~ProcessGroupGloo joins gloo's threads with the GIL held, and a rank hung
            # there whenever one of them still needed the GIL: for a Python callback of the
            # communication hook or dropped a tensor Python had seen (docs/pytorch.md, "Limits").
            # `runs` runs (DPSCOPE_TEARDOWN_RUNS, default 4), each must end within hang_s.
            runs, hang_s = int(os.environ.get("DPSCOPE_TEARDOWN_RUNS", "4")), 90
            env = dict(os.environ, PYTHONPATH=os.path.join(SRC, "python"), OMP_NUM_THREADS="1")
            hung = 0
            for run in range(runs):
                shutil.rmtree(trace_dir, ignore_errors=True)
                cmd = [*launch_cmd(2), sys.executable, TUTORIAL, "--epochs", "1", "--trace-dir", trace_dir]
                job = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                       start_new_session=True)
                try:
                    _, err = job.communicate(timeout=hang_s)
                except subprocess.TimeoutExpired:
                    end_session(job)
                    hung += 1
                    fail(f"run {run + 1} of {runs} hung: still running after {hang_s} s: {' '.join(cmd)}")
                    continue
                if check(job.returncode == 0, f"run {run + 1}: exit {job.returncode}: {err}"):
                    strict_stats(trace_dir)
            print(f"api_teardown: {hung} of {runs} runs hung")
        elif CASE == "train_after_close":
            # PyTorch 1.13 cannot remove a communication hook: after close() the model keeps ours, which
            # must still average the gradients (no waiter thread any more) and record nothing. Three
            # steps watched, three after: the weights equal an unwatched run's, bit for bit.
            script = os.path.join(SRC, "tests", "python", "after_close.py")
            env = dict(os.environ, PYTHONPATH=os.path.join(SRC, "python"), OMP_NUM_THREADS="1")
            cmd = [*launch_cmd(2), sys.executable, script, trace_dir]
            out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=TIMEOUT_S)
            check(out.returncode == 0, f"exit {out.returncode}: {out.stderr}")
            for rank in range(2):
                check(f"rank {rank}: same weights as unwatched: True" in out.stdout, f"rank {rank}: {out.stdout!r}")
                check(out.stdout.count(f"rank {rank}: saved whole: True") == 2, f"rank {rank}: {out.stdout!r}")
            _, events = read_rank(trace_dir, 0)
            steps = {e["step"] for e in events if "step" in e}
            check(max(steps) == 2, f"steps recorded {sorted(steps)}: only the three watched ones")
            for rank in range(2):
                path = os.path.join(trace_dir, f"rank-{rank}.jsonl")
                for text in (f"this model is already watched (into '{path}'): close() that watcher first",
                             f"trace '{path}' is being written by another watcher of this process: give each "
                             "watched model a trace of its own"):
                    check(f"rank {rank}: RuntimeError: dpscope_torch.watch: {text}" in out.stdout,
                          f"rank {rank}: not refused: {text}: {out.stdout!r}")
            check(not os.path.exists(trace_dir + "-other"), "a refused watch() made its trace directory")
            # Watched again after close(): two steps, each with its gradients and all-reduces.
            again = trace_dir + "-again"
            strict_stats(again)
            _, events = read_rank(again, 0)
            launched = sorted(e["step"] for e in events if e.get("name") == "bucket_launched")
            ready = sorted(e["step"] for e in events if e.get("name") == "grad_ready")
            check(launched == [0, 1] and ready == [0] * 4 + [1] * 4, f"watched again: all-reduces in steps {launched}, "
                  f"gradient-ready in {ready}")
        elif CASE == "two_models":
            script = os.path.join(SRC, "tests", "python", "two_models.py")
            env = dict(os.environ, PYTHONPATH=os.path.join(SRC, "python"), OMP_NUM_THREADS="1")
            runs = {}
            for label, args in (("plain", []), ("watched", [trace_dir])):
                out = subprocess.run([*launch_cmd(2), sys.executable, script, *args], capture_output=True, text=True,
                                     env=env, timeout=TIMEOUT_S)
                check(out.returncode == 0, f"{label}: exit {out.returncode}: {out.stderr}")
                runs[label] = sorted(line for line in out.stdout.splitlines() if "weights" in line)
                for rank in range(2):
                    check(f"rank {rank}: backward restored: True" in out.stdout, f"{label}: {out.stdout!r}")
            check(runs["plain"] == runs["watched"] and len(runs["plain"]) == 2,
                  f"the watched run's weights differ: {runs}")
            # g: one step an iteration, ended by opt_g.step(); the discriminator's backward on g's
            # detached output is not g's. d: two an iteration, as DDP reduces d's gradients twice (its
            # own loss, then the generator's through it, after which no opt_d.step() comes).
            for model, steps in (("g", [0, 1, 2]), ("d", list(range(10)))):
                strict_stats(os.path.join(trace_dir, model))
                for rank in range(2):
                    _, events = read_rank(os.path.join(trace_dir, model), rank)
                    launched = sorted({e["step"] for e in events if e.get("name") == "bucket_launched"})
                    ready = [e for e in events if e.get("name") == "grad_ready"]
                    per_step = 4  # parameters of each model
                    check(launched == steps and len(ready) == per_step * len(steps),
                          f"{model} rank {rank}: all-reduces in steps {launched}, expected {steps}; "
                          f"{len(ready)} gradient-ready")
                    phases = [e["name"] for e in events if e.get("cat") == "phase" and e.get("step") == 0]
                    if model == "g":
                        check(phases.count("backward") == 1, f"g rank {rank}: step 0's phases {phases}")
        elif CASE == "usage_errors":
            env = dict(os.environ, PYTHONPATH=os.path.join(SRC, "python"))
            run = [sys.executable, "-m", "dpscope_torch.run"]
            for args, code, text in [
                ([TUTORIAL], 2, "dpscope: error: dpscope_torch.run: the following arguments are required: --trace-dir"),
                (["--trace-dir", trace_dir, os.path.join(tmp, "missing.py")], 2,
                 f"dpscope: error: dpscope_torch.run: script '{os.path.join(tmp, 'missing.py')}' is not a file"),
                (["--trace-dir", trace_dir, "--values-every", "-1", TUTORIAL], 2,
                 "dpscope: error: dpscope_torch.run: --values-every must be between 0 and 2147483647, got -1"),
                (["--trace-dir", trace_dir, "--values-every", "99999999999999999999", TUTORIAL], 2,
                 "dpscope: error: dpscope_torch.run: --values-every must be between 0 and 2147483647, got 99999999999999999999"),
                (["--trace-dir", trace_dir, tmp], 2, f"dpscope: error: dpscope_torch.run: script '{tmp}' is not a file"),
            ]:
                out = subprocess.run(run + args, capture_output=True, text=True, env=env, timeout=TIMEOUT_S)
                lines = out.stderr.strip().splitlines()
                check(out.returncode == code and len(lines) == 1 and lines[0].startswith(text),
                      f"{args}: exit {out.returncode}, stderr {out.stderr!r}")
            # A path holding a newline and an escape sequence: one line, the control characters written out.
            odd = os.path.join(tmp, "odd\n\x1b[31mdir")
            with open(odd, "w", encoding="utf-8") as f:
                f.write("a file\n")
            out = subprocess.run(run + ["--trace-dir", odd, TUTORIAL], capture_output=True, text=True, env=env,
                                 timeout=TIMEOUT_S)
            check(out.returncode == 2 and out.stderr == f"dpscope: error: trace directory '{tmp}/odd\\n\\x1b[31mdir' is not "
                  "a directory\n", f"odd path: exit {out.returncode}, stderr {out.stderr!r}")
            # A script that ends with sys.exit("text"): the text on stderr and status 1, as the interpreter does.
            script = os.path.join(tmp, "exit_text.py")
            with open(script, "w", encoding="utf-8") as f:
                f.write("import sys\nsys.exit('stopped: no data')\n")
            out = subprocess.run(run + ["--trace-dir", os.path.join(tmp, "exit_text"), script], capture_output=True,
                                 text=True, env=env, timeout=TIMEOUT_S)
            check(out.returncode == 1 and out.stderr == "stopped: no data\n", f"sys.exit(text): exit {out.returncode}, "
                  f"stderr {out.stderr!r}")
            # A trace directory that is a file: refused before the script starts, one line, exit 2.
            with open(trace_dir, "w", encoding="utf-8") as f:
                f.write("not a directory\n")
            out = launch(1, [], zero_change_dir=trace_dir, expect_rc=2)
            check(f"dpscope: error: trace directory '{trace_dir}' is not a directory" in out.stderr, f"{out.stderr!r}")
            with open(trace_dir, encoding="utf-8") as f:
                check(f.read() == "not a directory\n", "the file given as trace directory was changed")
            # The same for a script that starts its own ranks: one line from the parent, no rank started.
            out = subprocess.run(run + ["--trace-dir", trace_dir, VARIANTS, "--start", "spawn", "--port",
                                        str(free_port())], capture_output=True, text=True, env=env, timeout=TIMEOUT_S)
            check(out.returncode == 2 and out.stderr.strip().splitlines() ==
                  [f"dpscope: error: trace directory '{trace_dir}' is not a directory"],
                  f"spawn: exit {out.returncode}, stderr {out.stderr!r}")
            # What the directory may hold: never written over, each refused in one line (before the script
            # starts, exit 2, where no rank of any world size could write there).
            os.remove(trace_dir)
            for setup, text, rc in [
                (lambda d: os.mkdir(os.path.join(d, "rank-0.jsonl")), "rank-0.jsonl' exists and is not a regular file", 2),
                (lambda d: os.mkfifo(os.path.join(d, "rank-0.jsonl")), "rank-0.jsonl' exists and is not a regular file", 2),
                (lambda d: open(os.path.join(d, "rank-0.jsonl.zst"), "w").close(),
                 "rank-0.jsonl.zst' is another run's trace of rank 0", 2),
                (lambda d: open(os.path.join(d, "rank-3.jsonl"), "w").close(),
                 "rank-3.jsonl' is a rank of another run (this one has 1 rank)", 1),
            ]:
                shutil.rmtree(trace_dir, ignore_errors=True)
                os.mkdir(trace_dir)
                setup(trace_dir)
                before = sorted(os.listdir(trace_dir))
                out = launch(1, [], zero_change_dir=trace_dir, expect_rc=rc)
                check(text in out.stderr and "dpscope: error:" in out.stderr, f"{text}: {out.stderr!r}")
                check(sorted(os.listdir(trace_dir)) == before, f"{text}: the directory changed: {os.listdir(trace_dir)}")
            # A FIFO as the trace directory: refused, not opened (which would wait for a reader).
            shutil.rmtree(trace_dir)
            os.mkfifo(trace_dir)
            out = launch(1, [], zero_change_dir=trace_dir, expect_rc=2)
            check(f"dpscope: error: trace directory '{trace_dir}' is not a directory" in out.stderr, f"FIFO: {out.stderr!r}")
            os.remove(trace_dir)
            # Two ranks refused by what only the world size tells (a rank file beyond it): every rank
            # refuses it, before any collective, long before any timeout.
            os.mkdir(trace_dir)
            open(os.path.join(trace_dir, "rank-3.jsonl"), "w").close()
            started = time.monotonic()
            out = launch(2, ["--epochs", "1"], zero_change_dir=trace_dir, expect_rc=1)
            check(time.monotonic() - started < 60 and "rank-3.jsonl' is a rank of another run (this one has 2 ranks)"
                  in out.stderr,
                  f"two ranks, rank 0 refused: {time.monotonic() - started:.0f} s, {out.stderr[-600:]!r}")
            # The same in a script that starts its own ranks (torch.multiprocessing.spawn, as the tutorial):
            # one line, the spawned ranks' exit status, not the traceback of the parent's spawn().
            # The refusal's marker file is left nowhere (a temporary folder per run was, when a run was killed).
            scratch = os.path.join(tmp, "tmpdir")
            for start in ("spawn", "process"):
                os.makedirs(scratch, exist_ok=True)
                out = subprocess.run(run + ["--trace-dir", trace_dir, VARIANTS, "--start", start, "--port",
                                            str(free_port())], capture_output=True, text=True,
                                     env=dict(env, TMPDIR=scratch), timeout=TIMEOUT_S)
                check(not os.listdir(scratch), f"{start}: left in TMPDIR: {os.listdir(scratch)}")
                check(out.returncode == 1 and out.stderr.strip().splitlines() ==
                      [f"dpscope: error: '{os.path.join(trace_dir, 'rank-3.jsonl')}' is a rank of another run (this "
                       "one has 2 ranks): remove it or choose another directory"],
                      f"{start}, refused after the start: exit {out.returncode}, stderr {out.stderr!r}")
                check(sorted(os.listdir(trace_dir)) == ["rank-3.jsonl"], f"{start}: {os.listdir(trace_dir)}")
            # An earlier run's rank files: replaced, and said; none of them is left to be read with this run's.
            shutil.rmtree(trace_dir)
            os.mkdir(trace_dir)
            for rank in range(2):
                with open(os.path.join(trace_dir, f"rank-{rank}.jsonl"), "w", encoding="utf-8") as f:
                    f.write('{"type":"header","earlier":true}\n')
            out = launch(2, ["--epochs", "1"], zero_change_dir=trace_dir)
            check(out.stderr.count(f"dpscope_torch: '{trace_dir}' held an earlier run's trace (rank-0.jsonl, "
                                   "rank-1.jsonl): replaced by this run's") == 1, f"earlier run: {out.stderr!r}")
            for rank in range(2):
                header, _ = read_rank(trace_dir, rank)
                check("earlier" not in header and header["run"]["process"]["rank"] == rank,
                      f"earlier run: rank {rank}'s file is not this run's: {header}")
            strict_stats(trace_dir)
            # An earlier run's file that rank 1 would refuse (compressed): rank 0 refuses it too, before it
            # removes anything.
            with open(os.path.join(trace_dir, "rank-1.jsonl.zst"), "w", encoding="utf-8") as f:
                f.write("zst")
            before = sorted(os.listdir(trace_dir))
            out = launch(2, ["--epochs", "1"], zero_change_dir=trace_dir, expect_rc=2)
            check("rank-1.jsonl.zst' is another run's trace of rank 1" in out.stderr and
                  sorted(os.listdir(trace_dir)) == before, f"compressed rank 1: {out.stderr[-600:]!r} {os.listdir(trace_dir)}")
            # watch() on rank 0 only: the clock measurement needs every rank, so rank 0 waits for rank 1
            # through the store, bounded by the process group's timeout (8 s here), then names it.
            script = os.path.join(tmp, "rank0_only.py")
            with open(script, "w", encoding="utf-8") as f:
                f.write(RANK0_ONLY_SCRIPT)
            started = time.monotonic()
            out = subprocess.run([*launch_cmd(2), sys.executable, script, os.path.join(tmp, "rank0")], capture_output=True,
                                 text=True, env=env, timeout=TIMEOUT_S)
            check(out.returncode == 1 and time.monotonic() - started < 60 and
                  "RuntimeError: dpscope_torch.watch: rank 0: rank(s) 1 did not call watch() within 8 s: every rank must "
                  "call it (each writes its own rank-K.jsonl)" in out.stderr,
                  f"rank 0 only: exit {out.returncode} after {time.monotonic() - started:.0f} s: {out.stderr[-1500:]!r}")
            # watch() itself: a model that is not DDP, a values_every that is not a count.
            script = os.path.join(tmp, "watch_errors.py")
            with open(script, "w", encoding="utf-8") as f:
                f.write(WATCH_ERRORS_SCRIPT)
            out = subprocess.run([sys.executable, script, os.path.join(tmp, "api")], capture_output=True, text=True,
                                 env=dict(env, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port())), timeout=TIMEOUT_S)
            check(out.returncode == 0 and out.stdout.splitlines() == [
                "TypeError: dpscope_torch.watch: expected a DistributedDataParallel model, got Linear",
                "ValueError: dpscope_torch.watch: values_every must be an integer, got 2.5",
                "ValueError: dpscope_torch.watch: values_every must be between 0 and 2147483647, got 4294967296",
            ], f"watch() errors: exit {out.returncode}: {out.stdout!r} {out.stderr!r}")
        elif CASE in ("spawn_and_process", "ddp_options", "accumulate_and_join"):
            variants_case(tmp)
        elif CASE in ("loop_habits", "dynamic_graph", "long_run"):
            loop_habits_case(tmp)
        elif CASE == "loop_shapes":
            loop_shapes_case(tmp)
        else:
            fail(f"unknown case {CASE}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        sys.exit(1)
    print(f"PASS ({CASE})")


if __name__ == "__main__":
    main()
