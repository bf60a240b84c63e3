"""How tensors leave the process: TensorData encoding and reading, /dev/shm segments, and the
RDMA lane over NIXL.

Dependencies point one way (tests/test_layout.py keeps it so), bottom first:

- ``errors``: TensorError and the shm errors; ``dtypes``: TensorData dtype names.
- ``background``: slow releases off the request path.
- ``shm_owner``: segment names, producer liveness (lock files), the sweeper of dead producers.
- ``shm_segment``: one segment (create, publish, close); ``shm_pool``: ready-made segments.
- ``shm``: the registry of owned segments, and the public shm names in one place.
- ``rdma``: exporter and puller (uses errors and dtypes, never shm or tensors).
- ``tensors``: TensorData encode / :func:`~smg_fast.transport.tensors.read_tensor` (shm, and
  rdma lazily for remote payloads, so NIXL is imported only when a remote tensor is read).

Nothing here imports ``smg_fast.server`` or ``smg_fast.processors``. The old flat paths
(``smg_fast.shm``, ``smg_fast.tensors``, ``smg_fast.rdma``...) are compatibility aliases.
"""
