/**
 * A one-reader buffer between callback-style producers (node-llama-cpp's `onTextChunk`) and an
 * async generator. Pushing never blocks: generation runs at its own pace and parts queue up until
 * the reader takes them.
 */
export interface PartChannel<Part> {
  push(part: Part): void;
  /** No more parts; the reader drains what is buffered, then ends. */
  close(): void;
  /** Resolves the next part, or `undefined` once closed and drained. */
  next(): Promise<Part | undefined>;
}

export function createPartChannel<Part>(): PartChannel<Part> {
  const buffered: Part[] = [];
  let closed = false;
  let wake: (() => void) | undefined;
  const notify = () => {
    const resolve = wake;
    wake = undefined;
    resolve?.();
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
      return buffered.shift();
    },
  };
}
