/**
 * Following a replicated purgatory to its owner (docs/scale-out.md §6), as the Python
 * clients do (purgatory_client/_routing.py).
 *
 * A server that does not own a replicated purgatory answers UNAVAILABLE with trailing
 * metadata `purgatory-owner: host:port`. The client re-sends the call there at once,
 * remembers the route per purgatory, and sends that purgatory's later unary calls
 * straight to the owner. A routed call that fails UNAVAILABLE without a new owner drops
 * the route and goes back to the client's own target. At most MAX_HOPS re-sends per call.
 * `subscribe` is routed the same way: its stream is opened on the route and a refusal is
 * followed at once; the resume position and incarnation carry over, so a stream cut by a
 * takeover resumes at the new owner with no gap and no repeat.
 */
import { Metadata, status as Status } from "@grpc/grpc-js";

/** Trailing metadata of UNAVAILABLE from a server that does not own the purgatory. */
export const OWNER = "purgatory-owner";
export const MAX_HOPS = 3;

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
   */
  reroute(purgatory: string, err: unknown, hop: number, sentTo?: string): boolean {
    if (!purgatory || hop >= MAX_HOPS) return false;
    const owner = ownerHint(err);
    const current = this.routes.get(purgatory);
    if (owner) {
      if (owner === (sentTo === undefined ? current : sentTo)) return false;
      this.routes.set(purgatory, owner);
      return true;
    }
    if (current !== undefined && (err as { code?: number })?.code === Status.UNAVAILABLE) {
      this.routes.delete(purgatory);
      return true;
    }
    return false;
  }

  close(): void {
    for (const stub of this.stubs.values()) stub.close();
    this.stubs.clear();
  }
}
