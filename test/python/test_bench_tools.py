"""The bench's tools still build and run: a small run of each, for its results, not its times."""
import importlib
import json
import os
import subprocess
import sys
import tempfile

import gptc
import pytest
from conftest import REPO
from pytest import approx


def test_matmul_shapes_checks_every_product_against_torch():
    """bench/matmul_shapes.py builds gptc's matmul with the kernels' flags and checks each of
    a layer's 12 products against torch's before it times them. (With the kernels' flags its
    entry points need GPTC_EXPORT: a build without it had no symbols to call.) Odd sizes,
    so that the tiles and panels have remainders."""
    run = subprocess.run([sys.executable, os.path.join(REPO, "bench", "matmul_shapes.py"),
                          "--tokens", "37", "--embd", "20", "--rounds", "1", "--threads", "2"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    rows = [line for line in run.stdout.splitlines() if line.startswith("| ")]
    assert len(rows) == 1 + 12 + 1  # the header, 12 products, the total
    assert rows[-1].startswith("| all |")


def test_bench_run_times_the_same_computation_in_every_framework(tmp_path):
    """bench/run.py, a short run at tiny size: every framework runs, gptc within its kernel
    budget, and each framework's first and last losses agree with eager's (the bench's own
    check; eager once ran a step ahead, when it counted its ops before the warm-up), at the
    batch asked for (4 sequences instead of the tiny size's 8)."""
    out = tmp_path / "results.json"
    run = subprocess.run([sys.executable, os.path.join(REPO, "bench", "run.py"), "--sizes", "tiny",
                          "--rounds", "1", "--steps", "3", "--warmup", "2", "--batch", "4",
                          "--out", str(out)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    results = json.loads(out.read_text())
    assert results["losses_agree"] is True
    steps = {r["framework"]: r for r in results["steps"]}
    assert sorted(steps) == ["compile", "eager", "gptc"]
    assert all("error" not in r for r in steps.values()), steps
    assert all(r["batch"] == 4 for r in steps.values()), steps
    assert steps["gptc"]["tokens_per_s"] == approx(4 * 64 / (steps["gptc"]["ms_median"] / 1e3))
    assert steps["gptc"]["kernels_per_step"] <= 25 * 2 + 15
    # torch.compile's kernels round as the host's vector width has them: equal to gptc's first
    # loss on the kind's Zen 3s and Zen 4s, one ulp apart on a Zen 2 (4.1904664 vs 4.1904659).
    assert steps["gptc"]["first_loss"] == approx(steps["compile"]["first_loss"], rel=1e-6)
    assert results["matmul"]["gflops"] > 0 and results["sgemm_openblas"]["gflops"] > 0
    # Which machine: the kind's Zen 3s and Zen 4s differ in the kernels' vector forms.
    flags = open("/proc/cpuinfo").read()
    width = "AVX-512" if " avx512f" in flags else "AVX2" if " avx2" in flags else "no AVX2"
    assert results["machine"].startswith(f"{os.cpu_count()} cores, ")
    assert results["machine"].endswith(f"), {width}")
    # Before each round, the round trip between the two CPUs (none on one CPU), in the row.
    trips = [t for r in steps.values() for t in r["core_round_trip_ns"]]
    assert len(trips) == 3
    two_cpus = len(os.sched_getaffinity(0)) >= 2
    if two_cpus:
        assert all(10 < t < 100_000 for t in trips), trips
    else:
        assert trips == [None] * 3
    # The run ends with its row of bench/targets.py's table: the tiny ratio of these medians,
    # bold when it misses 2x.
    gptc, eager = steps["gptc"]["ms_median"], steps["eager"]["ms_median"]
    row = [line for line in run.stdout.splitlines() if line.startswith("| results |")]
    assert len(row) == 1, run.stdout[-3000:]
    if two_cpus:
        assert row[0].split(" | ")[3].startswith(f"{min(trips):.0f}"), row[0]
    tiny = row[0].split(" | ")[5]
    assert tiny.strip("*").endswith(f"× ({gptc:.1f} vs {eager:.1f} ms)"), tiny
    assert float(tiny.strip("*").split("×")[0]) == approx(eager / gptc, abs=0.006)
    assert tiny.startswith("**") == (eager / gptc < 2), tiny


def test_bench_loss_check_flags_a_framework_that_computes_something_else():
    sys.path.insert(0, os.path.join(REPO, "bench"))
    from run import check_losses

    def result(fw, first, last):
        return dict(framework=fw, size="tiny", first_loss=[first], last_loss=[last])

    agree = {"steps": [result("eager", 4.0, 2.9), result("gptc", 4.00001, 2.95)]}
    assert not any("DIFFER" in line for line in check_losses(agree, dropout=0.0))
    assert agree["losses_agree"] is True
    for first, last in ((4.001, 2.9), (4.0, 3.1)):
        wrong = {"steps": [result("eager", 4.0, 2.9), result("gptc", first, last)]}
        assert any(line.startswith("LOSSES DIFFER: tiny gptc")
                   for line in check_losses(wrong, dropout=0.0))
        assert wrong["losses_agree"] is False
    # With dropout the masks differ between frameworks from the first step on.
    dropped = {"steps": [result("eager", 4.0, 2.9), result("gptc", 4.1, 3.1)]}
    check_losses(dropped, dropout=0.1)
    assert dropped["losses_agree"] is True


def test_bench_refuses_bad_arguments_before_running_anything(tmp_path):
    """A count below its least, or an unknown size or framework: one line naming it, exit 2,
    and no results file (before this, --steps 0 and --warmup 0 silently ran the defaults)."""
    out = tmp_path / "results.json"
    for args, said in ((["--steps", "0"], "--steps must be at least 1, got 0"),
                       (["--warmup", "-1"], "--warmup must be at least 0, got -1"),
                       (["--batch", "0"], "--batch must be at least 1, got 0"),
                       (["--rounds", "0"], "--rounds must be at least 1, got 0"),
                       (["--threads", "0"], "--threads must be at least 1, got 0"),
                       (["--sizes", "tiny,huge"], "--sizes: unknown huge"),
                       (["--frameworks", "gptc,jax"], "--frameworks: unknown jax")):
        run = subprocess.run([sys.executable, os.path.join(REPO, "bench", "run.py"), *args,
                              "--out", str(out)], capture_output=True, text=True)
        assert run.returncode == 2, (args, run.stdout, run.stderr)
        assert said in run.stderr.strip().splitlines()[-1], (args, run.stderr)
        assert not out.exists()


def test_bench_targets_judges_each_target_at_its_threshold():
    """bench/targets.py, the per-run verdicts of README's targets table: each one flips at its
    threshold, a ratio just under one is not rounded up to it, and only default runs (no
    dropout, the size's own batch, SDPA, the GPT) count toward the Shakespeare-size tally."""
    sys.path.insert(0, os.path.join(REPO, "bench"))
    from targets import cpu, judge, round_trips, tally

    def results(shakespeare_eager=520.0, tiny_eager=8.0, fraction=0.9, gptc_mib=900.0,
                kernels=126, batch=4, dropout=0.0):
        def step(size, fw, ms, mib=1000.0, **extra):
            return dict(size=size, framework=fw, ms_median=ms, ms_min=ms, step_peak_rss_mib=mib,
                        peak_rss_mib=mib, batch=batch if size == "shakespeare" else 8, **extra)
        return {"date": "2026-12-03", "machine": "2 cores, AMD EPYC (family 25, model 17), AVX-512",
                "dropout": dropout, "matmul": dict(gflops=100.0, fma_peak_gflops=100 / fraction,
                                                   fraction_of_peak=fraction),
                "steps": [step("tiny", "gptc", 4.0, gptc_mib, kernels_per_step=54),
                          step("tiny", "eager", tiny_eager), step("tiny", "compile", 5.0),
                          step("shakespeare", "gptc", 400.0, gptc_mib, kernels_per_step=kernels),
                          step("shakespeare", "eager", shakespeare_eager),
                          step("shakespeare", "compile", 401.0)]}

    met = judge(results())
    assert met["judged"] and met["met"] and met["met_fastest"]
    assert met["cell"]["shakespeare"] == "1.30× (400.0 vs 520.0 ms)"
    assert met["cell"]["tiny"] == "2.00× (4.0 vs 8.0 ms)"
    assert not any("**" in c for c in met["cell"].values()), met["cell"]
    missed = judge(results(shakespeare_eager=519.8))  # 1.2995: not "1.30"
    assert missed["judged"] and not missed["met"] and not missed["met_fastest"]
    assert missed["cell"]["shakespeare"] == "**1.299× (400.0 vs 519.8 ms)**"
    assert judge(results(tiny_eager=7.9))["cell"]["tiny"].startswith("**1.98×")
    assert judge(results(fraction=0.849))["cell"]["micro"].startswith("**84.9 %")
    assert judge(results(gptc_mib=1000.0))["cell"]["memory"] == "**1000 vs 1000**, **1000 vs 1000**"
    assert judge(results(kernels=165))["cell"]["kernels"] == "54, 165"
    assert judge(results(kernels=166))["cell"]["kernels"] == "54, **166**"
    # The range of the CPUs' round trips over the run's rounds; none from older runs.
    placed = results()
    placed["steps"][0]["core_round_trip_ns"] = [457.4, 83.0]
    placed["steps"][3]["core_round_trip_ns"] = [None, 120.2]
    assert round_trips(placed) == "83–457 ns"
    assert round_trips(results()) == "—"
    for other in (results(batch=16), results(dropout=0.2), dict(results(), attention="manual"),
                  dict(results(), model="llama")):
        assert not judge(other)["judged"]
    assert judge(dict(results(), model="llama"))["cell"]["setting"] == "llama model"
    assert judge(dict(results(), attention="manual"))["cell"]["setting"] == "manual attention"
    assert judge(dict(results(), attention="sdpa"))["judged"]
    runs = [("a", results()), ("b", results(shakespeare_eager=519.8)),
            ("c", results(batch=16)), ("d", results(dropout=0.2))]
    assert tally(runs) == ["- Zen 4, AVX-512: Shakespeare size at 1.3× eager in 1 of 2 runs by median, "
                           "1 by the fastest steps"]
    # The tally is per CPU: this kind of machine has been a Zen 2, a Zen 3 and a Zen 4.
    for machine, said in (("2 cores, AMD EPYC (family 23, model 49), AVX2", "Zen 2, AVX2"),
                          ("2 cores, AMD EPYC 7B13 (family 25, model 1), AVX2", "Zen 3, AVX2"),
                          ("2 cores, Intel(R) Xeon(R) (family 6, model 143), AVX-512", "AVX-512"),
                          ("2 cores", "not recorded")):
        assert cpu({"machine": machine}) == said


BENCH = os.path.join(REPO, "bench")


def bench_main(tool, args, monkeypatch, capfd):
    """bench/TOOL.py's main run on `args` in this process (one torch import for all the
    cases, not one a process): the exit status and stderr lines the process would have
    (sys.exit("message") prints the message and exits 1)."""
    monkeypatch.syspath_prepend(BENCH)
    monkeypatch.setattr(sys, "argv", [os.path.join(BENCH, tool + ".py"), *args])
    with pytest.raises(SystemExit) as e:
        importlib.import_module(tool).main()
    code, err = e.value.code, capfd.readouterr().err.splitlines()
    return (1, err + [code]) if isinstance(code, str) else (code, err)


def test_bench_tools_refuse_bad_arguments_in_one_line(tmp_path, monkeypatch, capfd):
    """A count out of range, a --dropout torch refuses mid-run, a --threads past the
    runtime's limit, sizes past the machine's memory, an --out that cannot be written: one
    line naming it, exit 2, before anything is built or run. Before, these were tracebacks
    (--threads 0, --embd -1), a segfault (matmul_shapes --threads 100000), a division by
    zero after the whole profile (kernel_profile --steps 0), nonsense run to the end
    (--tokens 0: "product differs ... (relative error nan)", --top 0, kernel_profile's
    --threads 0), or a run that failed only when it wrote its results (run.py --out)."""
    most = gptc.MAX_THREADS
    tiny = ["--framework", "gptc", "--size", "tiny"]
    for tool, args, said in (
            ("kernel_profile", ["--steps", "0"], "--steps must be at least 1, got 0"),
            ("kernel_profile", ["--top", "0"], "--top must be at least 1, got 0"),
            ("kernel_profile", ["--threads", "0"], "--threads must be at least 1, got 0"),
            ("kernel_profile", ["--threads", str(most + 1)],
             f"--threads must be at most {most}, got {most + 1}"),
            ("kernel_profile", ["--steps", "x"], "argument --steps: invalid int value: 'x'"),
            ("matmul_shapes", ["--threads", "100000"],
             f"--threads must be at most {most}, got 100000"),
            ("matmul_shapes", ["--rounds", "0"], "--rounds must be at least 1, got 0"),
            ("matmul_shapes", ["--tokens", "0"], "--tokens must be at least 1, got 0"),
            ("matmul_shapes", ["--embd", "-1"], "--embd must be at least 1, got -1"),
            ("matmul_shapes", ["--tokens", str(10**12)],
             f"--tokens {10**12} --embd 384 needs at least "),
            ("train_step", [*tiny, "--dropout", "1"], "--dropout must be in [0, 1), got 1"),
            ("train_step", [*tiny, "--threads", str(most + 1)],
             f"--threads must be at most {most}, got {most + 1}"),
            ("train_step", [*tiny, "--batch", str(10**12)],
             f"--batch {10**12} at tiny size needs at least "),
            ("run", ["--dropout", "nan"], "--dropout must be in [0, 1), got nan"),
            ("run", ["--model", "llama", "--attention", "manual"],
             "--model llama: no dropout, and SDPA attention only"),
            ("train_step", [*tiny, "--model", "llama", "--dropout", "0.1"],
             "--model llama: no dropout, and SDPA attention only"),
            ("run", ["--threads", str(most + 1)], f"--threads must be at most {most}, got {most + 1}"),
            ("run", ["--batch", str(10**12), "--sizes", "shakespeare"],
             f"--batch {10**12} at shakespeare size needs at least "),
            ("run", ["--out", str(tmp_path)], f"--out: {tmp_path} is a directory"),
            ("run", ["--out", str(tmp_path / "no" / "r.json")],
             f"--out: no directory {tmp_path / 'no'} to write r.json in"),
            ("run", ["--sizes", "tiny,"], '--sizes: unknown "" (known: tiny, shakespeare)')):
        if tool == "kernel_profile":
            args = [str(tmp_path), *args]  # the counts are checked before the artifact
        code, err = bench_main(tool, args, monkeypatch, capfd)
        assert code == 2 and len(err) == 1, (tool, args, code, err)
        assert err[0].startswith(f"{tool}.py: error: {said}"), (tool, args, err)
        if "needs at least" in said:
            assert err[0].endswith(" GiB"), err
    assert os.listdir(tmp_path) == []  # run.py wrote nothing


def test_matmul_shapes_refuses_threads_past_the_runtime_limit_in_its_own_process():
    """The exit status and stderr of the process itself (it was a segfault: -11)."""
    run = subprocess.run([sys.executable, os.path.join(BENCH, "matmul_shapes.py"),
                          "--threads", "100000"], capture_output=True, text=True)
    assert run.returncode == 2, run.stderr
    assert run.stderr == (f"matmul_shapes.py: error: --threads must be at most "
                          f"{gptc.MAX_THREADS}, got 100000\n")
    assert run.stdout == ""


def test_kernel_profile_refuses_what_is_not_an_artifact(tmp_path, monkeypatch, capfd):
    """What is not a gptc artifact: one line naming the path and what is wrong, exit 1, and
    no copy of it left behind. Before, a missing or non-directory path was a traceback of
    shutil.copytree, a directory without a manifest (/tmp) was copied whole into itself
    until the disk filled, and the runtime's complaints named the temporary copy."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    os.mkdir(tmp_path / "tmp")
    art = tmp_path / "art"
    manifest, kernels = art / "manifest.json", art / "kernels.cpp"
    cxx = os.environ.get("GPTC_CXX", "c++")

    def case(files, said):
        for name, text in files.items():
            (art / name).write_text(text)
        code, err = bench_main("kernel_profile", [str(art)], monkeypatch, capfd)
        assert code == 1 and err, (files, err)
        assert err[-1].startswith("kernel_profile: " + said), (files, err)
        assert os.listdir(tmp_path / "tmp") == []  # the copy is removed

    case({}, f"{art}: no such directory (the artifact of a gptc compile is one)")
    art.write_text("")
    case({}, f"{art}: not a directory (the artifact of a gptc compile is one)")
    art.unlink()
    art.mkdir()
    case({}, f"cannot read {manifest}: No such file or directory")
    case({"manifest.json": "{"}, f"cannot read {manifest}: not JSON (Expecting property name")
    case({"manifest.json": '{"args": {}}'}, f"{manifest}: not an artifact's manifest (a JSON "
         'object whose "args" is a list of objects)')
    case({"manifest.json": '{"args": []}'}, f"cannot read {kernels}: No such file or directory")
    case({"kernels.cpp": "int x;\n"},
         f"{kernels}: no gptc_entry function (not the kernels of a gptc compile)")
    case({"kernels.cpp": "GPTC_EXPORT const char* gptc_entry(\n"},
         f"{cxx} failed on kernels.cpp (exit status 1; its messages are above)")
    # The runtime's own check of the manifest, of the copy: named as the artifact.
    case({"kernels.cpp": '#include "gptc/prelude.h"\n'
                         "GPTC_EXPORT const char* gptc_entry(void** a) { return nullptr; }\n"},
         f'{manifest}: "format" is not "gptc-artifact"')


def test_targets_names_the_file_and_what_is_wrong(tmp_path):
    """bench/targets.py on what is not a results file of bench/run.py: one line naming the
    file and what is wrong, exit 1 (before, a wrong shape was a KeyError or TypeError
    traceback from deep in judge, and a zero time a ZeroDivisionError)."""
    step = dict(size="tiny", framework="gptc", ms_median=4.0, ms_min=4.0, batch=8,
                peak_rss_mib=900.0)
    for content, said in (
            (None, "No such file or directory"),
            ("", "not JSON (Expecting value: line 1 column 1 (char 0))"),
            (b"\xff", "not JSON ('utf-8' codec can't decode byte 0xff in position 0: "
                      "invalid start byte)"),
            ([1, 2], "not a JSON object, so not a results file of bench/run.py"),
            ({}, 'no "steps"'),
            ({"steps": 3}, '"steps" is 3, not a list'),
            ({"steps": [3]}, "steps[0]: not an object"),
            ({"steps": [{"size": "tiny"}]}, 'steps[0]: no "framework"'),
            ({"steps": [dict(step, batch=None)]}, 'steps[0]: "batch" is null, not an integer'),
            ({"steps": [dict(step, ms_median=0)]},
             'steps[0]: "ms_median" is 0, not a positive number'),
            ({"steps": [dict(step, core_round_trip_ns=[80.0, "far"])]},
             'steps[0]: "core_round_trip_ns" is [80.0, "far"], not a list of positive numbers'),
            ({"steps": [], "machine": 7}, '"machine" is 7, not a string'),
            ({"steps": [], "matmul": {"gflops": 3}}, 'matmul: no "fraction_of_peak"')):
        path = tmp_path / "results.json"
        if path.exists():
            path.unlink()
        if isinstance(content, bytes):
            path.write_bytes(content)
        elif content is not None:
            path.write_text(content if isinstance(content, str) else json.dumps(content))
        run = subprocess.run([sys.executable, os.path.join(BENCH, "targets.py"), str(path)],
                             capture_output=True, text=True)
        assert run.returncode == 1, (content, run.stderr)
        assert run.stderr == f"targets: cannot read {path}: {said}\n", content
        assert run.stdout == ""
    run = subprocess.run([sys.executable, os.path.join(BENCH, "targets.py"), str(tmp_path)],
                         capture_output=True, text=True)
    assert (run.returncode, run.stderr) == (1, f"targets: cannot read {tmp_path}: Is a directory\n")
    # A results file that holds only what bench/run.py writes is read as before.
    (tmp_path / "ok.json").write_text(json.dumps({"steps": [step, {"error": "x"}]}))
    run = subprocess.run([sys.executable, os.path.join(BENCH, "targets.py"),
                          str(tmp_path / "ok.json")], capture_output=True, text=True)
    assert run.returncode == 0 and run.stderr == "", run.stderr
    assert "| ok | ? | not recorded | — | default |" in run.stdout
