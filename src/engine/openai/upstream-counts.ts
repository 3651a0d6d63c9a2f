import type { EngineContext, FallbackOutcome, UpstreamActivity, UpstreamAttemptOutcome } from "../engine.ts";

const ATTEMPT_OUTCOMES: readonly UpstreamAttemptOutcome[] = [
  "ok",
  "http_error",
  "stream_error",
  "transport_error",
  "timeout",
  "cancelled",
];
const FALLBACK_OUTCOMES: readonly FallbackOutcome[] = ["served", "failed", "skipped"];

/** Each catalogue's counts, by model id: see {@link UpstreamCounts.of}. */
const countsByCatalogue = new WeakMap<EngineContext, Map<string, UpstreamCounts>>();

/**
 * One upstream model's cumulative counts of attempts (by endpoint and outcome) and fallbacks (by
 * fallback and outcome), for `/metrics`. Plain numbers: a request adds to one, and `/metrics`
 * reads them when scraped (the engine knows nothing of Prometheus).
 *
 * The counts belong to the model, not to one engine: every engine that serves the model in one
 * catalogue shares them (see {@link of}), so that a reload that gives the model a new engine (a
 * changed endpoint, timeout or `max_connections`) does not set its counters back, and the
 * requests the replaced engine still finishes count too. {@link read} shows the endpoints and
 * fallbacks of the model's latest configuration only: an endpoint a reload removed leaves
 * `/metrics` as a removed model does, its count kept in case a later reload brings it back.
 */
export class UpstreamCounts {
  readonly #attempts = new Map<string, Record<UpstreamAttemptOutcome, number>>();
  readonly #fallbacks = new Map<string, Record<FallbackOutcome, number>>();
  #endpoints: readonly string[] = [];
  #fallbackIds: readonly string[] = [];

  /**
   * The counts of model `modelId` in the catalogue of `context` (the model registry's, one for the
   * server's life), made on first use. Without a context (an engine made alone), new counts.
   */
  static of(context: EngineContext | undefined, modelId: string): UpstreamCounts {
    if (context === undefined) return new UpstreamCounts();
    let byModel = countsByCatalogue.get(context);
    if (byModel === undefined) {
      byModel = new Map();
      countsByCatalogue.set(context, byModel);
    }
    let counts = byModel.get(modelId);
    if (counts === undefined) {
      counts = new UpstreamCounts();
      byModel.set(modelId, counts);
    }
    return counts;
  }

  /** The endpoint names and fallback ids of the model's configuration, as its newest engine has them. */
  configure(endpoints: readonly string[], fallbacks: readonly string[]): void {
    this.#endpoints = endpoints;
    // A fallback listed twice is one series: its counts are the fallback's, not the listing's.
    this.#fallbackIds = [...new Set(fallbacks)];
  }

  countAttempt(endpoint: string, outcome: UpstreamAttemptOutcome): void {
    let counts = this.#attempts.get(endpoint);
    if (counts === undefined) {
      counts = { ok: 0, http_error: 0, stream_error: 0, transport_error: 0, timeout: 0, cancelled: 0 };
      this.#attempts.set(endpoint, counts);
    }
    counts[outcome] += 1;
  }

  countFallback(fallback: string, outcome: FallbackOutcome): void {
    let counts = this.#fallbacks.get(fallback);
    if (counts === undefined) {
      counts = { served: 0, failed: 0, skipped: 0 };
      this.#fallbacks.set(fallback, counts);
    }
    counts[outcome] += 1;
  }

  /** The counts of the configured endpoints and fallbacks, each with every outcome (0 where none yet). */
  read(): UpstreamActivity {
    return {
      attempts: this.#endpoints.flatMap((endpoint) => {
        const counts = this.#attempts.get(endpoint);
        return ATTEMPT_OUTCOMES.map((outcome) => ({ endpoint, outcome, count: counts?.[outcome] ?? 0 }));
      }),
      fallbacks: this.#fallbackIds.flatMap((fallback) => {
        const counts = this.#fallbacks.get(fallback);
        return FALLBACK_OUTCOMES.map((outcome) => ({ fallback, outcome, count: counts?.[outcome] ?? 0 }));
      }),
    };
  }
}
