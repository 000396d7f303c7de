"""The results store: bench/results/, one JSON file a bench run, named by when the run
finished (UTC) and the kind of CPU it ran on, e.g. 2026-12-04T0312Z-zen2.json.

A record (what bench/run.py writes; bench/report.py reads them all):

    finished    when the run ended, "2026-12-04T03:12:09Z"
    commit      the commit measured (null: not known) and "dirty": whether the tree had
                uncommitted changes (null: not known)
    machine     cores, vendor, model_name, family, model, flags (the kernels' vector
                extensions, name: present), caches, and kind ("Zen 4", "Intel AVX-512")
                and width ("AVX-512", "AVX2") worked out from them
    settings    threads, rounds, dropout, model ("gpt", "llama", "hf-gpt2", "hf-llama"),
                attention ("sdpa", "manual"), batch (sequences a step, per size)
    figures     steps (per size and framework), matmul and sgemm_openblas (GFLOP/s),
                losses_agree
    date, note  the day the run started; a remark shown beside the run ("busy host")

Records migrated from the files bench/run.py wrote before the store say where a field
came from in "provenance" and which file they were in "migrated_from".
"""
import glob
import json
import math
import os
import re
import subprocess
import time

from _cli import fail, read
from config import SIZES

HERE = os.path.dirname(os.path.abspath(__file__))
STORE = os.path.join(HERE, "results")
STAMP = "%Y-%m-%dT%H:%M:%SZ"
# The vector extensions gptc's kernels (built for the host with -march=native) can use.
FLAGS = ("avx", "avx2", "fma", "f16c", "avx512f", "avx512dq", "avx512bw", "avx512vl",
         "avx512_vnni", "avx512_bf16")
VENDORS = {"AuthenticAMD": "AMD", "GenuineIntel": "Intel"}


def zen(family: int, model: int):
    """The Zen generation of an AMD CPU family and model (as /proc/cpuinfo gives them), or
    None."""
    if family == 23:
        return "Zen 2" if model >= 0x30 else "Zen"
    if family == 25:
        return "Zen 4" if 0x10 <= model <= 0x1F or 0x60 <= model <= 0xAF else "Zen 3"
    if family == 26:
        return "Zen 5"
    return None


def width(flags: dict) -> str:
    """The widest vector forms the kernels take on a CPU with these flags."""
    return "AVX-512" if flags.get("avx512f") else "AVX2" if flags.get("avx2") else "no AVX2"


def kind(vendor, family, model, flags: dict) -> str:
    """"Zen 4" for an AMD CPU whose family and model name a Zen generation, else the vendor
    and the widest vector forms, "Intel AVX-512"."""
    generation = vendor == "AMD" and family is not None and zen(family, model)
    return generation or f"{vendor or 'unknown CPU'} {width(flags)}"


def caches() -> dict:
    """The first CPU's caches from sysfs, {"L1d": "32K", "L2": "1024K", ...}; {} if absent."""
    out = {}
    for index in sorted(glob.glob("/sys/devices/system/cpu/cpu0/cache/index*")):
        try:
            level, type_, size = (open(os.path.join(index, f)).read().strip()
                                  for f in ("level", "type", "size"))
        except OSError:
            continue
        out[f"L{level}" + {"Data": "d", "Instruction": "i"}.get(type_, "")] = size
    return out


def machine_info() -> dict:
    """This machine as a record's "machine": the cores, the CPU and its vector extensions
    (the kernels are built for the host and take different forms on each kind)."""
    info = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                info.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    number = lambda key: int(info[key]) if info.get(key, "").isdigit() else None  # noqa: E731
    present = set(info.get("flags", "").split())
    flags = {f: f in present for f in FLAGS} if present else {}
    vendor = VENDORS.get(info.get("vendor_id"), info.get("vendor_id"))
    family, model = number("cpu family"), number("model")
    return dict(cores=os.cpu_count(), vendor=vendor, model_name=info.get("model name"),
                family=family, model=model, flags=flags, caches=caches(),
                kind=kind(vendor, family, model, flags), width=width(flags))


def git_commit(repo: str):
    """(HEAD's commit, whether tracked files differ from it) in `repo`; (None, None) where
    git cannot say."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True,
                              text=True)
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                                cwd=repo, capture_output=True, text=True)
    except OSError:  # no git
        return None, None
    if head.returncode or status.returncode:
        return None, None
    return head.stdout.strip(), bool(status.stdout.strip())


def slug(kind_: str) -> str:
    """A kind of CPU as it appears in a record's file name: "Zen 4" zen4, "Intel AVX-512"
    intel-avx512."""
    return re.sub(r"[^a-z0-9]+", "-", kind_.lower().replace("zen ", "zen").replace("-", ""))\
        .strip("-")


def path_for(record, directory: str = STORE) -> str:
    """A new file in `directory` for `record`: its finish time to the minute and its kind
    of CPU, with -2, -3... added when another run of the same minute and kind is there."""
    stamp = time.strftime("%Y-%m-%dT%H%MZ", time.strptime(record["finished"], STAMP))
    stem = f"{stamp}-{slug(record['machine']['kind'])}"
    path, n = os.path.join(directory, stem + ".json"), 1
    while os.path.exists(path):
        n += 1
        path = os.path.join(directory, f"{stem}-{n}.json")
    return path


def write_new(directory: str, settings: dict, figures: dict, note=None, **extra) -> str:
    """A record of a run that just finished (when, the commit, this machine, `settings`,
    `figures`, `note`, `extra` fields) written to a new dated file in `directory`; its path.
    For the stores beside the step benchmark's: bench/results/main_job/ and generate/."""
    commit, dirty = git_commit(os.path.dirname(HERE))
    record = {"finished": time.strftime(STAMP, time.gmtime()), **extra, "commit": commit,
              "dirty": dirty, "machine": machine_info(), "settings": settings,
              "figures": figures}
    if note:
        record["note"] = note
    os.makedirs(directory, exist_ok=True)
    return write(record, path_for(record, directory))


