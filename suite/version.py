"""perfsuite's version, in a module of its own so that the host's modules can name it without
importing the package's public API (``perfsuite/__init__``), which imports them lazily."""

__version__ = "0.1.0"
