"""The bench's tools still build and run: a small run of each, for its results, not its times."""
import importlib
import json
import re
import os
import shutil
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
    batch asked for (4 sequences instead of the tiny size's 8). Its record holds the
    machine, the commit and the settings; --out writes it there, not into the store."""
    out = tmp_path / "results.json"
    stored = sorted(os.listdir(os.path.join(BENCH, "results")))
    run = subprocess.run([sys.executable, os.path.join(REPO, "bench", "run.py"), "--sizes", "tiny",
                          "--rounds", "1", "--steps", "3", "--warmup", "2", "--batch", "4",
                          "--note", "a test", "--out", str(out)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert sorted(os.listdir(os.path.join(BENCH, "results"))) == stored
    record = json.loads(out.read_text())
    results = record["figures"]
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
    machine = record["machine"]
    assert machine["cores"] == os.cpu_count() and machine["width"] == width, machine
    assert machine["flags"]["avx512f"] == (" avx512f" in flags), machine
    if machine["vendor"] == "AMD":
        assert machine["kind"].startswith("Zen "), machine
    # The commit measured, and the settings asked for.
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True)
    assert record["commit"] == head.stdout.strip() and isinstance(record["dirty"], bool)
    assert record["settings"] == dict(threads=2, rounds=1, dropout=0.0, model="gpt",
                                      attention="sdpa", padded=False, batch={"tiny": 4},
                                      steps={"tiny": 3}, warmup={"tiny": 2},
                                      frameworks=["gptc", "eager", "compile"])
    assert record["note"] == "a test"
    assert record["finished"].startswith(record["date"])
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
    row = [line for line in run.stdout.splitlines() if line.startswith("| results (a test) |")]
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


def record(finished="2026-12-03T10:00:00Z", kind="Zen 4", width="AVX-512", settings=(),
           figures=None, **extra):
    """A run's record as bench/run.py writes it into the store, with the given fields."""
    return dict(finished=finished, commit="0123456789abcdef", dirty=False,
                machine=dict(cores=2, vendor="AMD", model_name="AMD EPYC", family=25, model=17,
                             flags={"avx512f": width == "AVX-512"}, kind=kind, width=width),
                settings=dict(dict(threads=2, rounds=1), **dict(settings)),
                figures=figures or {"steps": []}, **extra)


def test_bench_targets_judges_each_target_at_its_threshold():
    """bench/targets.py, the per-run verdicts of the report's targets tables: each one flips
    at its threshold, a ratio just under one is not rounded up to it, and only default runs
    (no dropout, the size's own batch, SDPA, the GPT) count toward the tally."""
    sys.path.insert(0, os.path.join(REPO, "bench"))
    from targets import cpu, judge, round_trips, tally

    def results(shakespeare_eager=520.0, tiny_eager=8.0, fraction=0.9, gptc_mib=900.0,
                kernels=126, batch=4, dropout=0.0, compile_ms=401.0, **settings):
        def step(size, fw, ms, mib=1000.0, **extra):
            return dict(size=size, framework=fw, ms_median=ms, ms_min=ms, step_peak_rss_mib=mib,
                        peak_rss_mib=mib, batch=batch if size == "shakespeare" else 8, **extra)
        return record(
            finished="2026-12-03T10:00:00Z", date="2026-12-03",
            settings=dict(dropout=dropout, **settings),
            figures={"matmul": dict(gflops=100.0, fma_peak_gflops=100 / fraction,
                                    fraction_of_peak=fraction),
                     "steps": [step("tiny", "gptc", 4.0, gptc_mib, kernels_per_step=54),
                               step("tiny", "eager", tiny_eager), step("tiny", "compile", 5.0),
                               step("shakespeare", "gptc", 400.0, gptc_mib,
                                    kernels_per_step=kernels),
                               step("shakespeare", "eager", shakespeare_eager),
                               step("shakespeare", "compile", compile_ms)]})

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
    placed["figures"]["steps"][0]["core_round_trip_ns"] = [457.4, 83.0]
    placed["figures"]["steps"][3]["core_round_trip_ns"] = [None, 120.2]
    assert round_trips(placed) == "83–457 ns"
    assert round_trips(results()) == "—"
    for other in (results(batch=16), results(dropout=0.2), results(attention="manual"),
                  results(model="llama")):
        assert not judge(other)["judged"] and not judge(other)["met_all"]
    assert judge(results(model="llama"))["cell"]["setting"] == "llama model"
    assert judge(results(attention="manual"))["cell"]["setting"] == "manual attention"
    assert judge(results(batch=16))["cell"]["setting"] == "shakespeare batch 16"
    assert judge(results(attention="sdpa", model="gpt"))["judged"]
    # Every target met, or one missed (the Shakespeare-size one met all the same).
    assert met["met_all"]
    for missed_one in (results(tiny_eager=7.9), results(fraction=0.849),
                       results(gptc_mib=1000.0), results(kernels=166),
                       results(compile_ms=400.0)):
        verdict = judge(missed_one)
        assert verdict["met"] and not verdict["met_all"], verdict["cell"]
    runs = [("a", results()), ("b", results(shakespeare_eager=519.8)),
            ("c", results(batch=16)), ("d", results(dropout=0.2)), ("e", results(kernels=166))]
    assert tally(runs) == ["- Zen 4, AVX-512: every target met in 1 of 3 runs; Shakespeare size "
                           "at 1.3× eager in 2 by median, 2 by the fastest steps"]
    # The tally is per CPU: this kind of machine has been a Zen 2, a Zen 3 and a Zen 4.
    for kind, width, said in (("Zen 2", "AVX2", "Zen 2, AVX2"), ("Zen 3", "AVX2", "Zen 3, AVX2"),
                              ("Intel AVX-512", "AVX-512", "Intel AVX-512"),
                              ("Zen 4", None, "Zen 4")):
        assert cpu({"machine": {"kind": kind, "width": width}}) == said


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
            ("run", ["--padded"], "--padded: a Hugging Face model only"),
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


def test_store_names_each_run_by_its_finish_time_and_cpu(tmp_path):
    """bench/store.py: a record's file is named by when the run finished and its kind of CPU,
    a second run of the same minute and kind beside it; the kind from the vendor, family and
    model; the records read back in the order the runs finished."""
    sys.path.insert(0, BENCH)
    import store
    assert store.kind("AMD", 23, 49, {"avx2": True}) == "Zen 2"
    assert store.kind("AMD", 25, 1, {"avx2": True}) == "Zen 3"
    assert store.kind("AMD", 25, 17, {"avx512f": True}) == "Zen 4"
    assert store.kind("Intel", 6, 143, {"avx2": True, "avx512f": True}) == "Intel AVX-512"
    assert store.kind(None, None, None, {}) == "unknown CPU no AVX2"
    assert store.slug("Intel AVX-512") == "intel-avx512"
    late, early = record("2026-12-04T03:12:59Z", kind="Zen 2"), record("2026-12-04T03:12:01Z",
                                                                        kind="Zen 2")
    for r in (late, early):
        store.write(r, store.path_for(r, str(tmp_path)))
    assert sorted(os.listdir(tmp_path)) == ["2026-12-04T0312Z-zen2-2.json",
                                            "2026-12-04T0312Z-zen2.json"]
    assert [r["finished"] for _, r in store.runs(str(tmp_path))] == [early["finished"],
                                                                      late["finished"]]
    # What run.py records of this machine.
    machine = store.machine_info()
    assert machine["cores"] == os.cpu_count()
    assert machine["width"] == store.width(machine["flags"])


def report(store_dir, page, readme):
    return subprocess.run([sys.executable, os.path.join(BENCH, "report.py"), "--store",
                           str(store_dir), "--page", str(page), "--readme", str(readme)],
                          capture_output=True, text=True)


def test_report_writes_the_page_and_only_the_readme_block(tmp_path):
    """bench/report.py over a store of four runs, on two kinds of CPU: per kind the latest
    run with the default settings and its step table, every run's row against the targets and
    the tally; README's block between the markers, the rest of README as it was. A README
    without the markers is left untouched, and said so on stderr."""
    def step(size, fw, ms, kernels=None):
        tokens = {"tiny": 8 * 64, "shakespeare": 4 * 256}[size]
        return dict(size=size, framework=fw, batch={"tiny": 8, "shakespeare": 4}[size],
                    ms_median=ms, ms_min=ms - 1, ms_max=ms + 1, tokens_per_s=tokens / ms * 1e3,
                    peak_rss_mib=900.0 if fw == "gptc" else 1000.0, step_peak_rss_mib=None,
                    kernels_per_step=kernels)

    def figures(tiny, shakespeare, fraction):
        # tiny and shakespeare: (gptc, eager, torch.compile) median ms
        return {"steps": [step("tiny", "gptc", tiny[0], 50), step("tiny", "eager", tiny[1]),
                          step("tiny", "compile", tiny[2]),
                          step("shakespeare", "gptc", shakespeare[0], 120),
                          step("shakespeare", "eager", shakespeare[1]),
                          step("shakespeare", "compile", shakespeare[2])],
                "matmul": dict(gflops=90.0, fma_peak_gflops=90.0 / fraction,
                               fraction_of_peak=fraction),
                "sgemm_openblas": dict(gflops=80.0), "losses_agree": True}

    store_dir = tmp_path / "results"
    store_dir.mkdir()
    runs = {  # name: record
        "2026-12-03T1000Z-zen4": record("2026-12-03T10:00:00Z", date="2026-12-03",
                                        figures=figures((4.0, 10.0, 8.0), (400.0, 600.0, 500.0),
                                                        0.9)),
        "2026-12-03T1100Z-zen4": record("2026-12-03T11:00:00Z", date="2026-12-03",
                                        figures=figures((5.0, 9.0, 6.0), (500.0, 600.0, 550.0),
                                                        0.8)),
        # Later, but with dropout: not the kind's latest default run.
        "2026-12-03T1200Z-zen4": record("2026-12-03T12:00:00Z", date="2026-12-03",
                                        settings=dict(dropout=0.2),
                                        figures=figures((2.0, 10.0, 9.0), (300.0, 600.0, 500.0),
                                                        0.9)),
        "2026-12-04T0312Z-zen2": record("2026-12-04T03:12:00Z", date="2026-12-04", kind="Zen 2",
                                        width="AVX2", note="busy host",
                                        figures=figures((3.0, 7.5, 6.0), (450.0, 585.0, 600.0),
                                                        0.86)),
    }
    for name, r in runs.items():
        (store_dir / f"{name}.json").write_text(json.dumps(r))
    page = tmp_path / "performance.md"
    readme = tmp_path / "README.md"
    before = ("# gptc\n\nIntro.\n\n<!-- results:begin -->\nold table\n<!-- results:end -->\n"
              "\nMore.\n")
    readme.write_text(before)
    run = report(store_dir, page, readme)
    assert run.returncode == 0 and run.stderr == "", run.stderr
    text = page.read_text()
    lines = text.splitlines()
    assert "python3 bench/report.py" in lines[2]
    # The Zen generations in order, each with its latest default run's table.
    assert [line for line in lines if line.startswith("## ")] == ["## Zen 2, AVX2",
                                                                  "## Zen 4, AVX-512"]
    zen4 = lines[lines.index("## Zen 4, AVX-512"):]
    assert "[2026-12-03T1100Z-zen4](../bench/results/2026-12-03T1100Z-zen4.json)" in zen4[2]
    assert "commit 0123456789ab" in zen4[2]
    tiny_tokens = f"{8 * 64 / 5.0 * 1e3:,.0f}"
    assert "| tiny | gptc | 5.0 (4.0–6.0) | 1.80× | " + tiny_tokens + " | 50 | — |" in zen4
    assert "| shakespeare | eager | 600.0 (599.0–601.0) | 1.00× | " \
        f"{4 * 256 / 600.0 * 1e3:,.0f} | — | — |" in zen4
    assert any(line.startswith("Matmul micro-kernel, ") and "80 % of the measured 112.5"
               in line for line in zen4)
    # Every run of the kind against the targets, bold where missed, and the tally: the
    # 10:00 run met every target (2.5x, 1.5x, faster than torch.compile, 90 %), the 11:00 one
    # missed tiny (1.8x), Shakespeare size (1.2x) and the micro-kernel (80 %).
    rows = [line for line in zen4 if line.startswith("| 2026-")]
    assert [row.split(" | ")[0] for row in rows] == [
        "| 2026-12-03T1000Z-zen4", "| 2026-12-03T1100Z-zen4", "| 2026-12-03T1200Z-zen4"]
    assert " | default | 2.50× (4.0 vs 10.0 ms) | 1.50× (400.0 vs 600.0 ms) | " in rows[0]
    assert "**" not in rows[0]
    assert " | **1.80× (5.0 vs 9.0 ms)** | **1.20× (500.0 vs 600.0 ms)** | " in rows[1]
    assert "| **80 % (90.0 of 112.5 GFLOP/s)** |" in rows[1]
    assert " | dropout 0.2 | " in rows[2]
    assert ("- Zen 4, AVX-512: every target met in 1 of 2 runs; Shakespeare size at 1.3× eager "
            "in 1 by median, 1 by the fastest steps") in zen4
    zen2 = lines[lines.index("## Zen 2, AVX2"):lines.index("## Zen 4, AVX-512")]
    assert any(line.startswith("| 2026-12-04T0312Z-zen2 (busy host) | 2026-12-04 | Zen 2, AVX2 |")
               for line in zen2)
    # 450 vs 600 ms: torch.compile 1.33x slower; 86 % of the peak.
    assert ("- Zen 2, AVX2: every target met in 1 of 1 runs; Shakespeare size at 1.3× eager "
            "in 1 by median, 1 by the fastest steps") in zen2
    # README: only the block changed; per kind the latest default run at both sizes.
    after = readme.read_text()
    head, block = after.split("<!-- results:begin -->\n")
    block, tail = block.split("<!-- results:end -->\n")
    assert head == "# gptc\n\nIntro.\n\n" and tail == "\nMore.\n"
    block = block.splitlines()
    assert "docs/performance.md" in block[0] and len(block) <= 25
    # One table: a kind's name on its first row.
    zen2_tiny = [i for i, line in enumerate(block) if line.startswith("| Zen 2, AVX2, ")
                 and line.endswith(" | tiny | 3.0 | 7.5 | 6.0 | 2.50× | 2.00× |")]
    zen4_tiny = [i for i, line in enumerate(block) if line.startswith("| Zen 4, AVX-512, ")
                 and line.endswith(" | tiny | 5.0 | 9.0 | 6.0 | 1.80× | 1.20× |")]
    assert len(zen2_tiny) == len(zen4_tiny) == 1, block
    assert block[zen2_tiny[0] + 1] == \
        "|  | Shakespeare size | 450.0 | 585.0 | 600.0 | 1.30× | 1.33× |"
    assert block[zen4_tiny[0] + 1] == \
        "|  | Shakespeare size | 500.0 | 600.0 | 550.0 | 1.20× | 1.10× |"
    assert zen2_tiny[0] < zen4_tiny[0]  # Zen 2 first
    assert block[-1] == "Matmul micro-kernel, % of the measured FMA peak: Zen 2 86 %, Zen 4 80 %."
    # The step's FLOPs against the cores' peak, where the record has the model's sizes (as
    # every train_step.py record has): nanoGPT's shakespeare_char at batch 4 is 10,745,088
    # parameters, 98,304 of them the position embedding; a token costs 6 x 10,646,784 +
    # 12 x 6 layers x 6 heads x 64 x 256 = 70,958,592 FLOP, 1,024 tokens 72.66 GFLOP. Zen 2's
    # run: 2 cores x 90 / 0.86 = 209.3 GFLOP/s of peak; gptc's 450 ms 161.5 GFLOP/s, 77 %;
    # eager's 585 ms 59 % (under the moonshot's 60 %); torch.compile's 600 ms 58 %.
    zen2_run = json.loads((store_dir / "2026-12-04T0312Z-zen2.json").read_text())
    for st in zen2_run["figures"]["steps"]:
        st.update(params=10745088 if st["size"] == "shakespeare" else 106880, model="gpt",
                  block_size=256 if st["size"] == "shakespeare" else 64)
    (store_dir / "2026-12-04T0312Z-zen2.json").write_text(json.dumps(zen2_run))
    assert report(store_dir, page, readme).returncode == 0
    shares = "gptc 77 %, eager 59 %, torch.compile 58 %"
    assert readme.read_text().splitlines()[-4].endswith(
        f"The Shakespeare-size step, % of the cores' FMA peak (nanoGPT's FLOP count; the "
        f"moonshot: 60 %): Zen 2 {shares}."), readme.read_text()
    assert any(line.startswith("The Shakespeare-size step, 72.7 GFLOP") and
               line.endswith(f"2 cores' measured FMA peak (the moonshot: 60 %): {shares}.")
               for line in page.read_text().splitlines())
    page.write_text(text)
    readme.write_text(after)
    (store_dir / "2026-12-04T0312Z-zen2.json").write_text(json.dumps(runs["2026-12-04T0312Z-zen2"]))
    # Run again: the same page and README.
    assert report(store_dir, page, readme).returncode == 0
    assert (page.read_text(), readme.read_text()) == (text, after)
    # No markers: README untouched, said on stderr, the page still written.
    plain = "# gptc\n\nNo results block here.\n"
    readme.write_text(plain)
    page.unlink()
    run = report(store_dir, page, readme)
    assert run.returncode == 0, run.stderr
    assert readme.read_text() == plain and page.read_text() == text
    assert run.stderr.startswith(f"report: {readme} has no <!-- results:begin --> line")
    # An end marker before the begin marker is no block either.
    swapped = "<!-- results:end -->\nx\n<!-- results:begin -->\n"
    readme.write_text(swapped)
    assert report(store_dir, page, readme).returncode == 0 and readme.read_text() == swapped


def test_report_names_the_record_and_what_is_wrong(tmp_path):
    """bench/report.py on a store holding what is not a record of bench/run.py: one line
    naming the file and what is wrong, exit 1, no page written."""
    step = dict(size="tiny", framework="gptc", ms_median=4.0, ms_min=4.0, ms_max=4.0,
                tokens_per_s=128000.0, batch=8, peak_rss_mib=900.0)
    good = record(figures={"steps": [step]})
    page, readme = tmp_path / "performance.md", tmp_path / "README.md"
    readme.write_text("x\n")
    for content, said in (
            ("", "not JSON (Expecting value: line 1 column 1 (char 0))"),
            (b"\xff", "not JSON ('utf-8' codec can't decode byte 0xff in position 0: "
                      "invalid start byte)"),
            ([1, 2], "not a JSON object, so not a record of bench/run.py"),
            ({}, 'no "finished"'),
            (dict(good, finished="yesterday"),
             '"finished" is "yesterday", not a UTC time like 2026-12-04T03:12:09Z'),
            (dict(good, machine="2 cores"), '"machine" is "2 cores", not an object'),
            (dict(good, machine={}), 'machine: no "kind"'),
            (dict(good, dirty="no"), '"dirty" is "no", not true or false'),
            (dict(good, settings=dict(dropout="x")), 'settings: "dropout" is "x", not a number'),
            (dict(good, figures={}), 'figures: no "steps"'),
            (dict(good, figures={"steps": 3}), 'figures: "steps" is 3, not a list'),
            (dict(good, figures={"steps": [3]}), "figures: steps[0]: not an object"),
            (dict(good, figures={"steps": [{"size": "tiny"}]}),
             'figures: steps[0]: no "framework"'),
            (dict(good, figures={"steps": [dict(step, batch=None)]}),
             'figures: steps[0]: "batch" is null, not an integer'),
            (dict(good, figures={"steps": [dict(step, ms_median=0)]}),
             'figures: steps[0]: "ms_median" is 0, not a positive number'),
            (dict(good, figures={"steps": [dict(step, core_round_trip_ns=[80.0, "far"])]}),
             'figures: steps[0]: "core_round_trip_ns" is [80.0, "far"], not a list of '
             'positive numbers'),
            (dict(good, figures={"steps": [], "matmul": {"gflops": 3}}),
             'figures: matmul: no "fraction_of_peak"')):
        store_dir = tmp_path / "store"
        store_dir.mkdir()
        (store_dir / "2026-12-03T1000Z-zen4.json").write_text(json.dumps(good))
        path = store_dir / "2026-12-03T1100Z-zen4.json"
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content if isinstance(content, str) else json.dumps(content))
        run = report(store_dir, page, readme)
        assert run.returncode == 1, (content, run.stderr)
        assert run.stderr == f"report: cannot read {path}: {said}\n", content
        assert run.stdout == "" and not page.exists()
        shutil.rmtree(store_dir)
    store_dir.mkdir()
    (store_dir / "2026-12-03T1100Z-zen4.json").mkdir()
    run = report(store_dir, page, readme)
    assert (run.returncode, run.stderr) == (
        1, f"report: cannot read {store_dir / '2026-12-03T1100Z-zen4.json'}: Is a directory\n")
    run = report(tmp_path / "none", page, readme)
    assert run.returncode == 1 and run.stderr.startswith(
        f"report: cannot read {tmp_path / 'none'}: no such directory")
    # A record that holds only what the report reads is read: a failed step shown as such.
    shutil.rmtree(store_dir)
    store_dir.mkdir()
    failed = dict(size="tiny", framework="eager", error="x")
    (store_dir / "2026-12-03T1000Z-zen4.json").write_text(
        json.dumps(record(figures={"steps": [step, failed]})))
    run = report(store_dir, page, readme)
    assert run.returncode == 0, run.stderr
    assert "| tiny | eager | error: x | | | | |" in page.read_text().splitlines()
    assert "| 2026-12-03T1000Z-zen4 | ? | Zen 4, AVX-512 | — | default |" in page.read_text()
    assert readme.read_text() == "x\n"


