"""Generated protobuf / gRPC stubs for proto/smg_fast/v1 (package ``smg_fast.v1``).

Do not edit: regenerate with ``python proto/generate.py`` (tests/package/test_proto_stubs.py
fails when these files are stale). Needs the ``server`` extra (grpcio, protobuf).
"""

from . import preprocessor_pb2, preprocessor_pb2_grpc, tensor_pb2

__all__ = ["preprocessor_pb2", "preprocessor_pb2_grpc", "tensor_pb2"]
