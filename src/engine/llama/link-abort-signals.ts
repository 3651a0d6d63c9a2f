/** A signal that follows several others, until it is unlinked. */
export interface LinkedAbortSignal {
  /** Aborts, with the source's reason, as soon as any source does. */
  readonly signal: AbortSignal;
  /** Stops following the sources (call it when the request is done). */
  unlink(): void;
}

/**
 * Like `AbortSignal.any(sources)`, for per-request signals made from a long-lived one (the engine's
 * close signal). `AbortSignal.any` registers each new signal with its sources through a WeakRef
 * that is only removed once the new signal has been garbage-collected (a full collection), so the
 * close signal gathered an entry for every request in between; and reading `aborted` on such a
 * signal walks its sources, which LlamaChat does several times per token. Here each source gets a
 * plain listener, and `unlink` removes it when the request is done.
 */
export function linkAbortSignals(sources: readonly AbortSignal[]): LinkedAbortSignal {
  const controller = new AbortController();
  const alreadyAborted = sources.find((source) => source.aborted);
  if (alreadyAborted !== undefined) {
    controller.abort(alreadyAborted.reason);
    return { signal: controller.signal, unlink: () => {} };
  }
  const onAbort = (event: Event) => {
    unlink();
    controller.abort((event.target as AbortSignal).reason);
  };
  const unlink = () => {
    for (const source of sources) source.removeEventListener("abort", onAbort);
  };
  for (const source of sources) source.addEventListener("abort", onAbort, { once: true });
  return { signal: controller.signal, unlink };
}
