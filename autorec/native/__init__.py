"""Hand-written CPU kernels, compiled on first use (:mod:`autorec.native.build`).

Each is here because no library does it well on the CPU, measured in BENCHMARKS.md:

- ``rowwise_adagrad.cpp``: the fused tables' row-wise Adagrad in one pass (called by
  :mod:`autorec.train.native_update`);
- ``pair_dots.cpp`` (:mod:`autorec.native.pair_dots`): DLRM's pairwise dots, forward and backward;
- ``layer_norm.cpp`` (:mod:`autorec.native.layer_norm`): LayerNorm over rows of up to 64 floats
  (Wukong's and DHEN's over D), forward and backward.

Every caller keeps a torch path for where a kernel cannot be built (no C++ compiler,
``AUTOREC_NATIVE=0``) or does not apply (other dtypes, devices, layouts).
"""
