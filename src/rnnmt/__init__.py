"""rnnmt: reference replication of attention-based neural machine translation."""

__version__ = "0.1.0"
