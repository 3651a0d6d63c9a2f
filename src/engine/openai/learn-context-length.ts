import type { EngineLogger } from "../create-engine.ts";
import type { UpstreamEndpoint } from "./create-upstream-endpoint.ts";
import { readUpstreamContextLength } from "./read-upstream-context-length.ts";

/** How often an upstream's model list is read again: a server restarted with a longer context. */
export const CONTEXT_LENGTH_REFRESH_MS = 10 * 60_000;
/** How soon it is asked again after no endpoint answered. */
export const CONTEXT_LENGTH_RETRY_MS = 60_000;

/** What {@link learnContextLength} gives the engine. */
export interface ContextLengthLearner {
  /** The context length the upstream gave last, or `undefined` while none is known. */
  current(): number | undefined;
}

/**
 * The context length of an upstream model the catalogue gives none, learned from its server's
 * model list (read-upstream-context-length.ts: vLLM's `max_model_len` and the like) at once and
 * then every {@link CONTEXT_LENGTH_REFRESH_MS} ({@link CONTEXT_LENGTH_RETRY_MS} after a failure),
 * on the first endpoint that answers, in the background, on a timer: a request never waits for
 * it, and one that comes before it is known is bounded as without a context length. Once known, prompts are checked against it, and a request
 * without `max_tokens` runs to its natural end (create-openai-engine.ts says what it reserves).
 */
export function learnContextLength(options: {
  modelId: string;
  /** The upstream's name of the model. */
  upstreamModel: string;
  endpoints: readonly UpstreamEndpoint[];
  timeoutMs: number;
  /** Ends a reading under way (the engine closed). */
  signal: AbortSignal;
  logger: EngineLogger;
  /** The bound used while none is known (`defaultMaxCompletionTokens`), for the log. */
  defaultMaxTokens: number;
  /** Shorter pauses for tests. */
  refreshMs?: number | undefined;
  retryMs?: number | undefined;
}): ContextLengthLearner {
  const refreshMs = options.refreshMs ?? CONTEXT_LENGTH_REFRESH_MS;
  const retryMs = options.retryMs ?? CONTEXT_LENGTH_RETRY_MS;
  let known: number | undefined;
  /** The next reading, on its own: the list is kept current whether requests come or not. */
  let timer: NodeJS.Timeout | undefined;
  options.signal.addEventListener("abort", () => clearTimeout(timer), { once: true });
  /** What the log said last, so that each change is told once: a length, "none" or "failed". */
  let told: number | "none" | "failed" | undefined;

  const tell = (state: number | "none" | "failed", log: () => void) => {
    if (state === told) return;
    told = state;
    log();
  };

  /** Reads the list once; answers how long until the next reading. */
  const read = async (): Promise<number> => {
    const failures: string[] = [];
    /** The first endpoint whose list gives none (it has no list, a 404, or no length for the model). */
    let givesNone: UpstreamEndpoint | undefined;
    for (const endpoint of options.endpoints) {
      if (options.signal.aborted) return retryMs;
      let length: number | undefined;
      try {
        length = await readUpstreamContextLength({
          origin: endpoint.origin,
          path: endpoint.modelsPath,
          headers: endpoint.headers,
          model: options.upstreamModel,
          timeoutMs: options.timeoutMs,
          signal: options.signal,
        });
      } catch (error) {
        failures.push(`${endpoint.label}: ${error instanceof Error ? error.message : String(error)}`);
        continue;
      }
      if (length === undefined) {
        // Another endpoint may have the list (one behind a gateway that answers 404).
        givesNone ??= endpoint;
        continue;
      }
      known = length;
      tell(length, () =>
        options.logger.info(
          { model: options.modelId, endpoint: endpoint.label, contextLength: length },
          "context length learned from the upstream's model list",
        ),
      );
      return refreshMs;
    }
    // A length learned before stays when the list now gives none (a stray 404 from a gateway
    // dropped it, and with it the prompt check, for ten minutes): read again soon, as after a failure.
    if (givesNone !== undefined && known === undefined) {
      const endpoint = givesNone;
      tell("none", () =>
        options.logger.info(
          { model: options.modelId, endpoint: endpoint.label, defaultMaxTokens: options.defaultMaxTokens },
          "the upstream's model list gives no context length for this model: a request without max_tokens asks for at most defaultMaxTokens; set context_length in the catalogue to change that",
        ),
      );
      return refreshMs;
    }
    if (givesNone !== undefined)
      failures.push(`${givesNone.label}: the model list gives no context length now`);
    // A length learned before stays: the server may only be down for a moment.
    if (!options.signal.aborted)
      tell("failed", () =>
        options.logger.info(
          { model: options.modelId, failures, retryInMs: retryMs },
          "could not read the upstream's model list for the model's context length",
        ),
      );
    return retryMs;
  };

  /** Reads now, then again after the pause the reading answers. Unref'd: it never holds the process open. */
  const readInTurn = async () => {
    const pause = await read();
    if (options.signal.aborted) return;
    timer = setTimeout(() => void readInTurn(), pause);
    timer.unref();
  };
  void readInTurn();
  return { current: () => known };
}