def test_report_shows_the_latest_gpu_check(tmp_path):
    """The page's GPU section is the newest record of bench/results/gpu/: each family's
    count and mismatches (a family that differs shows it), the matmuls summed, and the timed
    shapes against cuBLAS; without a GPU record there is no section."""
    sys.path.insert(0, os.path.join(REPO, "bench"))
    report = importlib.import_module("report")
    assert report.gpu_section(str(tmp_path)) == []

    def record(finished, note, mismatches):
        return {"finished": finished, "gpu": "NVIDIA H200", "sm": 90, "numerics": "portable fp32",
                "note": note, "failures": 0,
                "results": [{"family": "math", "fn": "exp", "values": 1024, "mismatches": 0},
                            {"family": "layer_norm", "rows": 64, "mismatches": mismatches},
                            {"family": "matmul", "case": "small", "M": 4, "N": 4, "K": 4,
                             "checked": 16, "mismatches": 0},
                            {"family": "matmul", "case": "qkv", "M": 16384, "N": 1152, "K": 384,
                             "checked": 20000, "mismatches": 1, "tflops": 34.9,
                             "cublas_tflops": 41.3}]}
    for name, rec in [("old.json", record("2026-12-04T11:00:00Z", "an older run", 0)),
                      ("new.json", record("2026-12-04T12:00:00Z", "the newer run", 3))]:
        (tmp_path / name).write_text(json.dumps(rec))
    lines = report.gpu_section(str(tmp_path))
    text = "\n".join(lines)
    assert "new.json" in text and "the newer run" in text and "an older run" not in text
    assert "| exp | 1,024 values | 0 |" in lines
    assert "| layer_norm | 64 rows | 3 |" in lines
    assert "| matmul (2 shapes and layouts) | 20,016 outputs | 1 |" in lines
    assert "| qkv | 16384 × 1152 × 384 | 34.9 | 41.3 |" in lines


