"""Every tuning constant of Fluid, in one frozen config with one set of defaults.

``PolicyConfig`` holds what a TrialGroup is planned with (``c``, ``d``, ``eps``, thresholds);
``Tunables`` holds the constants of the time-to-target rules around StaticFluid and DynamicFluid
(``fluid.core.policy``), of the executor's estimates and of its bookkeeping. FluidExecutor takes
one (``FluidExecutor(tunables=Tunables(...))``); its options ``o_th``, ``c_max`` and
``default_iteration_time`` set the fields of the same name.

Two objectives, two packing thresholds: ``makespan_o_th`` and ``makespan_c_max`` (the defaults of
``PolicyConfig``, what ``fluid profile`` and ``fluid plan`` use) serve the paper's objective, a
group's makespan, for which packing pays as soon as it adds throughput, and ``fluid profile``
reports what the hardware allows under it. ``o_th`` and ``c_max`` serve FluidExecutor's time
to target: a packed trial that turns out to be the winner reaches the target later, so it packs
only where the measured gain is large, and a profile's ``c`` only caps what that allows. Where
every trial runs its whole budget (a grid or a random search under FIFO) the answer comes with
the last trial, its makespan: FluidExecutor packs those under ``makespan_o_th`` (and
``c_max``). ``s_th`` serves both.

Example:
    >>> Tunables().resize_gain
    2.0
    >>> Tunables(probe_d=1)
    Traceback (most recent call last):
    ...
    ValueError: probe_d must be >= 2, got 1
"""

from __future__ import annotations

from dataclasses import dataclass

from fluid.core.checks import check_number


