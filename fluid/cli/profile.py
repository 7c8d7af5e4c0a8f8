"""``fluid profile``: measure a trainable's alpha, c, beta, d (cached for later sessions)."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from typing import Any

from fluid.cli import print_json, ray_instance
from fluid.core.checks import check_number


def register(subparsers: Any) -> None:
    """Add ``fluid profile``."""
    p = subparsers.add_parser(
        "profile",
        help="measure a trainable's packing (alpha, c) and scaling (beta, d) overheads",
        description="Run TRAINABLE (module:function) as 1..P trials sharing one GPU and as "
        "gangs of 1..W GPUs; print alpha, c, beta, d. Results are cached by trainable, config "
        "and device model. Starts a local Ray instance with logical GPUs unless --address.",
    )
    p.add_argument("trainable", help="import path of the trainable, e.g. mypkg.train:loop")
    p.add_argument("--config", default="{}", help="JSON config of the profiled trial")
    p.add_argument("--iterations", type=int, default=4, help="per run (default %(default)s)")
    p.add_argument("--max-pack", type=int, default=4, help="P (default %(default)s)")
    p.add_argument("--max-workers", type=int, default=2, help="W (default %(default)s)")
    p.add_argument("--gpus", type=int, default=4, help="logical GPUs of the local Ray instance")
    p.add_argument("--address", default=None, help="connect to this Ray cluster instead")
    p.add_argument("--cache", default=None, help="cache file (default ~/.cache/fluid/...)")
    p.add_argument("--refresh", action="store_true", help="measure even if cached")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def _import(path: str) -> Any:
    """``MODULE:NAME``, with the current folder importable (as ``python -m`` does)."""
    module, sep, name = path.partition(":")
    if not sep or not module or not name:
        raise ValueError(f"trainable must be MODULE:NAME, got {path!r}")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())  # Ray passes the driver's sys.path on to its workers
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as e:
        raise ValueError(f"cannot import trainable {path!r}: {e}") from None


def run(args: argparse.Namespace) -> int:
    """Profile and print; returns the exit code."""
    try:
        config = json.loads(args.config)
    except ValueError as e:
        raise ValueError(f"--config must be a JSON object, got {args.config!r} ({e})") from None
    if not isinstance(config, dict):
        raise ValueError(f"--config must be a JSON object, got {args.config!r}")
    for name, value, low in (("--iterations", args.iterations, 2),
                             ("--max-pack", args.max_pack, 1),
                             ("--max-workers", args.max_workers, 1), ("--gpus", args.gpus, 1)):
        check_number(name, value, low, integer=True)
    if args.max_workers > args.gpus and not args.address:
        raise ValueError(f"--max-workers must be <= --gpus ({args.gpus}), got {args.max_workers}")
    trainable = _import(args.trainable)
    from fluid.tune.profiler import DEFAULT_CACHE, profile

    with ray_instance(args.gpus, address=args.address, quiet=False):
        prof = profile(
            trainable, config, iterations=args.iterations, max_pack=args.max_pack,
            max_workers=args.max_workers, cache=args.cache or DEFAULT_CACHE,
            refresh=args.refresh, progress=lambda line: print(line, file=sys.stderr, flush=True),
        )
    if args.json:
        print_json(prof.to_json())
        return 0
    kind = "CPU numbers (no GPU: trials shared CPU cores)" if prof.device.startswith("cpu") else \
        "GPU numbers"
    print(f"device: {prof.device} ({kind})")
    print(f"packing ({'under MPS' if prof.sharing == 'mps' else prof.sharing}): "
          + ", ".join(f"p={p}: {t:.3f}s" for p, t in prof.pack_times.items()))
    print("gangs:   " + ", ".join(f"w={w}: {t:.3f}s" for w, t in prof.gang_times.items()))
    if prof.alphas:
        print("alpha per packing degree (T^p = T^1 alpha_p^(p-1)): "
              + ", ".join(f"p={p}: {a:.3f}" for p, a in sorted(prof.alphas.items())))
    print(f"alpha = {prof.alpha:.3f} (of the pair)   c = {prof.c}   beta = {prof.beta:.3f}   "
          f"d = {prof.d}")
    return 0
