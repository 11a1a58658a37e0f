/**
 * A bounded FIFO between one producer that awaits room (`put`) and consumers that await
 * items (`take`): a Session's reader stops reading when its outcomes are not consumed,
 * so a slow consumer is felt by the server (which ends the stream past its own bound)
 * instead of growing memory here. `close()` ends it: takers get `undefined` once drained.
 */
export class BoundedQueue<T> {
  private readonly items: T[] = [];
  private closed = false;
  private readonly takers: Array<(value: T | undefined) => void> = [];
  private readonly putters: Array<() => void> = [];

  constructor(private readonly capacity: number) {}

  get length(): number {
    return this.items.length;
  }

  async put(item: T): Promise<void> {
    while (!this.closed && this.items.length >= this.capacity) {
      await new Promise<void>((resolve) => this.putters.push(resolve));
    }
    if (this.closed) return;
    const taker = this.takers.shift();
    if (taker !== undefined) taker(item);
    else this.items.push(item);
  }

  async take(): Promise<T | undefined> {
    if (this.items.length > 0) {
      const item = this.items.shift() as T;
      this.putters.shift()?.();
      return item;
    }
    if (this.closed) return undefined;
    return new Promise((resolve) => this.takers.push(resolve));
  }

  /** No more items: waiting takers get `undefined`, the items already queued stay. */
  close(): void {
    this.closed = true;
    for (const taker of this.takers.splice(0)) taker(undefined);
    for (const putter of this.putters.splice(0)) putter();
  }
}
