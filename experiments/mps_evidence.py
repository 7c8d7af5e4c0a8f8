"""MPS evidence for ``experiments/gpu_check.sh``: which packed trial processes of
``fluid bench gpu`` ran as clients of a live MPS daemon, by what the daemons and NVML say
(Fluid's own ``fluid_mps`` report in a result row is not evidence).

``sample --out DIR`` runs beside the bench until SIGTERM or SIGINT (``--once``: one round).
Every ``--interval`` seconds it

* finds the MPS pipe directories present: Fluid's ``<tmp>/fluid-mps/<session>/<node>/pipe``
  and the packing part's ``<tmp>/mps-*/pipe`` (each beside its ``log``), ``$CUDA_MPS_PIPE_DIRECTORY``
  and the system one, ``/tmp/nvidia-mps`` (log ``/var/log/nvidia-mps``);
* asks each ``get_server_list`` and, per server pid, ``get_client_list PID``, appending every
  answer or failure (no daemon there) to ``DIR/mps/control.jsonl``;
* copies each daemon's ``control.log`` and ``server.log`` to ``DIR/mps/logs/<directory>/``
  (once more at the end: the daemon may be gone by then);
* appends NVML's MPS process list per GPU (pid, ``usedGpuMemory``) to ``DIR/mps/nvml.jsonl``
  when ``pynvml`` imports;
* keeps the Tune result rows carrying ``pid`` (``fluid bench gpu --out`` saves no pid) in
  ``DIR/mps/trial-rows.jsonl``: from the bench's Ray storage
  (``<storage>/fluid-bench-gpu-*/**/result.json``, deleted as each run ends) and from the
  driver's copy in the Ray session (``<ray tmp>/session_*/artifacts/*/*/driver_artifacts/*/
  result.json``, kept after the run; only those of the storage's experiments, written since
  the sampler started).

``summarize --out DIR`` writes ``DIR/mps-summary.json`` and prints it (`summarize`).

Standard library only (``pynvml`` optional); a script of the checkout, never imported by
``fluid``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

CONTROL = "nvidia-cuda-mps-control"
PIPE_ENV, LOG_ENV = "CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY"
SYSTEM_PIPE, SYSTEM_LOG = "/tmp/nvidia-mps", "/var/log/nvidia-mps"
STORAGE_GLOB = "fluid-bench-gpu-*/**/result.json"
SESSION_GLOB = "session_*/artifacts/*/*/driver_artifacts/*/result.json"
LOG_NAMES = ("control.log", "server.log")
COMMAND_TIMEOUT_S = 5.0  # a daemon that hangs must not stall the next round
ROW_KEYS = ("trial_id", "training_iteration", "pid", "hostname", "fluid_gpus", "fluid_mps")
#: How MPS's control.log records a client connecting: ``NEW CLIENT <pid> from user <uid>``.
NEW_CLIENT = re.compile(r"NEW CLIENT (\d+)")
FILES = ("control.jsonl", "nvml.jsonl", "trial-rows.jsonl")


def pipe_dirs(tmp: Path, system_pipe: Path, system_log: Path) -> list[tuple[Path, Path]]:
    """The MPS pipe directories present, each with its log directory, links resolved (Fluid's
    per-node link directories lead to its daemons' own), each once."""
    found: dict[Path, Path] = {}
    env_pipe = os.environ.get(PIPE_ENV)
    if env_pipe:
        found[Path(os.path.realpath(env_pipe))] = Path(os.environ.get(LOG_ENV, SYSTEM_LOG))
    found.setdefault(Path(os.path.realpath(system_pipe)), system_log)
    for pattern in ("fluid-mps/*/*/pipe", "mps-*/pipe"):
        for pipe in sorted(tmp.glob(pattern)):
            found.setdefault(Path(os.path.realpath(pipe)),
                             Path(os.path.realpath(pipe.parent / "log")))
    return [(pipe, log) for pipe, log in found.items() if pipe.is_dir()]


def pids(text: str) -> list[int]:
    """The pids a ``get_server_list`` or ``get_client_list`` answer lists (one a line)."""
    return [int(token) for token in text.split() if token.isdigit()]


def control(binary: str | None, pipe: Path, log: Path, command: str) -> dict[str, Any]:
    """``echo COMMAND | CUDA_MPS_PIPE_DIRECTORY=PIPE nvidia-cuda-mps-control``, as a record:
    ``answered`` is False where it failed (no daemon there, or none to ask)."""
    record: dict[str, Any] = {"time": time.strftime("%Y-%m-%dT%H:%M:%S"), "t": time.time(),
                              "pipe": str(pipe), "log": str(log), "command": command}
    if binary is None:
        return {**record, "answered": False, "rc": None, "error": f"{CONTROL} is not on PATH"}
    env = {**os.environ, PIPE_ENV: str(pipe), LOG_ENV: str(log)}
    try:
        proc = subprocess.run([binary], input=command + "\n", env=env, capture_output=True,
                              text=True, timeout=COMMAND_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as e:
        return {**record, "answered": False, "rc": None, "error": repr(e)}
    return {**record, "answered": proc.returncode == 0, "rc": proc.returncode,
            "stdout": proc.stdout, "stderr": proc.stderr}


def query(binary: str | None, pipe: Path, log: Path) -> list[dict[str, Any]]:
    """``get_server_list`` at ``pipe`` and, where it answered, ``get_client_list`` per server."""
    servers = control(binary, pipe, log, "get_server_list")
    records = [servers]
    if servers["answered"]:
        records += [control(binary, pipe, log, f"get_client_list {pid}")
                    for pid in pids(servers["stdout"])]
    return records


def load_nvml() -> Any:
    """The ``pynvml`` module, or None where it does not import."""
    try:
        import pynvml
    except ImportError:
        return None
    return pynvml


def _processes(nvml: Any, name: str, handle: Any) -> list[dict[str, Any]] | dict[str, str]:
    try:
        found = getattr(nvml, name)(handle)
    except Exception as e:  # NVML raises its own error types, and old drivers lack the call
        return {"error": repr(e)}
    return [{"pid": p.pid, "usedGpuMemory": p.usedGpuMemory} for p in found]


def nvml_sample(nvml: Any) -> dict[str, Any]:
    """NVML's MPS (and, for comparison, all compute) processes per GPU, or why none."""
    record: dict[str, Any] = {"time": time.strftime("%Y-%m-%dT%H:%M:%S"), "t": time.time()}
    if nvml is None:
        return {**record, "error": "pynvml does not import"}
    try:
        nvml.nvmlInit()
    except Exception as e:  # no driver: NVML's own error type
        return {**record, "error": f"nvmlInit: {e!r}"}
    try:
        gpus = []
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            gpus.append({"index": index,
                         "mps": _processes(nvml, "nvmlDeviceGetMPSComputeRunningProcesses",
                                           handle),
                         "compute": _processes(nvml, "nvmlDeviceGetComputeRunningProcesses",
                                               handle)})
        return {**record, "gpus": gpus}
    except Exception as e:
        return {**record, "error": repr(e)}
    finally:
        # Shutting down an NVML that half-started tells nothing more.
        with contextlib.suppress(Exception):
            nvml.nvmlShutdown()


def result_files(storage: Path, ray_tmp: Path, since: float,
                 experiments: set[str]) -> list[Path]:
    """The bench's Tune ``result.json`` files: in its Ray storage (their experiments' names
    added to ``experiments``), and the driver's copies in the Ray sessions of those
    experiments written since ``since`` (other runs' are not the bench's)."""
    files = sorted(storage.glob(STORAGE_GLOB))
    experiments.update(path.parent.parent.name for path in files)
    for path in sorted(ray_tmp.glob(SESSION_GLOB)):
        with contextlib.suppress(OSError):  # gone meanwhile
            if path.parents[2].name in experiments and path.stat().st_mtime >= since:
                files.append(path)
    return files


def trial_rows(files: Iterable[Path]) -> list[dict[str, Any]]:
    """The result rows carrying ``pid`` in ``files``, as far as written."""
    rows = []
    for path in files:
        try:
            lines = path.read_text().splitlines()
        except OSError:
            continue  # the run ended and its storage went meanwhile
        for line in lines:
            try:
                row = json.loads(line)
            except ValueError:
                continue  # the line Tune is writing now
            if isinstance(row, dict) and "pid" in row:
                rows.append({"source": str(path), **{k: row.get(k) for k in ROW_KEYS}})
    return rows


def copy_logs(logs: Iterable[Path], dest: Path) -> None:
    """Copy each log directory's MPS logs to ``dest/<its path>/``, as they are now."""
    for log in logs:
        for name in LOG_NAMES:
            src = log / name
            target = dest / str(log).strip("/").replace("/", "_") / name
            try:
                if src.is_file():
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(src, target)
            except OSError:
                continue  # not readable, or gone meanwhile


def _append(path: Path, records: Iterable[dict[str, Any]]) -> None:
    with path.open("a") as f:
        for record in records:
            f.write(json.dumps(record, default=str) + "\n")


class Sampler:
    """One sampling round at a time into ``out/mps/`` (see the module's docstring)."""

    def __init__(self, args: argparse.Namespace, nvml: Any) -> None:
        self.dir = Path(args.out) / "mps"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.args, self.nvml = args, nvml
        self.binary = shutil.which(args.control)
        self.logs: set[Path] = set()
        self.rows: set[tuple[Any, ...]] = set()
        self.started = time.time()
        self.experiments: set[str] = set()

    def round(self) -> None:
        """Ask every pipe directory and NVML once; keep the result rows not kept yet."""
        found = pipe_dirs(Path(self.args.tmp), Path(self.args.system_pipe),
                          Path(self.args.system_log))
        for pipe, log in found:
            _append(self.dir / "control.jsonl", query(self.binary, pipe, log))
            self.logs.add(log)
        copy_logs(self.logs, self.dir / "logs")
        if not self.args.no_nvml:
            _append(self.dir / "nvml.jsonl", [nvml_sample(self.nvml)])
        self.keep_rows()

    def keep_rows(self) -> None:
        """Append the result rows with a pid not kept yet (the same row is in the storage and
        in the session's copy: kept once)."""
        files = result_files(Path(self.args.storage), Path(self.args.ray_tmp), self.started,
                             self.experiments)
        new = {}
        for r in trial_rows(files):
            key = (r["trial_id"], r["training_iteration"], r["pid"])
            if key not in self.rows:
                new[key] = r
        self.rows.update(new)
        _append(self.dir / "trial-rows.jsonl", new.values())

    def run(self, stop: threading.Event) -> None:
        """Rounds every ``interval`` seconds until ``stop`` (or ``--max-seconds``), then the
        logs copied and the rows read once more (the session's copies of result.json are
        complete once the runs end)."""
        deadline = time.monotonic() + self.args.max_seconds
        while True:
            self.round()
            if self.args.once or stop.wait(self.args.interval) or time.monotonic() > deadline:
                break
        copy_logs(self.logs, self.dir / "logs")
        self.keep_rows()


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    records = []
    for line in path.read_text().splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            continue  # a line cut short when the sampler was killed
    return records


def _packed(row: dict[str, Any]) -> bool:
    share = row.get("fluid_gpus")
    return isinstance(share, (int, float)) and 0 < share < 1 and isinstance(row.get("pid"), int)


def _evidence(mps: Path) -> dict[str, Any]:
    """The pids each source of evidence saw as MPS clients, and the daemons that answered."""
    clients: set[int] = set()
    daemons: dict[str, dict[str, Any]] = {}
    for r in _read_jsonl(mps / "control.jsonl"):
        d = daemons.setdefault(r["pipe"], {"pipe": r["pipe"], "queries": 0, "answered": 0,
                                           "servers": set()})
        d["queries"] += 1
        d["answered"] += bool(r.get("answered"))
        if r.get("answered") and r["command"] == "get_server_list":
            d["servers"].update(pids(r.get("stdout", "")))
        elif r.get("answered"):
            clients.update(pids(r.get("stdout", "")))
    nvml = _read_jsonl(mps / "nvml.jsonl")
    nvml_pids = {p["pid"] for s in nvml for g in s.get("gpus", [])
                 if isinstance(g.get("mps"), list) for p in g["mps"]}
    logged = {int(m) for log in sorted(mps.glob("logs/*/control.log"))
              for m in NEW_CLIENT.findall(log.read_text(errors="replace"))}
    errors = sorted({s["error"] for s in nvml if "error" in s})
    return {"get_client_list": clients, "nvml_mps": nvml_pids, "control_log": logged,
            "nvml_samples": len(nvml), "nvml_errors": errors,
            "daemons": [{**d, "servers": sorted(d["servers"])} for d in daemons.values()]}


def _missing(rows: list[dict[str, Any]], packed: set[int], ev: dict[str, Any]) -> list[str]:
    """What the evidence lacks to answer the question, in words."""
    notes = []
    if not rows:
        notes.append("no Tune result row with a pid was found under the bench's Ray storage "
                     f"({STORAGE_GLOB}): the tuning part did not run, or ended between rounds")
    elif not packed:
        notes.append("no result row has 0 < fluid_gpus < 1: Fluid packed no trial")
    if not any(d["answered"] for d in ev["daemons"]):
        notes.append("no MPS daemon answered in any round")
    if ev["nvml_errors"]:
        notes.append(f"NVML: {ev['nvml_errors'][0]}")
    trial_pids = {r["pid"] for r in rows}
    if ev["nvml_mps"] and not ev["nvml_mps"] & trial_pids:
        notes.append("NVML listed MPS clients, none of them a trial's pid (another pid "
                     "namespace, as in a container?)")
    return notes


def summarize(out: Path) -> dict[str, Any]:
    """``out/mps-summary.json``: how many packed trial processes (pids of result rows with
    ``0 < fluid_gpus < 1``) were MPS clients of a live daemon by the evidence
    (``get_client_list`` answers or NVML's MPS process list)."""
    mps = out / "mps"
    rows = _read_jsonl(mps / "trial-rows.jsonl")
    packed = {r["pid"] for r in rows if _packed(r)}
    ev = _evidence(mps)
    seen = packed & (ev["get_client_list"] | ev["nvml_mps"])
    bench = json.loads((out / "summary.json").read_text()) if (out / "summary.json").is_file() \
        else {}
    fluid = bench.get("tuning", {}).get("fluid", {})
    summary = {
        "packed_processes": len(packed), "packed_pids": sorted(packed),
        "clients_by_evidence": len(seen), "clients_by_evidence_pids": sorted(seen),
        "by_source": {k: len(packed & ev[k]) for k in ("get_client_list", "nvml_mps")},
        "control_log_new_clients": len(packed & ev["control_log"]),
        "pids_seen": {k: len(ev[k]) for k in ("get_client_list", "nvml_mps", "control_log")},
        "trial_rows": len(rows), "trial_pids": len({r["pid"] for r in rows}),
        "daemons": ev["daemons"], "nvml_samples": ev["nvml_samples"],
        "self_reported_not_evidence": {k: fluid.get(k) for k in
                                       ("packed_results_under_mps", "packed_results")},
        "evidence_files": {name: (mps / name).is_file() for name in FILES},
        "logs_copied": sorted(str(p.relative_to(mps)) for p in mps.glob("logs/*/*.log")),
        "missing": _missing(rows, packed, ev),
    }
    (out / "mps-summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mps_evidence.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("sample", help="sample until SIGTERM (--once: one round)")
    s.add_argument("--out", required=True, help="writes OUT/mps/")
    s.add_argument("--interval", type=float, default=2.0, help="seconds between rounds")
    s.add_argument("--once", action="store_true", help="one round, then the logs copied")
    s.add_argument("--max-seconds", type=float, default=1200.0,
                   help="stop by then even if never signalled (a killed caller)")
    s.add_argument("--tmp", default="/tmp", help="where fluid-mps/ and mps-*/ are looked for")
    s.add_argument("--system-pipe", default=SYSTEM_PIPE)
    s.add_argument("--system-log", default=SYSTEM_LOG)
    s.add_argument("--storage", default=tempfile.gettempdir(),
                   help="where the bench makes its Ray storage fluid-bench-gpu-* (its TMPDIR)")
    s.add_argument("--ray-tmp", default=os.path.join(
        os.environ.get("RAY_TMPDIR") or os.environ.get("TMPDIR") or "/tmp", "ray"),
                   help="Ray's directory of sessions (as Ray picks it: $RAY_TMPDIR/ray, ...)")
    s.add_argument("--control", default=CONTROL, help="the MPS control binary (name or path)")
    s.add_argument("--no-nvml", action="store_true", help="leave NVML out")
    m = sub.add_parser("summarize", help="write and print OUT/mps-summary.json")
    m.add_argument("--out", required=True)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """``sample`` or ``summarize``, as the command line says."""
    args = _parser().parse_args(argv)
    if args.command == "summarize":
        summary = summarize(Path(args.out))
        print(json.dumps(summary, indent=1))
        src = summary["by_source"]
        print(f"mps_evidence: {summary['clients_by_evidence']} of {summary['packed_processes']} "
              f"packed trial processes were clients of a live MPS daemon by the evidence "
              f"(get_client_list {src['get_client_list']}, NVML {src['nvml_mps']})"
              + "".join(f"; {note}" for note in summary["missing"]))
        return 0
    stop = threading.Event()
    sampler = Sampler(args, None if args.no_nvml else load_nvml())
    # One round needs no stopping; a caller's own handlers are put back after.
    previous = {} if args.once else {sig: signal.signal(sig, lambda *_: stop.set())
                                     for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        sampler.run(stop)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0


if __name__ == "__main__":
    sys.exit(main())
