"""What a trial's request asks for beside CPUs and GPUs, kept in every shape Fluid gives it.

A request may name the GPU model (``accelerator_type:A100``, Ray's resource for it) and custom
resources (``{"license": 1}``, ``memory``). Fluid re-sizes trials in GPUs; the rest of the
request must follow, or a resized trial could land on another GPU model, or skip a resource the
user counts on. Two parts are kept apart:

* ``head``: the extras of the trainable's own bundle (bundle 0), which stay in the bundle the
  trainable runs in;
* ``per_gpu``: the extras of the GPU bundles (``accelerator_type:*`` keys anywhere, and a
  worker bundle's custom resources), which go into every bundle that holds a GPU.

Pure Python: no Ray.

Example:
    >>> extras = extras_of([{"CPU": 1, "GPU": 1, "accelerator_type:A100": 0.001, "lic": 1}])
    >>> extras
    Extras(head={'lic': 1.0}, per_gpu={'accelerator_type:A100': 0.001})
    >>> with_extras([{"CPU": 1}, {"CPU": 1, "GPU": 1}, {"CPU": 1, "GPU": 1}], extras)[:2]
    [{'CPU': 1, 'lic': 1.0}, {'CPU': 1, 'GPU': 1, 'accelerator_type:A100': 0.001}]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

#: Ray's resource naming a node's accelerator model (``accelerator_type:A100``).
ACCELERATOR_PREFIX = "accelerator_type:"
#: The resources Fluid sizes itself; everything else in a request is an extra.
SIZED = frozenset({"CPU", "GPU"})


@dataclass(frozen=True)
class Extras:
    """Resources of a request beside CPUs and GPUs (module docstring)."""

    head: dict[str, float] = field(default_factory=dict)
    per_gpu: dict[str, float] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.head or self.per_gpu)


def extras_of(bundles: Sequence[Mapping[str, float]]) -> Extras:
    """The extras of a request's bundles (``Extras()`` when it has none)."""
    head: dict[str, float] = {}
    per_gpu: dict[str, float] = {}
    for i, bundle in enumerate(bundles):
        for key, value in bundle.items():
            if key in SIZED:
                continue
            if key.startswith(ACCELERATOR_PREFIX) or i > 0:
                per_gpu[key] = max(per_gpu.get(key, 0.0), float(value))
            else:
                head[key] = float(value)
    return Extras(head, per_gpu)


def with_extras(bundles: list[dict[str, float]], extras: Extras | None) -> list[dict[str, float]]:
    """``bundles`` with ``extras`` added: ``head`` to bundle 0, ``per_gpu`` to each GPU bundle.

    A bundle with no GPU and no extras stays as it is; the input is not changed.
    """
    if not extras:
        return bundles
    out = []
    for i, bundle in enumerate(bundles):
        new = dict(bundle)
        if i == 0:
            new.update(extras.head)
        if new.get("GPU", 0) > 0:
            new.update(extras.per_gpu)
        out.append(new)
    return out