@dataclass(frozen=True)
class Tunables:
    """The constants of FluidExecutor's policy, estimates and bookkeeping (one default each).

    Attributes:
        o_th: ``O_th`` of the time-to-target objective: two trials share a GPU only if
            ``1 - alpha_i / 2 > o_th``, i.e. ``alpha_i < 1.2`` (packing the eventual winner
            delays the target more than packing gains).
        c_max: most trials on one GPU: published training measurements stop at two per GPU.
        s_th: ``S_th``: a worker joins a gang only if it adds at least 5% throughput.
        makespan_o_th: ``O_th`` of a group's makespan (and of FluidExecutor's trials where
            all run their whole budget): a trial is packed onto a GPU only if it
            adds at least 10% to the GPU's throughput (MPS interference is noisy: a margin
            well above measurement noise; the paper gives no ``O_th``).
        makespan_c_max: most trials on one GPU for a group's makespan, even when packing looks
            free: each process holds a CUDA context of several hundred MB (MPS allows 16
            clients before Volta, 48 after).
        priority_alpha: a trial the algorithm waits on (priority > 0) is packed only if its own
            measured ``alpha_i`` is below this (packing it must cost next to nothing).
        resize_gain: a resize is made only if it gains this many ``eps``: two pay for the
            resize and for the one that undoes it if the estimates it rests on prove wrong
            (a margin many times the cost would forgo all but a few ``eps`` of net gain at
            its threshold: the outcome would jump there as the measured cost moves).
        idle_gain: the margin when a plan only grows trials into GPUs that nobody waits for
            nor will: no other trial moves, nothing moves back: break-even, one ``eps``.
        max_resizes: most resizes of one trial while its budget (its rung) stays the same.
        probe_d: width of a gang probe: the narrowest gang that measures ``beta_i``.
        probe_min_eps: a trial is probed only with at least this many restarts and half
            iterations of one-GPU work left (``probe_min_eps x (eps + h / 2)``): a probe that
            gains nothing costs two restarts and up to one iteration
            (``fluid.core.policy.probe_cost``), then at most ``2 / probe_min_eps`` of it.
        probe_stop: no more probes once the trials measured so far make a gang of
            ``probe_d`` take more than this share of one GPU's time (one experiment's
            configurations share a model family and hardware: they scale alike).
        round_share: small changes re-plan a group once they are this share of its running
            trials (each re-plan visits all of them).
        prior_alpha: ``alpha`` of an unmeasured trial: two on a GPU gain nothing, so it runs
            alone, as under plain Tune.
        prior_beta: ``beta`` of an unmeasured trial: a gang of two is no faster than one GPU.
        probe_pairs: without a profile, pairs of trials the algorithm does not wait on packed
            in all to measure packing against the trials alone, while that estimate's
            interval leaves undecided whether a fresh trial is packed (two: the comparison
            needs two trials packed at least, and one pair's two share one GPU's luck); where
            packing does not pay, that is all the measurement costs.
        prior_alpha_spread: standard deviation of ``log alpha`` under the prior: its 95%
            interval, ``prior_alpha`` times or over ``exp(1.96 x 0.354) = 2``, runs from free
            packing (``alpha = 1``, the least there is) to a pair each running at a quarter of
            its speed alone. A measurement moves the prior by its precision against this.
        prior_beta_spread: standard deviation of ``log beta_i`` across one experiment's
            configurations before trials measured theirs: a resize judges a trial's unmeasured
            ``beta_i`` at ``beta x exp(1.96 x 0.1)``, a gang of two 22% slower (configurations
            of one model family differ in batch and model size, which set a gang's share of
            communication).
            The spread the trials' own ``beta_i`` show is pooled with it.
        prior_weight: how many samples the experiment's ``alpha`` is worth when a trial's own
            estimate is shrunk towards it (one: a single measurement moves it half way, in
            log space), and ``prior_beta_spread`` when it is pooled with measured ones.
        default_eps: seconds a resize is assumed to cost before a resize or a start is
            measured (a restart of a small model on Ray).
        default_iteration_time: one-GPU seconds per iteration before any trial reported (only
            ratios between trials matter, so budgets decide the first plan).
        samples_kept: recent iteration times kept per trial and per width (iteration times
            drift: warm-up, data loading).
        refine_samples: a trial's own ``alpha_i``/``beta_i`` is recomputed at each of its
            first this many clean samples at a width (and at each new width), then kept:
            results arrive constantly, and later samples move a median little.
        eps_samples_kept: recent resize (and start) costs kept for the measured ``eps``.
        eligible_scan: most held trials the base scheduler is asked about per controller step
            (bounds the work with 10,000-trial groups).
        save_every_s: least seconds between two unforced writes of ``fluid_state.json``.
        save_share: an unforced write waits at least this many times its own duration (the
            state grows with every trial: writes stay a small share of the driver's time).
        resources_refresh_s: seconds between two reads of the cluster's resources (a read asks
            Ray's control store; nodes join or leave far less often).
        oom_share_growth: a packed trial that ran out of GPU memory is retried on this many
            times its share (at most a whole GPU): doubling reaches a whole GPU from an
            eighth in three retries, each on a share the failure showed too small.
        outside_settle_s: seconds GPUs must stay held by others than the experiment's trials
            (another job, an unmarked Ray Train trainer's workers) before the plan leaves them
            out: a trial starting or stopping holds GPUs for a moment that Fluid's records do
            not show, and the cluster's use is read only every ``resources_refresh_s``.
        gpu_memory_headroom: share of a GPU's free memory, as NVML reports it when the
            experiment first uses its node, that packed trials' peaks leave free
            (``gpu_memory`` not given): the MPS server's own memory, the allocator's
            fragmentation, and a peak a trial reaches after it was measured.
        pinned_memory_margin: share above a packed trial's measured peak that its MPS client
            may pin (``CUDA_MPS_PINNED_DEVICE_MEM_LIMIT``): room for the variation of one
            trial's peak between runs, so that only a trial that outgrows its place runs out
            of memory (and is retried on a larger share), never its neighbour.
    """

    o_th: float = 0.4
    c_max: int = 2
    s_th: float = 0.05
    makespan_o_th: float = 0.10
    makespan_c_max: int = 8
    priority_alpha: float = 1.05
    resize_gain: float = 2.0
    idle_gain: float = 1.0
    max_resizes: int = 2
    probe_d: int = 2
    probe_min_eps: float = 80.0
    probe_stop: float = 0.9
    round_share: float = 0.1
    prior_alpha: float = 2.0
    prior_beta: float = 2.0
    probe_pairs: int = 2
    prior_alpha_spread: float = 0.354
    prior_beta_spread: float = 0.1
    prior_weight: float = 1.0
    default_eps: float = 5.0
    default_iteration_time: float = 1.0
    samples_kept: int = 5
    refine_samples: int = 3
    eps_samples_kept: int = 10
    eligible_scan: int = 256
    save_every_s: float = 2.0
    save_share: float = 1000.0
    resources_refresh_s: float = 5.0
    outside_settle_s: float = 15.0
    oom_share_growth: float = 2.0
    gpu_memory_headroom: float = 0.1
    pinned_memory_margin: float = 0.25

    def __post_init__(self) -> None:
        for name in ("o_th", "s_th", "makespan_o_th"):
            check_number(name, getattr(self, name), 0, 1, high_open=True)
        for name in ("c_max", "makespan_c_max"):
            check_number(name, getattr(self, name), 1, integer=True)
        check_number("priority_alpha", self.priority_alpha, 1)
        check_number("resize_gain", self.resize_gain, 0)
        check_number("idle_gain", self.idle_gain, 0)
        check_number("max_resizes", self.max_resizes, 0, integer=True)
        check_number("probe_d", self.probe_d, 2, integer=True)
        check_number("probe_min_eps", self.probe_min_eps, 0)
        check_number("probe_stop", self.probe_stop, 0)
        check_number("round_share", self.round_share, 0)
        check_number("prior_alpha", self.prior_alpha, 1)
        check_number("prior_beta", self.prior_beta, 1)
        check_number("prior_weight", self.prior_weight, 0, low_open=True)
        check_number("prior_alpha_spread", self.prior_alpha_spread, 0, low_open=True)
        check_number("prior_beta_spread", self.prior_beta_spread, 0)
        check_number("default_eps", self.default_eps, 0, unit="seconds")
        check_number("default_iteration_time", self.default_iteration_time, 0, low_open=True,
                     unit="seconds")
        for name in ("samples_kept", "eps_samples_kept", "eligible_scan", "probe_pairs",
                     "refine_samples"):
            check_number(name, getattr(self, name), 1, integer=True)
        check_number("save_every_s", self.save_every_s, 0, unit="seconds")
        check_number("save_share", self.save_share, 0)
        check_number("resources_refresh_s", self.resources_refresh_s, 0, unit="seconds")
        check_number("outside_settle_s", self.outside_settle_s, 0, unit="seconds")
        check_number("oom_share_growth", self.oom_share_growth, 1, low_open=True)
        check_number("gpu_memory_headroom", self.gpu_memory_headroom, 0, 1, high_open=True)
        check_number("pinned_memory_margin", self.pinned_memory_margin, 0)


#: Every constant at its default, for the signatures that need a value (``PolicyConfig``,
#: ``fluid.core.overheads``, the profiler).
DEFAULTS = Tunables()