def test_report_shows_the_main_job_against_pytorch(tmp_path):
    """The newest record of bench/results/main_job/ becomes a table: each framework's val
    loss after the recipe, gptc's untrained twin, loop and whole-run times, peak RSS."""
    sys.path.insert(0, os.path.join(REPO, "bench"))
    report = importlib.import_module("report")
    assert report.latest_record(str(tmp_path)) is None

    def rec(finished, val):
        evals = lambda v: [{"iter": 0, "val": 4.6}, {"iter": 2000, "val": v, "train": v}]  # noqa
        fig = {fw: {"evals": evals(val + d), "loop_s": 60.0 + d, "wall_s": 90.0 + d,
                    "peak_rss_mib": 800.0} for fw, d in (("gptc", 0), ("eager", 0.001),
                                                          ("compile", 0.002))}
        fig["gptc"]["evals"][-1]["twin_val"] = 4.6242
        return {"finished": finished, "machine": {"kind": "Zen 4", "width": "AVX-512"},
                "settings": {"n_layer": 4, "n_embd": 128, "block_size": 64, "batch": 12,
                             "iters": 2000, "threads": 2, "corpus": "fortunes", "data": None},
                "figures": fig}
    (tmp_path / "a.json").write_text(json.dumps(rec("2026-12-04T10:00:00Z", 2.0)))
    (tmp_path / "b.json").write_text(json.dumps(rec("2026-12-04T11:00:00Z", 1.9)))
    name, r = report.latest_record(str(tmp_path))
    lines = report.main_job_table(name, r, "bench/results/main_job/")
    assert "(4 layers, 128 wide, block 64, batch 12, 2000 steps) on Debian fortunes" in lines[0]
    assert "[record](bench/results/main_job/b.json)" in lines[0]
    assert "| | gptc | eager | torch.compile |" in lines
    assert "| val loss after 2000 steps | 1.9000 | 1.9010 | 1.9020 |" in lines
    assert "| val loss untrained (the twin) | 4.6242 | | |" in lines
    assert "| training loop, s (with evaluations) | 60.0 | 60.0 | 60.0 |" in lines


