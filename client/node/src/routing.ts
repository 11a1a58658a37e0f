/**
 * Following a replicated purgatory to its owner (docs/scale-out.md §6), as the Python
 * clients do (purgatory_client/_routing.py).
 *
 * A server that does not own a replicated purgatory answers UNAVAILABLE with trailing
 * metadata `purgatory-owner: host:port`. The client re-sends the call there at once,
 * remembers the route per purgatory, and sends that purgatory's later unary calls
 * straight to the owner. A routed call that fails UNAVAILABLE without a new owner drops
 * the route and goes back to the client's own target; so does one that ended
 * DEADLINE_EXCEEDED or whose connection failed its keepalive pings (KEEPALIVE_OPTIONS in
 * base.ts). At most MAX_HOPS re-sends per attempt; a stream's budget starts over after
 * each backoff, so nothing stays parked on a dead owner.
 * `subscribe` is routed the same way: its stream is opened on the route and a refusal is
 * followed at once; the resume position and incarnation carry over, so a stream cut by a
 * takeover resumes at the new owner with no gap and no repeat.
 */
import { Metadata, status as Status } from "@grpc/grpc-js";

/** Trailing metadata of UNAVAILABLE from a server that does not own the purgatory. */
export const OWNER = "purgatory-owner";
export const MAX_HOPS = 3;
/** How long an owner that failed a routed call is not followed when a server names it. */
export const SUSPECT_MS = 2000;

const NAMED_BY_NAME = new Set(["GetPurgatory", "CreatePurgatory", "DeletePurgatory"]);

/** The purgatory a request is about ("" for calls that name none). */
export function purgatoryOf(method: string, request: unknown): string {
  const req = (request ?? {}) as { purgatory?: unknown; name?: unknown };
  const value = NAMED_BY_NAME.has(method) ? req.name : req.purgatory;
  return typeof value === "string" ? value : "";
}

/** The owner an UNAVAILABLE error names in its trailers, or "". */
export function ownerHint(err: unknown): string {
  const e = err as { code?: number; metadata?: Metadata };
  if (e?.code !== Status.UNAVAILABLE || !(e.metadata instanceof Metadata)) return "";
  const values = e.metadata.get(OWNER);
  return values.length > 0 ? String(values[0]) : "";
}

/** Per-purgatory routes and the stubs of owners; `makeStub` builds one for an address. */
export class Router<S extends { close(): void }> {
  readonly routes = new Map<string, string>();
  private readonly stubs = new Map<string, S>();
  /** Owners that failed a routed call lately -> until when (ms epoch) hints to them are ignored. */
  private readonly failed = new Map<string, number>();

  constructor(private readonly makeStub: (address: string) => S) {}

  /** The owner's stub for this purgatory, or undefined to use the client's own. */
  stubFor(purgatory: string): S | undefined {
    const address = purgatory ? this.routes.get(purgatory) : undefined;
    if (address === undefined) return undefined;
    let stub = this.stubs.get(address);
    if (stub === undefined) {
      stub = this.makeStub(address);
      this.stubs.set(address, stub);
    }
    return stub;
  }

  /**
   * After `err`: true if the call should be sent again (to the new route). `sentTo` is
   * the route the call went to ("" for the client's own target; left out: the current
   * route): a hint naming another server is followed even if a concurrent call has
   * already cached it.
   *
   * A route whose owner failed the call (UNAVAILABLE without a new owner: it is gone, or
   * its keepalive pings went unanswered; DEADLINE_EXCEEDED: it did not answer in time)
   * is dropped whatever the hop count, so the next attempt re-resolves the owner through
   * the client's own target; for SUSPECT_MS after, a server that still names that owner
   * is not followed there. At the hop limit no hint is taken: the caller's next attempt
   * (after its backoff) starts from its own target with a fresh hop budget.
   */
  reroute(purgatory: string, err: unknown, hop: number, sentTo?: string): boolean {
    if (!purgatory) return false;
    const code = (err as { code?: number })?.code;
    const owner = ownerHint(err);
    const routed = sentTo === undefined ? this.routes.get(purgatory) : sentTo;
    if (routed && !owner && (code === Status.UNAVAILABLE || code === Status.DEADLINE_EXCEEDED)) {
      this.drop(purgatory, routed);
      return code === Status.UNAVAILABLE && hop < MAX_HOPS;
    }
    if (hop >= MAX_HOPS || !owner) return false;
    if (owner === routed || this.failedLately(owner)) return false;
    this.routes.set(purgatory, owner);
    return true;
  }

  /** Forget the route if it still leads to `address`; do not follow hints to it a while. */
  drop(purgatory: string, address: string): void {
    if (this.routes.get(purgatory) === address) this.routes.delete(purgatory);
    this.failed.set(address, Date.now() + SUSPECT_MS);
  }

  private failedLately(address: string): boolean {
    const until = this.failed.get(address);
    if (until === undefined) return false;
    if (Date.now() < until) return true;
    this.failed.delete(address);
    return false;
  }

  close(): void {
    for (const stub of this.stubs.values()) stub.close();
    this.stubs.clear();
  }
}
