"""reynd: durable state of agent runs, with time travel."""

__version__ = "0.1.0"
