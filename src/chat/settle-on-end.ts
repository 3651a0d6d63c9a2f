import type { CatalogModel } from "../catalog/catalog.ts";
import type { PartBatch, StreamPart } from "../engine/engine.ts";
import { isAppError } from "../errors/app-error.ts";
import type { AdmissionTicket, Annotate, RunOutcome } from "./chat-admission.ts";

/** How a run was settled, once it is ({@link settleOnEnd}). */
export interface SettledAs {
  /** A whole answer the client gets an error instead of: nothing charged. */
  unanswered?: boolean;
  /** Recorded with an error code: ended by an error, its client, or a cut (a shutdown). */
  cut?: boolean;
}

/** The part that ends a run. */
export type EndPart = Extract<StreamPart, { type: "finish" | "error" }>;

/** The ledger's error code of a run whose client went away before it ended. */
export const CLIENT_CLOSED = "client_closed";

/**
 * The run's batches, settled before the one holding the last part goes out. That part goes
 * in a batch of its own, after the parts read with it, so that these do not wait for the
 * settlement's commit.
 */
export async function* settleOnEnd(
  first: IteratorResult<PartBatch>,
  iterator: AsyncIterator<PartBatch>,
  ticket: AdmissionTicket,
  run: {
    startedAt: number;
    /** How long the engine took to prepare the run (a model's load included): engine time too. */
    prepareMs: number;
    servedBy: CatalogModel | undefined;
    annotate: Annotate;
    signal: AbortSignal;
    /** Lets go of the engine (ModelRegistry.hold) once the run has ended. */
    release: () => void;
    /** Whether the client reads the answer as it comes (SSE), or whole at the end. */
    streamed: boolean;
    /** Told, as the run is settled, whether it was settled as unanswered, and as cut. */
    settledAs: SettledAs;
  },
): AsyncGenerator<PartBatch> {
  const { startedAt, prepareMs, servedBy, annotate, signal, streamed } = run;
  // The time to the first token: none when the run ended before it generated anything (a
  // client that left while queued), which would otherwise count as a fast first token.
  const firstPart = first.done ? undefined : first.value[0];
  const generatedNothing =
    firstPart !== undefined &&
    (firstPart.type === "finish" || firstPart.type === "error") &&
    (firstPart.usage.completionTokens ?? 0) === 0;
  const firstPartMs = generatedNothing ? undefined : performance.now() - startedAt;
  let settled = false;
  const settle = async (outcome: Omit<RunOutcome, "timings">, queueMs?: number) => {
    settled = true;
    run.settledAs.unanswered = outcome.unanswered === true;
    run.settledAs.cut = outcome.errorCode !== undefined;
    const totalMs = performance.now() - startedAt;
    annotate({
      firstTokenMs: firstPartMs,
      engineMs: prepareMs + totalMs,
      queueMs,
      finishReason: outcome.finishReason,
    });
    await ticket.settle({ ...outcome, timings: { firstPartMs, totalMs, queueMs }, servedBy });
  };
  /** The outcome a run's last part tells. */
  const outcomeOf = (last: EndPart): Omit<RunOutcome, "timings"> => {
    // A whole answer that ends in an error reaches its client as that error alone: what was
    // generated is recorded, not charged. Streamed, the client has it, and pays for it.
    if (last.type === "error")
      return {
        usage: last.usage,
        finishReason: "error",
        errorCode: last.error.code,
        unanswered: !streamed,
      };
    if (!signal.aborted) return { usage: last.usage, finishReason: last.reason, errorCode: undefined };
    const unstarted = last.type === "finish" && last.unstarted === true;
    // A run stopped by its client (or cut by a shutdown) says so in the ledger, and claims no
    // finish reason unless the model reached one before the stop (engines end a stopped run
    // with `stop`, raw reason `abort`).
    const cutByServer = isAppError(signal.reason);
    return {
      usage: last.usage,
      finishReason: last.rawReason === "abort" ? undefined : last.reason,
      errorCode: cutByServer ? signal.reason.code : CLIENT_CLOSED,
      unanswered: cutByServer && !streamed,
      unstarted,
    };
  };
  try {
    let result = first;
    while (!result.done) {
      const parts = result.value;
      const last = parts.at(-1);
      if (last?.type === "finish" || last?.type === "error") {
        if (parts.length > 1) yield parts.slice(0, -1);
        await settle(outcomeOf(last), last.queueMs);
        yield [last];
        return;
      }
      if (parts.length > 0) yield parts;
      result = await iterator.next();
    }
    throw new Error("engine stream ended without a finish part");
  } finally {
    // The engine's run is left where it gave its last part: ended, it runs its own `finally`
    // (an upstream engine counts its runs there, which a reload waits for to close it).
    if (settled) await iterator.return?.();
    // Consumers read to the end even after aborting (the engine then finishes with what it
    // generated), so this only runs when a consumer failed or an engine broke its contract.
    try {
      if (!settled) {
        await iterator.return?.();
        await settle({
          usage: { promptTokens: undefined, completionTokens: undefined },
          finishReason: undefined,
          errorCode: "internal_error",
        });
      }
    } finally {
      run.release();
    }
  }
}
