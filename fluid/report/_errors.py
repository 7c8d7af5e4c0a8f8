"""The error ``fluid report`` raises for what it cannot plot."""


class ReportError(ValueError):
    """A run directory or record cannot be plotted; the message says why."""
