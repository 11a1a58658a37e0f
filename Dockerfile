# The purgatory gRPC server: slim Python, non-root, health-checked.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

RUN groupadd --system --gid 10001 purgatory \
    && useradd --system --uid 10001 --gid 10001 --home-dir /app --shell /usr/sbin/nologin purgatory \
    && install -d -o 10001 -g 10001 /var/lib/purgatory

WORKDIR /app
COPY . /src
# The server, the client (whose `purgatory health` is the health check) and the
# observability extra (metrics and traces; off unless PURGATORY_METRICS_LISTEN etc. are set).
RUN pip install "/src[server,client,observability]" && rm -rf /src

USER 10001:10001
EXPOSE 50051
# Prometheus metrics, when PURGATORY_METRICS_LISTEN=0.0.0.0:9464 is set.
EXPOSE 9464
# Listen on every interface inside the container; override with PURGATORY_* variables.
# Durable purgatories journal under /var/lib/purgatory: mount a volume there to keep them
# across container restarts (the non-root user owns it).
ENV PURGATORY_LISTEN=0.0.0.0:50051 \
    PURGATORY_DATA_DIR=/var/lib/purgatory
VOLUME ["/var/lib/purgatory"]

# The health check probes the port PURGATORY_LISTEN names (so `-e PURGATORY_LISTEN=...`
# moves it too), on loopback. Under TLS set PURGATORY_TLS_CA to a CA that signed a
# certificate valid for 127.0.0.1 (the CLI reads it), or replace this with --no-healthcheck
# or your own HEALTHCHECK.
HEALTHCHECK --interval=10s --timeout=5s --start-period=5s --retries=3 \
    CMD ["sh", "-c", "exec purgatory --target \"127.0.0.1:${PURGATORY_LISTEN##*:}\" ${PURGATORY_TLS_CA:+--tls-ca \"$PURGATORY_TLS_CA\"} health"]

STOPSIGNAL SIGTERM
ENTRYPOINT ["purgatory-server"]
