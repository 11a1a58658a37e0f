// What both sides of bench/bullmq_bench.py share: the workload's due times, the
// measurements and the one JSON line each run prints.
"use strict";

/** `jobs` due times (epoch ms): `leadMs` from now, spread evenly over `spreadMs`. */
function dueTimes(cfg, now) {
  const start = now + cfg.leadMs;
  return Array.from({ length: cfg.jobs }, (_, i) =>
    Math.round(start + (cfg.spreadMs * i) / Math.max(1, cfg.jobs - 1)),
  );
}

/** Collects each delivery's lateness (received - due) and each ack's time. */
class Meter {
  constructor(jobs) {
    this.jobs = jobs;
    this.lateness = [];
    this.acked = 0;
    this.firstDue = Infinity;
    this.lastAck = 0;
    this.done = new Promise((resolve) => (this.resolve = resolve));
  }

  delivered(dueMs) {
    this.lateness.push(Date.now() - dueMs);
    if (dueMs < this.firstDue) this.firstDue = dueMs;
  }

  ackedNow(n = 1) {
    this.acked += n;
    this.lastAck = Date.now();
    if (this.acked >= this.jobs) this.resolve();
  }

  report(extra) {
    const sorted = [...this.lateness].sort((a, b) => a - b);
    const q = (p) => sorted[Math.max(0, Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1))];
    const window = (this.lastAck - this.firstDue) / 1000;
    return {
      acked: this.acked,
      deliveries: this.lateness.length,
      window_s: window,
      acked_per_s: this.acked / Math.max(window, 0.001),
      lateness_p50_ms: q(0.5),
      lateness_p99_ms: q(0.99),
      lateness_max_ms: sorted[sorted.length - 1],
      ...extra,
    };
  }
}

/** Resolves with `meter.done`, or rejects after `ms` (a stuck run fails, never hangs). */
function within(meter, ms) {
  return Promise.race([
    meter.done,
    new Promise((_, reject) =>
      setTimeout(() => reject(new Error(`only ${meter.acked} of ${meter.jobs} acked`)), ms).unref(),
    ),
  ]);
}

module.exports = { Meter, dueTimes, within };
