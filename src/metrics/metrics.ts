import { Counter, Gauge, Registry } from "prom-client";
import type { ModelStatus, UpstreamActivity } from "../engine/engine.ts";
import { LabeledAmountCounter, LabeledCounter, LabeledHistogram } from "./labeled-series.ts";

/** What one finished request tells the metrics; label values are bounded (never raw paths or keys). */
export interface RequestObservation {
  /** The route pattern (`/v1/models/*`), or "unknown" for unmatched paths. */
  route: string;
  /** A catalogue model id, or "" where the request named none (or an unknown one). */
  model: string;
  /**
   * The catalogue model that ran, where a fallback served the request: its tokens, cost and time
   * to the first token are its own, as in the ledger. Default: `model`.
   */
  servedModel?: string | undefined;
  status: number;
  seconds: number;
  promptTokens: number | undefined;
  completionTokens: number | undefined;
  /** Cost in nano-units. */
  costNano: bigint | undefined;
  /** Seconds to the first generated part, where the request generated. */
  firstTokenSeconds: number | undefined;
  /** Seconds spent in the engine (queue and generation); the rest is gateway overhead. */
  engineSeconds: number | undefined;
}

/** A catalogue model's state when `/metrics` is scraped. */
export interface ModelState {
  model: string;
  /** Absent for a model a reload removed while its requests still run (only their load counts). */
  status?: ModelStatus | undefined;
  /** Requests running in its engine and waiting for it; absent where the engine does not say. */
  load?: { running: number; waiting: number } | undefined;
  /** Its upstream endpoints, and how many of them rest; absent for a local model. */
  endpoints?: { total: number; resting: number } | undefined;
  /** What its engine did on its upstream endpoints so far (cumulative); absent for a local model. */
  upstream?: UpstreamActivity | undefined;
}

const MODEL_STATUSES: readonly ModelStatus[] = ["available", "loading", "unavailable"];

const LATENCY_BUCKETS = [
  0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120,
];
const OVERHEAD_BUCKETS = [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1];

/**
 * Prometheus metrics of one server. The per-request series are plain counters and histograms
 * (labeled-series.ts: prom-client's label hashing cost a twentieth of a request); the gauges,
 * read when scraped, stay in a prom-client registry of their own, rendered after them.
 */