def test_report_shows_generation_speed(tmp_path):
    sys.path.insert(0, os.path.join(REPO, "bench"))
    report = importlib.import_module("report")
    fig = {fw: {"tokens_per_s_median": t, "peak_rss_mib": 500.0}
           for fw, t in (("gptc", 4000.0), ("gptc-no-cache", 1000.0), ("eager", 400.0))}
    rec = {"finished": "2026-12-04T14:00:00Z", "machine": {"kind": "Zen 4", "width": "AVX-512"},
           "settings": {"model": {"n_layer": 4, "n_embd": 128, "block_size": 64},
                        "tokens": 500, "threads": 2, "top_k": 40}, "figures": fig}
    (tmp_path / "g.json").write_text(json.dumps(rec))
    [(name, r)] = report.latest_generation(str(tmp_path))
    lines = report.generate_table(name, r, "x/")
    assert "| gptc (KV cache) | 4,000 | 10.0× | 500 |" in lines
    assert "| nanoGPT's generate, eager | 400 | 1.0× | 500 |" in lines
    assert not any("torch.compile" in line for line in lines[2:])
    # A transformers model's run (--model hf-llama) is a table of its own, against
    # transformers' generate; the newest run of each model is shown, the GPT's first.
    hf = dict(rec, finished="2026-12-05T14:00:00Z", figures={
        fw: {"tokens_per_s_median": t, "peak_rss_mib": 700.0}
        for fw, t in (("gptc", 2000.0), ("transformers", 500.0))})
    hf["settings"] = dict(rec["settings"], model={"n_layer": 4, "n_embd": 128,
                                                  "block_size": 512, "kind": "hf-llama"})
    (tmp_path / "h.json").write_text(json.dumps(hf))
    (tmp_path / "h0.json").write_text(json.dumps(dict(hf, finished="2026-12-05T13:00:00Z")))
    runs = report.latest_generation(str(tmp_path))
    assert [n for n, _ in runs] == ["g", "h"]
    assert report.generate_heading(runs[1][1]) == (
        "Generation of transformers' LLaMA against transformers' generate")
    lines = report.generate_table(*runs[1], "x/")
    assert "from transformers' LLaMA at the main job's sizes (4 layers, 128 wide, 512 " \
           "positions)" in lines[0]
    assert "| gptc (KV cache) | 2,000 | 4.0× | 700 |" in lines
    assert "| transformers' generate, eager | 500 | 1.0× | 700 |" in lines
    # A run at GPT-2 small's sizes (--size gpt2) is a table of its own, after the main
    # job's sizes.
    big = dict(hf, finished="2026-12-05T12:00:00Z")
    big["settings"] = dict(hf["settings"], model={
        "n_layer": 12, "n_embd": 768, "block_size": 1024, "vocab_size": 50257,
        "kind": "hf-llama"})
    (tmp_path / "h2.json").write_text(json.dumps(big))
    runs = report.latest_generation(str(tmp_path))
    assert [n for n, _ in runs] == ["g", "h", "h2"]
    assert report.generate_heading(runs[2][1]) == (
        "Generation of transformers' LLaMA against transformers' generate, GPT-2 small's size")
    assert "from transformers' LLaMA at GPT-2 small's sizes (12 layers, 768 wide, 50,257 " \
           "tokens, 1024 positions)" in report.generate_table(*runs[2], "x/")[0]


