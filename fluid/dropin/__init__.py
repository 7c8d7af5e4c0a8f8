"""The drop-in suite: user scripts and Ray's own shipped Tune examples, each runnable under
plain Tune and under ``FluidExecutor()`` with nothing else changed, and what a user would see of
each run. ``tests/dropin`` asserts what Fluid keeps of plain Tune's behaviour; ``fluid bench
dropin`` measures their wall times and trials at once side by side."""
