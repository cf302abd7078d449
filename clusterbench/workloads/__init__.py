"""Workloads: the protocol any program speaks to be probed (protocol.py), clusterbench's CuPy
cluster finder (cupy/), the model of aare's CUDA finder (aare/), and what they share.
"""
