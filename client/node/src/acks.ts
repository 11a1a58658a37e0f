/**
 * `ackBatch` over one AckStream per server (docs/service.md "AckStream"): a
 * consumer that acks all the time pays one stream message per batch instead of a call.
 *
 * Requests are written to the stream and answered in order, so each pending request is a
 * slot in a FIFO the responses resolve. The unary AckBatch stays the path of every case
 * the stream cannot answer well, so `ackBatch` means the same either way:
 * - a response with code UNAVAILABLE (the server does not own the purgatory, or is
 *   stopping): the request is sent again as a call, which follows the owner's hint;
 * - the stream ends or fails (a dropped connection): its pending requests are sent
 *   again as calls (an entry that had taken effect is then answered "not held", as a
 *   second call would be), and the next request opens a new stream;
 * - a server without AckStream (UNIMPLEMENTED): every later request is a call.
 * Other failures of a whole request (an unknown group, INVALID_ARGUMENT, ...) reject
 * that request alone, as the call would. A request unanswered after the client's
 * deadline rejects with DeadlineExceededError; its response, if it comes, is dropped.
 */
import { status as Status, type ClientDuplexStream } from "@grpc/grpc-js";

import type * as wire from "./convert.js";
import { errorForCode } from "./errors.js";

/** An open AckStream: AckStreamRequest messages out (AckBatch requests), AckStreamResponse in. */
export type AckDuplex = ClientDuplexStream<unknown, wire.WireMessage>;
/** Opens an AckStream on the stub that serves the request's purgatory. */
export type OpenAckStream = (stub: Record<string, unknown>) => AckDuplex;
/** The unary AckBatch (with its routing and errors), the fallback. */
export type AckBatchCall = (request: unknown) => Promise<wire.WireMessage>;

interface Pending {
  readonly request: unknown;
  resolve(response: wire.WireMessage): void;
  reject(err: unknown): void;
  timer: ReturnType<typeof setTimeout> | undefined;
  settled: boolean;
}

/** One open AckStream and the requests it owes answers to, oldest first. */
class AckChannel {
  private readonly pending: Pending[] = [];
  private head = 0;
  ended = false;

  constructor(
    private readonly stream: AckDuplex,
    private readonly fallback: (p: Pending, err: unknown) => void,
  ) {
    stream.on("data", (response: wire.WireMessage) => this.answer(response));
    stream.on("error", (err: unknown) => this.end(err));
    stream.on("end", () => this.end(undefined));
  }

  send(p: Pending): void {
    this.pending.push(p);
    this.stream.write(p.request);
  }

  close(): void {
    this.ended = true;
    this.stream.end();
    this.stream.cancel();
  }

  private answer(response: wire.WireMessage): void {
    const p = this.pending[this.head];
    if (p === undefined) return; // not ours: a server out of step; the stream ends it
    this.pending[this.head++] = undefined as unknown as Pending;
    if (this.head > 1024 && this.head * 2 > this.pending.length) {
      this.pending.splice(0, this.head);
      this.head = 0;
    }
    if (p.settled) return;
    if (response.code === Status.UNAVAILABLE) this.fallback(p, undefined);
    else if (response.code !== 0) settle(p, undefined, errorForCode(response.code, response.message));
    else settle(p, response, undefined);
  }

  private end(err: unknown): void {
    this.ended = true;
    const left = this.pending.slice(this.head);
    this.pending.length = 0;
    this.head = 0;
    for (const p of left) if (!p.settled) this.fallback(p, err);
  }
}

function settle(p: Pending, response: wire.WireMessage | undefined, err: unknown): void {
  if (p.settled) return;
  p.settled = true;
  if (p.timer !== undefined) clearTimeout(p.timer);
  if (err === undefined) p.resolve(response);
  else p.reject(err);
}

/** The client's AckStreams, one per server it sends acks to. */
export class AckStreams {
  private readonly channels = new Map<Record<string, unknown>, AckChannel>();
  private unsupported = false;

  constructor(
    private readonly open: OpenAckStream,
    private readonly call: AckBatchCall,
    private readonly deadlineMs: number | null,
  ) {}

  /** AckBatch's answer to `request`, through `stub`'s stream (see the module docstring). */
  send(stub: Record<string, unknown>, request: unknown): Promise<wire.WireMessage> {
    if (this.unsupported) return this.call(request);
    return new Promise((resolve, reject) => {
      const p: Pending = { request, resolve, reject, timer: undefined, settled: false };
      if (this.deadlineMs !== null) {
        const ms = this.deadlineMs;
        p.timer = setTimeout(
          () => settle(p, undefined, errorForCode(Status.DEADLINE_EXCEEDED, `no answer to ackBatch in ${ms} ms`)),
          ms,
        );
        p.timer.unref?.();
      }
      this.channel(stub).send(p);
    });
  }

  close(): void {
    for (const channel of this.channels.values()) channel.close();
    this.channels.clear();
  }

  private channel(stub: Record<string, unknown>): AckChannel {
    let channel = this.channels.get(stub);
    if (channel === undefined || channel.ended) {
      channel = new AckChannel(this.open(stub), (p, err) => this.viaCall(p, err));
      this.channels.set(stub, channel);
    }
    return channel;
  }

  private viaCall(p: Pending, err: unknown): void {
    if ((err as { code?: number } | undefined)?.code === Status.UNIMPLEMENTED) this.unsupported = true;
    if (p.settled) return;
    this.call(p.request).then(
      (response) => settle(p, response, undefined),
      (e: unknown) => settle(p, undefined, e),
    );
  }
}
