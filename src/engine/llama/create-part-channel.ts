/**
 * A one-reader buffer between callback-style producers (node-llama-cpp's `onTextChunk`) and an
 * async generator. Pushing never blocks: generation runs at its own pace and parts queue up until
 * the reader takes them, all of them at once.
 */
export interface PartChannel<Part> {
  push(part: Part): void;
  /** No more parts; the reader drains what is buffered, then ends. */
  close(): void;
  /** Resolves every part buffered (at least one, in order), or `undefined` once closed and drained. */
  next(): Promise<Part[] | undefined>;
}

/**
 * Creates a {@link PartChannel}.
 *
 * A reader that waits is woken two event-loop turns after a push (`setImmediate` twice), not at
 * once. The producer's callback runs in the middle of node-llama-cpp's token loop, and a context
 * whose sequences are not all busy dispatches its next decode from a `setImmediate`: waking the
 * reader at once would run everything the reader does with the part (SSE framing, the socket
 * write, the client's share of a shared event loop) before that dispatch, on every token's critical
 * path. Woken after it, the reader works on the main thread while llama.cpp decodes the next token
 * on its own thread. The delay is a few microseconds when the event loop is idle; parts that arrive
 * while the reader is busy are taken without any wait. The first part wakes the reader at once: it
 * is the time to first token, which matters more than one decode's overlap.
 */
export function createPartChannel<Part>(): PartChannel<Part> {
  let buffered: Part[] = [];
  let closed = false;
  let wake: (() => void) | undefined;
  let wakeScheduled = false;
  let delivered = false;
  const wakeReader = () => {
    wakeScheduled = false;
    const resolve = wake;
    wake = undefined;
    resolve?.();
  };
  const notify = () => {
    if (wake === undefined || wakeScheduled) return;
    if (!delivered) return wakeReader();
    wakeScheduled = true;
    setImmediate(() => setImmediate(wakeReader));
  };
  return {
    push(part) {
      if (closed) return;
      buffered.push(part);
      notify();
    },
    close() {
      closed = true;
      notify();
    },
    async next() {
      while (buffered.length === 0 && !closed) {
        await new Promise<void>((resolve) => {
          wake = resolve;
        });
      }
      if (buffered.length === 0) return undefined;
      delivered = true;
      const parts = buffered;
      buffered = [];
      return parts;
    },
  };
}