def write(record, path=None) -> str:
    """`record` written to `path` (default: a new dated file in the store); the path. Not
    checked: a run's figures are kept even where the report cannot read them."""
    if path is None:
        os.makedirs(STORE, exist_ok=True)
        path = path_for(record)
    with open(path, "w") as f:
        json.dump(record, f, indent=2)
        f.write("\n")
    return path


def check(record) -> None:
    """ValueError naming the first field the report reads that `record` lacks or holds as
    something else; checked no further."""
    def need(obj, key, ok, what, where="", optional=False):  # optional: absent or null
        if optional and obj.get(key) is None:
            return
        if key not in obj:
            raise ValueError(f'{where}no "{key}"')
        if not ok(obj[key]):
            raise ValueError(f'{where}"{key}" is {json.dumps(obj[key])[:40]}, not {what}')

    def number(v):
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)

    def stamp(v):
        try:
            return isinstance(v, str) and bool(time.strptime(v, STAMP))
        except ValueError:
            return False

    text, positive = (lambda v: isinstance(v, str)), (lambda v: number(v) and v > 0)
    obj = lambda v: isinstance(v, dict)  # noqa: E731
    integer = lambda v: isinstance(v, int) and not isinstance(v, bool)  # noqa: E731
    if not obj(record):
        raise ValueError("not a JSON object, so not a record of bench/run.py")
    need(record, "finished", stamp, "a UTC time like 2026-12-04T03:12:09Z")
    for key in ("machine", "settings", "figures"):
        need(record, key, obj, "an object")
    for key, ok, what in (("commit", text, "a string"), ("note", text, "a string"),
                          ("dirty", lambda v: isinstance(v, bool), "true or false")):
        need(record, key, ok, what, optional=True)
    need(record["machine"], "kind", text, "a string", "machine: ")
    need(record["machine"], "width", text, "a string", "machine: ", optional=True)
    settings = record["settings"]
    for key, ok, what in (("dropout", number, "a number"), ("attention", text, "a string"),
                          ("model", text, "a string")):
        need(settings, key, ok, what, "settings: ", optional=True)
    figures = record["figures"]
    need(figures, "steps", lambda v: isinstance(v, list), "a list", "figures: ")
    need(figures, "matmul", obj, "an object", "figures: ", optional=True)
    if (figures.get("matmul") or {}).get("gflops"):
        for key in ("gflops", "fraction_of_peak", "fma_peak_gflops"):
            need(figures["matmul"], key, number, "a number", "figures: matmul: ")
    for i, r in enumerate(figures["steps"]):
        where = f"figures: steps[{i}]: "
        if not obj(r):
            raise ValueError(f"{where}not an object")
        need(r, "size", text, "a string", where)
        need(r, "framework", text, "a string", where)
        if "error" in r or r["size"] not in SIZES:  # a failed run: only its names are shown
            continue
        for key in ("ms_median", "ms_min", "ms_max", "tokens_per_s"):
            need(r, key, positive, "a positive number", where)
        need(r, "batch", integer, "an integer", where)
        need(r, "peak_rss_mib", number, "a number", where)
        for key in ("step_peak_rss_mib", "kernels_per_step"):
            need(r, key, number, "a number", where, optional=True)
        need(r, "core_round_trip_ns",
             lambda v: isinstance(v, list) and all(x is None or positive(x) for x in v),
             "a list of positive numbers", where, optional=True)


def load(path: str):
    """The record at `path`, checked; else exit 1 with one line naming it."""
    record = read(path, as_json=True)
    try:
        check(record)
    except ValueError as e:
        fail(f"cannot read {path}: {e}")
    return record


def runs(directory: str = STORE):
    """(name, record) for every record in `directory`, the name its file's without .json,
    in the order the runs finished."""
    if not os.path.isdir(directory):
        fail(f"cannot read {directory}: no such directory (bench/run.py writes the store)")
    named = [(os.path.splitext(os.path.basename(p))[0], load(p))
             for p in glob.glob(os.path.join(directory, "*.json"))]
    return sorted(named, key=lambda run: (run[1]["finished"], run[0]))
