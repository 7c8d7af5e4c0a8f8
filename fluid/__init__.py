"""Fluid: a resource-aware execution engine for hyperparameter tuning on Ray Tune.

Fluid sizes every trial of a TrialGroup (a fraction of a GPU, one GPU, or an elastic gang of
GPUs) so the group finishes as soon as possible, while the tuning algorithm keeps deciding
*what* to train. See README.md.
"""

__version__ = "0.1.0"
