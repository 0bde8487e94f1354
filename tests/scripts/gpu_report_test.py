#!/usr/bin/env python3
"""Tests of scripts/gpu_report.py, the report of a gpu-check run, on committed fixtures (no GPU).

fixtures/gpu_report/ holds what a run leaves: run.tsv (the stages and facts gpu-check.sh writes),
logs/ (stage logs, benchmark outputs) and out/ (the measured trace). logs/tests.junit.xml was
written by ctest 3.25 itself from the stand-in test list fixtures/gpu_report/ctest-list.cmake:
  cp ctest-list.cmake BUILD/CTestTestfile.cmake && cd BUILD && ctest --output-junit tests.junit.xml
and the case junit_fixture_is_what_ctest_writes checks that the ctest at hand still writes it so.
Usage: gpu_report_test.py SOURCE_DIR CASE   (prints PASS (CASE); tests/CMakeLists.txt runs each case)
"""
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile

src = sys.argv[1]
case_name = sys.argv[2]
script = os.path.join(src, "scripts", "gpu_report.py")
fixtures = os.path.join(src, "tests", "scripts", "fixtures", "gpu_report")
spec = importlib.util.spec_from_file_location("gpu_report", script)
gpu_report = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gpu_report)


def fail(message):
    print(f"FAIL ({case_name}): {message}")
    sys.exit(1)


def run(*args):
    done = subprocess.run([sys.executable, script, *args], capture_output=True, text=True)
    return done.returncode, done.stdout, done.stderr


def expect_lines(text, expected):
    lines = text.splitlines()
    for line in expected:
        if line not in lines:
            fail(f"no line {line!r} in:\n{text}")


def fixture_report():
    rc, out, err = run("report", "--run", os.path.join(fixtures, "run.tsv"), "--logs",
                       os.path.join(fixtures, "logs"), "--out", os.path.join(fixtures, "out"))
    if rc != 0 or err:
        fail(f"exit {rc}, stderr {err!r}")
    return out


# The tests section counts ctest's JUnit file: 8 tests, 1 failed, 2 skipped (a GoogleTest skip with
# its reason, a skip return code); the GPU suites' table leaves out TraceReader and gpu-check's own test.
def case_tests_section():
    report = fixture_report()
    expect_lines(report, [
        "**5 passed, 1 failed, 2 skipped** out of 8 (ctest, 16 jobs).",
        "| suite | passed | failed | skipped |",
        "| AllCollectives | 0 | 1 | 0 |",
        "| CudaDevice | 1 | 0 | 1 |",
        "| NcclBackend | 1 | 0 | 0 |",
        "| python | 0 | 0 | 1 |",
        "- Backends/AllCollectives.ExactOnEveryBackend/nccl (Failed)",
        "- CudaDevice.PeerCopyBetweenTwoGpus (needs 2 physical GPUs, found 1)",
        "- python_dpscope_torch_cuda_nccl (SKIP_RETURN_CODE=77)",
    ])
    for absent in ("| TraceReader", "| scripts"):
        if absent in report:
            fail(f"{absent!r} is not a GPU suite:\n{report}")


# AllCollectives: the sim case has no GPU word in its name, so only the nccl case counts.
def case_gpu_suite_counts_gpu_tests_only():
    cases = gpu_report.read_junit(os.path.join(fixtures, "logs", "tests.junit.xml"))
    gpu = [name for name, _, _ in cases if gpu_report.GPU_TEST.search(name)]
    if "Backends/AllCollectives.ExactOnEveryBackend/sim" in gpu or "scripts_gpu_check_help" in gpu:
        fail(f"not GPU tests, counted as such: {gpu}")
    if gpu_report.suite_of("Backends/AllCollectives.ExactOnEveryBackend/nccl") != "AllCollectives":
        fail("a parameterised test's suite is its GoogleTest suite")


# Stages, benchmark rows (as the benchmarks printed them, | escaped), calibration without the
# bench- lines, the trace's line count, and a failed stage's last 40 lines.
def case_report_sections():
    report = fixture_report()
    expect_lines(report, [
        "- started 2026-11-26 10:00:00 UTC, finished 2026-11-26 10:20:00 UTC on gpu-host",
        "| tests | FAILED | 300 | exit 8: 88% tests passed, 1 tests failed out of 8 |",
        "| nccl-processes | FAILED | 5 | exit 1: a \\| in the note |",
        "| bench-mlp | not run | - | not in --stages |",
        "| DP scatter, 4 logical GPUs (GB/s) | 812.5 | cudaMemcpy D2D 1000.0 GB/s | 0.81 | >= 0.70 |",
        "| ring all-reduce 256 MiB, 4 logical GPUs: out-of-place busbw (GB/s) | 242.81 | d2d copy 1000.000 | 0.24 | - |",
        "| same, 4 ranks x busbw: GPU copy rate used (GB/s) | 971.2 | d2d copy 1000.000 | 0.97 | - |",
        "gemm_efficiency = 0.71",
        "## nccl-processes failed: the last 40 lines of its log",
        "line 11",
        "line 50",
    ])
    calibration = report.split("## Calibration of the simulator")[1].split("##")[0]
    if "bench-row" in calibration:
        fail(f"the calibration block shows bench- lines: {calibration}")
    if "(3 lines; open it with dpscope-viz" not in report:
        fail(f"the trace's line count: {report}")
    if "\nline 10\n" in report:
        fail("more than the last 40 lines of the failed stage")


