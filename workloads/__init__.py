"""perfsuite's built-in workloads, one sub-package per category (``kernels``, ``collectives``
...). Each sub-package is a plugin module registered through the same hooks as third-party
plugins (see ``perfsuite.plugins.DEFAULT_PLUGINS``). Importing them must stay cheap: torch and
other heavy packages are imported inside the workloads' methods."""