def test_step_flops_is_the_step_s_products_counted_one_by_one():
    """bench/config.py's step_flops (nanoGPT's 6 N + 12 L H Q T a token) against the tiny
    GPT's products counted one by one: each linear layer 2 M N K forward and twice that
    backward (the input and the weight gradient), attention's two T x T x head products a
    head forward and four backward. They differ by LayerNorm's weights, which nanoGPT's
    count includes (6 x 512 tokens x 320 weights)."""
    sys.path.insert(0, os.path.join(REPO, "bench"))
    from config import SIZES, step_flops
    c = SIZES["tiny"]
    L, C, H, T, V, B = (c[k] for k in ("n_layer", "n_embd", "n_head", "block_size",
                                       "vocab_size", "batch"))
    tokens, head = B * T, C // H
    linear = [(C, 3 * C), (C, C), (C, 4 * C), (4 * C, C)] * L + [(C, V)]
    by_hand = sum(3 * 2 * tokens * n_in * n_out for n_in, n_out in linear)
    by_hand += L * B * H * 6 * 2 * T * T * head
    layer_norms = L * 2 * C + C
    params = 4 * C * 3 * C * L + V * C + layer_norms  # the tied embedding once; no wpe
    assert step_flops(params, L, H, C, T, tokens) - by_hand == 6 * tokens * layer_norms
    assert step_flops(params, L, H, C, T, tokens) == approx(by_hand, rel=0.005)


