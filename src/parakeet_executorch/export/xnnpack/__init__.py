"""Everything XNNPACK-specific in the export, one module per job.

* :mod:`.encoder_forwards`: ``xnnpack_friendly_encoder``, forward swaps of NeMo encoder submodules while the encoder
  is traced (layer norm as GEMMs, 3-D attention, GLU as two convolutions, broadcast masks).
* :mod:`.view_rewrites`: ``rewrite_views``, reshapes with one run-time size written with ``-1``.
* :mod:`.partitioner`: ``xnnpack_partitioner``, executorch's ``XnnpackPartitioner`` leaving scalar-only partitions
  to the portable kernels.
* :mod:`.shortcuts`: patches of executorch 1.5.1's lowering that skip work which cannot change the .pte
  (version-checked: on another executorch they turn themselves off).

Inspection helpers for tests and benchmarks are in ``parakeet_executorch.testing.xnnpack_inspect``.
"""
