import type { ChatEngine, ChatRequest, PartBatch, PreparedChat, PrepareOptions } from "../engine/engine.ts";
import type { ModelRegistry } from "../models/model-registry.ts";

/** A run, on the engine that has it now. */
export interface FollowedRun {
  engine: ChatEngine;
  prepared: PreparedChat;
  iterator: AsyncIterator<PartBatch>;
  /** Lets go of its engine (ModelRegistry.hold). */
  release: () => void;
}

/** A run that may move to its model's new engine until its first batch (see {@link followReloads}). */
export interface FollowingRun {
  /** The run as it is now; after {@link first}, the one that produced the batch. */
  readonly current: FollowedRun;
  /** Reads the first batch of the run, wherever it ends up. */
  first(): Promise<IteratorResult<PartBatch>>;
}

/**
 * Starts a prepared run, and moves it to its model's current engine when a reload replaces the
 * engine while the run still waits for its turn (RunOptions.onRetired): an operator who raises
 * `parallel` to clear a backlog must not see the backlog wait for the old engine's streams, which
 * may run for an hour, while the new engine sits idle. The run keeps its place in the old queue
 * until the new engine has prepared it, and stays there (as before reloads moved anything) when
 * the new engine cannot take it as it was admitted: the model was removed or has no engine, the
 * new engine fails or cannot load, the prompt no longer fits, or it would cost more than its
 * reservation covers (more prompt tokens, another model's fallbacks). A reload drops no request
 * in flight, and a moved request is charged as admitted: the entry's prices and the most
 * completion tokens it was admitted with; its prompt as the engine that ran it counts it (an
 * upstream's server, within the bounds of any upstream request: bound-usage.ts), which is why a
 * new engine whose prompt may count more than the admitted one does not take it. Whichever comes first wins: a sequence of the old engine
 * freed before the move is done serves it there.
 */
export function followReloads(options: {
  registry: ModelRegistry;
  /** The catalogue id the request named. */
  modelId: string;
  request: ChatRequest;
  /** The options it was prepared with; their signal is the request's. */
  prepareOptions: PrepareOptions & { signal: AbortSignal };
  engine: ChatEngine;
  /** The run as admitted: it priced the reservation. */
  prepared: PreparedChat;
  release: () => void;
  /** Whom the request is for, where its run waits for its turn (RunOptions.tenant). */
  tenant: string | undefined;
}): FollowingRun {
  const { registry, modelId, request, prepareOptions } = options;
  const { signal } = prepareOptions;
  const admitted = options.prepared;
  /** The run that took over from the current one, once that one left its queue. */
  let moved: FollowedRun | undefined;

  const start = (run: Omit<FollowedRun, "iterator">, queuedAt?: number): FollowedRun => {
    const started: FollowedRun = { ...run, iterator: undefined as unknown as AsyncIterator<PartBatch> };
    started.iterator = run.prepared
      .run(signal, {
        onRetired: (leave, at) => moveAway(started, leave, at),
        tenant: options.tenant,
        ...(queuedAt === undefined ? {} : { queuedAt }),
      })
      [Symbol.asyncIterator]();
    return started;
  };

  const moveAway = async (from: FollowedRun, leave: () => boolean, queuedAt: number): Promise<void> => {
    const entry = registry.get(modelId);
    const engine = entry?.model.kind === "chat" ? entry.engine : undefined;
    if (engine === undefined || engine === from.engine || signal.aborted) return;
    const release = registry.hold(engine);
    try {
      // No more completion tokens than its reservation covers: a new context that is larger
      // would otherwise give a request without `max_tokens` more room than it paid for.
      const prepared = await engine.prepare(
        { ...request, maxTokens: request.maxTokens ?? admitted.maxCompletionTokens },
        prepareOptions,
      );
      if (coversRun(admitted, prepared) && leave()) {
        moved = start({ engine, prepared, release }, queuedAt);
        return;
      }
    } catch {
      // The new engine cannot take it (unavailable, too small now, client gone): it stays.
    }
    release();
  };

  let current = start({ engine: options.engine, prepared: admitted, release: options.release });
  return {
    get current() {
      return current;
    },
    async first() {
      let result = await current.iterator.next();
      // A run that moved ends without a part; the one that took over has the request now.
      while (result.done === true && moved !== undefined) {
        current.release();
        current = moved;
        moved = undefined;
        result = await current.iterator.next();
      }
      return result;
    },
  };
}

/** Whether the reservation `admitted` priced covers the most `next` may cost, at the same prices. */
function coversRun(admitted: PreparedChat, next: PreparedChat): boolean {
  return (
    (next.alternateModelIds?.length ?? 0) === 0 &&
    (next.promptTokensAtMost ?? next.promptTokens) <=
      (admitted.promptTokensAtMost ?? admitted.promptTokens) &&
    next.maxCompletionTokens <= admitted.maxCompletionTokens
  );
}
