"""Hand-written CPU kernels, compiled on first use (:mod:`autorec.native.build`).

Each is here because no library does it well on the CPU, measured in BENCHMARKS.md:

- ``rowwise_adagrad.cpp``: the fused tables' row-wise Adagrad in one pass (called by
  :mod:`autorec.train.native_update`);
- ``pair_dots.cpp`` (:mod:`autorec.native.pair_dots`): DLRM's pairwise dots, forward and backward;
- ``layer_norm.cpp`` (:mod:`autorec.native.layer_norm`): LayerNorm over rows of up to 64 floats
  (DHEN's over D, and Wukong's where its layer runs in torch's ops), forward and backward;
- ``pooled_lookup.cpp`` (:mod:`autorec.train.native_lookup`): the fused tables' pooled lookup;
- ``wukong_layer.cpp`` (:mod:`autorec.native.wukong_layer`): Wukong's layer around its MLP, one
  pass before it (the maps over the feature axis, the FM and its LayerNorm) and one after it (the
  LCB rows, the residual and the LayerNorm over D), forward and backward.

Every caller keeps a torch path for where a kernel cannot be built (no C++ compiler,
``AUTOREC_NATIVE=0``) or does not apply (other dtypes, devices, layouts).
"""