def test_report_names_the_blocking_the_machine_gave():
    """The performance page says which blocking the run's products took (matmul_bench's
    record), and nothing for runs from before it was recorded."""
    sys.path.insert(0, os.path.join(REPO, "bench"))
    from report import blocking
    m = {"gflops": 100.0, "blocking": {"order": "panels", "kc": 192, "mc": 678, "nc": 10912,
                                       "caches_from": "sysfs"}}
    assert blocking(m) == (" The products' blocking from the caches: the panel-task order, "
                           "kc 192, mc 678, nc 10912.")
    m["blocking"]["order"] = "blocked"
    assert "the blocked order, kc 192" in blocking(m)
    m["blocking"]["order"] = "mixed"
    assert "the panel-task (weight gradients blocked) order, kc 192" in blocking(m)
    assert blocking({"gflops": 100.0}) == ""


def test_eager_memory_counts_the_step_s_tensors():
    """bench/eager_memory.py at the GPU check's tiny size: after the steps, what is live is
    the parameters, their gradients and AdamW's two moments (4 floats a parameter, each
    storage rounded up to 512 bytes, plus the two batches and AdamW's step counts: under a
    tenth more); the peak adds the step's activations on top. A bad count is one line."""
    run = subprocess.run([sys.executable, os.path.join(REPO, "bench", "eager_memory.py"),
                          "--size", "tiny"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    r = json.loads(run.stdout.strip().splitlines()[-1])
    state = 4 * r["params"] * 4 / (1 << 20)
    assert state <= r["live_after_mib"] <= 1.1 * state
    assert r["peak_mib"] > 2 * r["live_after_mib"]
    bad = subprocess.run([sys.executable, os.path.join(REPO, "bench", "eager_memory.py"),
                          "--steps", "0"], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
        "eager_memory.py: error: --steps must be at least 1, got 0"]


def test_eager_profile_names_where_eager_s_step_goes():
    """bench/eager_profile.py at tiny size: the op table and the groups, whose times add up
    to the step's total; the products are there (27 mm calls a tiny step), and a bad count
    is one line."""
    cmd = [sys.executable, os.path.join(REPO, "bench", "eager_profile.py"), "--size", "tiny",
           "--steps", "2", "--warmup", "1"]
    run = subprocess.run(cmd, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    total = float(re.search(r": ([0-9.]+) ms of op self time a step", run.stdout).group(1))
    groups = dict((g, float(ms)) for g, ms in
                  re.findall(r"^\| (products|attention|gelu|the rest) \| ([0-9.]+) \|",
                             run.stdout, re.M))
    assert set(groups) == {"products", "attention", "gelu", "the rest"}
    assert sum(groups.values()) == approx(total, abs=0.3)
    assert re.search(r"^\| aten::mm \| [0-9.]+ \| 27 \|$", run.stdout, re.M)
    bad = subprocess.run(cmd[:2] + ["--steps", "0"], capture_output=True, text=True)
    assert bad.returncode != 0 and "--steps must be at least 1" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_kernel_profile_times_every_kernel_of_a_step(tmp_path):
    """bench/kernel_profile.py on a small training step: every kernel call of the entry is
    timed once (the header counts them as the entry makes them), the lines add up to the
    kernels' total, ops are summed by default, and --each lists every kernel function the
    entry calls on a line of its own (each matmul kernel apart: the forward's products of one
    layer are different kernels)."""
    import torch
    from gptc.testing.tiny_gpt import TinyGPT, TinyGPTConfig
    torch.manual_seed(0)
    model = TinyGPT(TinyGPTConfig(n_layer=1, n_head=2, n_embd=32, block_size=16,
                                  vocab_size=65, dropout=0.0)).train()
    x = torch.randint(0, 65, (2, 16))
    step = gptc.compile_train_step(model, (x, x.clone()), optimizer=gptc.AdamW(lr=1e-3),
                                   workdir=str(tmp_path / "work"))
    art = step.artifact_dir
    source = open(os.path.join(art, "kernels.cpp")).read()
    entry = source.split("GPTC_EXPORT const char* gptc_entry(", 1)[1]
    calls = re.findall(r"^  (k\d+_\w+)\(", entry, re.M)
    tool = os.path.join(REPO, "bench", "kernel_profile.py")

    def profile(*extra):
        run = subprocess.run([sys.executable, tool, art, "--steps", "2", "--threads", "2",
                              "--top", "1000", *extra], capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        head, *lines = run.stdout.strip().splitlines()
        m = re.match(r"2 calls, 2 threads: [0-9.]+ ms per call, ([0-9.]+) ms in (\d+) kernels$",
                     head)
        assert m, head
        assert int(m.group(2)) == len(calls)
        rows = [re.match(r"\s*([0-9.]+) ms\s+[0-9.]+%  (\S+)", line) for line in lines]
        assert all(rows), lines
        assert sum(float(r.group(1)) for r in rows) == approx(float(m.group(1)), abs=0.01)
        return [r.group(2) for r in rows]

    summed, each = profile(), profile("--each")
    assert "matmul" in summed and not any(re.match(r"k\d+_matmul$", k) for k in summed)
    assert sorted(each) == sorted(set(calls))
    assert len(summed) < len(each)
