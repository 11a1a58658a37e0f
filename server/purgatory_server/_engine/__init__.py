"""The in-process engine: timing wheel, SystemTimer, DelayedOperation, purgatory.

Pure Python; imports neither grpc nor the service.
"""
