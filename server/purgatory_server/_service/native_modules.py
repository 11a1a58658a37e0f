"""The service's modules compiled with mypyc, in the engine's extension group.

The hot path of a watch, a signal and an outcome (docs/benchmarks.md has what compiling
them buys): operations and their progress, the operation table, the budget, the feed and
its retained window, the sizes, the protobuf conversion and checks, and the packing of
Session messages. Left interpreted: the Session's stream and outbound half (compiled, a
cancelled stream let ``CancelledError`` escape its clean-up: the Session tests fail) and
the dedup window (compiled, each remembered entry re-boxes its integers: several objects
more per finished id than interpreted).

``setup.py`` reads :data:`MODULES` from this file alone (it imports nothing), and the
service's ``__init__`` hands it to the engine's ``_native.install`` so that
``PURGATORY_PURE_PYTHON=1`` loads their sources too.

Rules for a module listed here are the engine's (``_engine/_native.py``): a class that
Python code subclasses carries ``mypyc_attr(allow_interpreted_subclasses=True)``, and no
class has a Python base (``ABC``, ``Generic[T]``).
"""

MODULES: tuple[str, ...] = (
    "purgatory_server._service.model.sizes",
    "purgatory_server._service.outcomes.event_log",
    "purgatory_server._service.outcomes.feed",
    "purgatory_server._service.core.budget",
    "purgatory_server._service.core.progress",
    "purgatory_server._service.core.operation",
    "purgatory_server._service.core.operation_table",
    "purgatory_server._service.core.named_purgatory",
    "purgatory_server._service.wire.convert",
    "purgatory_server._service.wire.validation",
    "purgatory_server._service.api.session_messages",
)
