"""Python clients for the Purgatory gRPC service."""

__all__: list[str] = []
