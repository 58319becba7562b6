"""Triton kernels, one module each, with a plain-Python launcher that checks its arguments.

Importing a kernel module imports triton and decorates its kernels: triton decides *then*
whether they run compiled on a GPU or through its CPU interpreter, from the environment
variable ``TRITON_INTERPRET`` — set it before the first import. Each module's
``INTERPRETED`` says which way it went.
"""
