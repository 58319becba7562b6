"""perfsuite-triton: Triton kernel workloads shipped as a separately installed perfsuite plugin.

Importing this package (or :mod:`perfsuite_triton.plugin`) imports neither torch nor
triton, so ``perfsuite list`` stays fast; the kernels in :mod:`perfsuite_triton.kernels`
import triton when they are imported themselves.
"""

__version__ = "0.1.0"
