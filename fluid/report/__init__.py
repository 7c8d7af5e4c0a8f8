"""Plots of experiment runs (``fluid report``): what a tuning run did, readable without code.

Input: result directories written by ``python -m experiments.run`` (each holds ``run.json``;
its format is documented in ``experiments.record``), or any Ray Tune experiment directory
(read from Tune's own files, see :func:`load_tune_experiment`). Output: PNG files.

* ``best_metric.png``: best metric so far against wall-clock time, one line per run (the
  paper's Figures 9-10), one panel per task, with the task's target;
* ``utilization-<run>.png``: a heatmap per run, one row per GPU, colour = NVML utilisation, or,
  without NVML, the GPU share allocated to trials (the paper's Figures 2 and 6);
* ``gpu_use-<run>.png`` (Tune directories, which record widths but not GPU ids): GPUs
  allocated to trials over time;
* ``shapes-<run>.png``: a timeline per run, one row per trial, coloured by the shape it ran at
  (packed on a GPU share, one GPU, or a gang of w GPUs), ticks at reported iterations.

matplotlib is an optional dependency (``pip install matplotlib``, or ``pip install '.[plot]'``
from a checkout); it is imported on first use, with the Agg backend. Every PNG carries its
series in its text metadata (``fluid:series`` = count, ``fluid:labels`` = JSON list), so tests
and scripts can check a plot without image analysis (:func:`png_text` reads them back and checks the file is a valid PNG).
"""

from fluid.report._plots import (
    Plot,
    gpu_use,
    plot_best_metric,
    plot_gpu_use,
    plot_shapes,
    plot_utilization,
    write_report,
)
from fluid.report._runs import load_runs, png_text, run_labels
from fluid.report._tune import ReportError, is_tune_experiment, load_tune_experiment

__all__ = [
    "Plot",
    "ReportError",
    "gpu_use",
    "is_tune_experiment",
    "load_runs",
    "load_tune_experiment",
    "plot_best_metric",
    "plot_gpu_use",
    "plot_shapes",
    "plot_utilization",
    "png_text",
    "run_labels",
    "write_report",
]