export class Metrics {
  readonly registry = new Registry();
  readonly #requests = new LabeledCounter("tollgate_requests_total", "Requests by route, model and status.", [
    "route",
    "model",
    "status",
  ]);
  readonly #latency = new LabeledHistogram(
    "tollgate_request_duration_seconds",
    "Request latency, to the last byte.",
    ["route", "model"],
    LATENCY_BUCKETS,
  );
  readonly #firstToken = new LabeledHistogram(
    "tollgate_time_to_first_token_seconds",
    "Time from admission to the first generated part.",
    ["model"],
    LATENCY_BUCKETS,
  );
  readonly #overhead = new LabeledHistogram(
    "tollgate_gateway_overhead_seconds",
    "Request time spent outside the engine: parsing, auth, limits, billing, serialization.",
    ["route"],
    OVERHEAD_BUCKETS,
  );
  readonly #tokens = new LabeledCounter(
    "tollgate_tokens_total",
    "Tokens by model and direction (prompt, completion).",
    ["model", "direction"],
  );
  readonly #cost = new LabeledAmountCounter(
    "tollgate_cost_total",
    "Amount charged, in currency units (exact, as the ledger sums it).",
    ["model"],
  );

  constructor(options: {
    inFlight: () => number;
    models: () => readonly ModelState[];
  }) {
    new Gauge({
      name: "tollgate_requests_in_flight",
      help: "Requests being handled now.",
      registers: [this.registry],
      collect() {
        this.set(options.inFlight());
      },
    });
    const { models } = options;
    new Gauge({
      name: "tollgate_model_status",
      help: "Each model's readiness, as /v1/models reports it: 1 for its current status, 0 for the others.",
      labelNames: ["model", "status"],
      registers: [this.registry],
      collect() {
        this.reset();
        for (const { model, status } of models()) {
          if (status === undefined) continue;
          for (const each of MODEL_STATUSES) this.set({ model, status: each }, each === status ? 1 : 0);
        }
      },
    });
    new Gauge({
      name: "tollgate_model_requests",
      help: "Requests per model running in the engine (state=running) or waiting for it (state=waiting).",
      labelNames: ["model", "state"],
      registers: [this.registry],
      collect() {
        this.reset();
        for (const { model, load } of models()) {
          if (load === undefined) continue;
          this.set({ model, state: "running" }, load.running);
          this.set({ model, state: "waiting" }, load.waiting);
        }
      },
    });
    new Gauge({
      name: "tollgate_upstream_endpoints",
      help: "An upstream model's endpoints taking requests (state=available) or resting after failures or an upstream's retry-after (state=resting).",
      labelNames: ["model", "state"],
      registers: [this.registry],
      collect() {
        this.reset();
        for (const { model, endpoints } of models()) {
          if (endpoints === undefined) continue;
          this.set({ model, state: "available" }, endpoints.total - endpoints.resting);
          this.set({ model, state: "resting" }, endpoints.resting);
        }
      },
    });
    // Counted by the engines as plain numbers, read when scraped: a request retried on another
    // endpoint, or served by a fallback, shows here and not only in the logs.
    new Counter({
      name: "tollgate_upstream_attempts_total",
      help: "HTTP attempts at an upstream model's endpoints, by outcome: ok, http_error (a status other than 2xx), stream_error (a 2xx without a whole answer, a connection cut after it included), transport_error (connection refused or reset before any status, DNS, TLS), timeout (connect, first byte, idle), cancelled (the client left, or a reload or shutdown).",
      labelNames: ["model", "endpoint", "outcome"],
      registers: [this.registry],
      collect() {
        this.reset();
        for (const { model, upstream } of models()) {
          for (const { endpoint, outcome, count } of upstream?.attempts ?? [])
            this.inc({ model, endpoint, outcome }, count);
        }
      },
    });
    new Counter({
      name: "tollgate_upstream_fallbacks_total",
      help: "Requests of an upstream model that went on to a fallback model once its endpoints failed, by outcome: served (the fallback began the answer), failed (it failed too, or could not take the request), skipped (unavailable, or not in the catalogue).",
      labelNames: ["model", "fallback", "outcome"],
      registers: [this.registry],
      collect() {
        this.reset();
        for (const { model, upstream } of models()) {
          for (const { fallback, outcome, count } of upstream?.fallbacks ?? [])
            this.inc({ model, fallback, outcome }, count);
        }
      },
    });
  }

  observe(observation: RequestObservation): void {
    const { route, model } = observation;
    this.#requests.inc([route, model, String(observation.status)]);
    this.#latency.observe([route, model], observation.seconds);
    if (observation.engineSeconds !== undefined) {
      this.#overhead.observe([route], Math.max(0, observation.seconds - observation.engineSeconds));
    }
    // Requests and latency count under the model asked for; what was generated and charged
    // under the model that generated it (a fallback), as the ledger's rows do.
    const served = observation.servedModel ?? model;
    if (observation.firstTokenSeconds !== undefined)
      this.#firstToken.observe([served], observation.firstTokenSeconds);
    if (observation.promptTokens !== undefined)
      this.#tokens.inc([served, "prompt"], observation.promptTokens);
    if (observation.completionTokens !== undefined) {
      this.#tokens.inc([served, "completion"], observation.completionTokens);
    }
    if (observation.costNano !== undefined) this.addCharge(served, observation.costNano);
  }

  /**
   * Money charged for a request under the model that served it. {@link observe} adds a request's
   * charge; a charge that went through only after the request was recorded (its settle was retried
   * in the background while the store was down) is added here by itself.
   */
  addCharge(model: string, costNano: bigint): void {
    if (costNano > 0n) this.#cost.inc([model], costNano);
  }

  async render(): Promise<{ contentType: string; body: string }> {
    const series = [
      this.#requests,
      this.#latency,
      this.#firstToken,
      this.#overhead,
      this.#tokens,
      this.#cost,
    ];
    const body = `${series.map((metric) => metric.render()).join("\n")}\n${await this.registry.metrics()}`;
    return { contentType: this.registry.contentType, body };
  }
}
