"""Configuration and the process around the server.

- ``server_config``: defaults, TOML file, ``PURGATORY_*`` environment overrides, limits;
- ``settings_spec``: each purgatory setting declared once (type, default, bounds, wire);
- ``auth``: bearer tokens with per-purgatory permissions (configuration and checks);
- ``logs``: lifecycle lines, rate-limited warnings, the JSON line format;
- ``native_logs``: gRPC core's own stderr lines turned into log records (JSON logs);
- ``process_tuning``: the process's collector and GIL settings;
- ``fd_limits``: the open-files limit, raised at start, and the connection cap below it;
- ``cluster_config``: the ``[cluster]`` table (replicated purgatories; no NATS import).
"""