# The all-reduce rows from `dpscope bench` output: busbw at the largest size against the copy rate
# (the out-of-place busbw, 242.81 / 1000 = 0.24; 4 x 242.81 = 971.2, 0.97); #wrong other than 0 in
# either column group (here the in-place one), or no row, exits 1.
def case_allreduce_rows():
    logs = os.path.join(fixtures, "logs")
    rc, out, _ = run("allreduce-rows", os.path.join(logs, "bench-allreduce.out.txt"),
                     os.path.join(logs, "bench-copy.out.txt"))
    if rc != 0:
        fail(f"exit {rc}: {out}")
    expect_lines(out, [
        "bench-row\tring all-reduce 256 MiB, 4 logical GPUs: out-of-place busbw (GB/s)\t242.81\td2d copy 1000.000\t0.24\t-",
        "bench-row\tsame, 4 ranks x busbw: GPU copy rate used (GB/s)\t971.2\td2d copy 1000.000\t0.97\t-",
    ])
    with tempfile.TemporaryDirectory() as tmp:
        wrong = os.path.join(tmp, "wrong.txt")
        with open(os.path.join(logs, "bench-allreduce.out.txt")) as f:
            text = f.read()
        with open(wrong, "w") as f:
            f.write(text.replace("240.94       0", "240.94       3"))
        rc, out, _ = run("allreduce-rows", wrong)
        if rc != 1:
            fail(f"#wrong 3 exits {rc}")
        expect_lines(out, [
            "bench-row\tring all-reduce 256 MiB, 4 logical GPUs: out-of-place busbw (GB/s)\t242.81\tn/a (copy bench failed)\t-\t-",
            "gpu_report: #wrong is '3' at the largest size (in-place)",
        ])
        empty = os.path.join(tmp, "empty.txt")
        open(empty, "w").close()
        rc, out, _ = run("allreduce-rows", empty)
        if rc != 1 or out.strip() != f"gpu_report: {empty}: no result row in the bench output":
            fail(f"no row: exit {rc}, {out!r}")


# Past 40 skipped tests the list ends with a count; without a JUnit file the section says so.
def case_long_and_missing_test_lists():
    with tempfile.TemporaryDirectory() as tmp:
        cases = "".join(f'<testcase name="CudaDevice.Case{i}" status="notrun"><skipped message="SKIP_RETURN_CODE=77"/>'
                        "</testcase>" for i in range(45))
        with open(os.path.join(tmp, "tests.junit.xml"), "w") as f:
            f.write(f'<?xml version="1.0"?><testsuite tests="45">{cases}</testsuite>')
        lines = gpu_report.tests_section(tmp, "4", "passed")
        expect_lines("\n".join(lines), ["**0 passed, 0 failed, 45 skipped** out of 45 (ctest, 4 jobs).",
                                        "- CudaDevice.Case39 (SKIP_RETURN_CODE=77)", "- ... and 5 more"])
        if "- CudaDevice.Case40 (SKIP_RETURN_CODE=77)" in lines:
            fail("more than 40 skipped tests listed")
        os.remove(os.path.join(tmp, "tests.junit.xml"))
        expect_lines("\n".join(gpu_report.tests_section(tmp, "4", "FAILED")),
                     ["ctest wrote no JUnit file: see gpu-check.log (tests)."])
        expect_lines("\n".join(gpu_report.tests_section(tmp, "4", "not run")), ["Not run (not in --stages)."])


# Bad input: one line naming the file and why, exit 2.
def case_bad_input():
    with tempfile.TemporaryDirectory() as tmp:
        missing = os.path.join(tmp, "run.tsv")
        rc, out, err = run("report", "--run", missing, "--logs", tmp, "--out", tmp)
        if rc != 2 or out or err.strip() != f"gpu_report: {missing}: No such file or directory":
            fail(f"missing run.tsv: exit {rc}, {err!r}")
        with open(missing, "w") as f:
            f.write("meta\tstarted\tnow\nstages are here\n")
        rc, _, err = run("report", "--run", missing, "--logs", tmp, "--out", tmp)
        if rc != 2 or err.strip() != (f"gpu_report: {missing}:2: expected 'meta KEY VALUE' or "
                                      "'stage NAME RESULT SECONDS NOTE'"):
            fail(f"malformed run.tsv: exit {rc}, {err!r}")
        with open(missing, "w") as f:
            f.write("stage\ttests\tpassed\t1\t\n")
        with open(os.path.join(tmp, "tests.junit.xml"), "w") as f:
            f.write("<testsuite><testcase")
        rc, _, err = run("report", "--run", missing, "--logs", tmp, "--out", tmp)
        if rc != 2 or "tests.junit.xml: not a JUnit file" not in err or len(err.splitlines()) != 1:
            fail(f"malformed JUnit: exit {rc}, {err!r}")
        rc, _, err = run("frobnicate")
        if rc != 2 or "invalid choice: 'frobnicate'" not in err:
            fail(f"unknown command: exit {rc}, {err!r}")


# The committed JUnit file is what this machine's ctest writes for the stand-in test list: the same
# tests with the same outcomes and reasons (so the fixture cannot drift from ctest's format).
def case_junit_fixture_is_what_ctest_writes():
    ctest = shutil.which("ctest")
    if ctest is None:
        print("SKIP: no ctest")
        sys.exit(77)
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(os.path.join(fixtures, "ctest-list.cmake"), os.path.join(tmp, "CTestTestfile.cmake"))
        junit = os.path.join(tmp, "tests.junit.xml")
        subprocess.run([ctest, "--output-junit", junit], cwd=tmp, capture_output=True)
        fresh = gpu_report.read_junit(junit)
    committed = gpu_report.read_junit(os.path.join(fixtures, "logs", "tests.junit.xml"))
    if fresh != committed:
        fail(f"ctest now writes {fresh}, the fixture holds {committed}")
    if len(committed) != 8:
        fail(f"the fixture has {len(committed)} tests, expected 8")


case = globals().get(f"case_{case_name}")
if case is None:
    fail("no such case")
case()
print(f"PASS ({case_name})")
