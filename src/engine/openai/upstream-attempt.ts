import type { EngineLogger } from "../create-engine.ts";
import type { StreamPart, UpstreamAttemptOutcome } from "../engine.ts";
import type { UsageBounds } from "./bound-usage.ts";
import type { EndpointBalancer } from "./create-endpoint-balancer.ts";
import type { StallWatchdog } from "./create-stall-watchdog.ts";
import type { UpstreamEndpoint } from "./create-upstream-endpoint.ts";
import type { UpstreamCall } from "./start-upstream-call.ts";
import type { UpstreamFailure } from "./upstream-failure.ts";
import type { UpstreamSettings } from "./upstream-settings.ts";

/** What every attempt of one engine shares. */
export interface AttemptContext {
  /** The catalogue id, for messages and logs. */
  modelId: string;
  /**
   * The upstream request body as JSON text for an endpoint, by what it takes: with or without
   * `stream_options`, the completion bound as `max_tokens` or as `max_completion_tokens` (see
   * {@link UpstreamEndpoint}). The same text on every attempt to endpoints that take the same.
   */
  body: (takes: { streamOptions: boolean; maxTokens: boolean }) => string;
  /** The estimated prompt tokens, used where the upstream reports none. */
  promptTokens: number;
  /**
   * The most tokens this request can have used upstream (see bound-usage.ts), and whether the
   * body bounds the completion (`completionSent`: as `max_tokens` where the endpoint takes it).
   */
  usageBounds: UsageBounds;
  /** Whether the request asked for log probabilities, which are then read from the answer. */
  logprobs?: boolean;
  settings: UpstreamSettings;
  /** The client's signal: aborting ends the attempt with a `finish` that counts what was generated. */
  signal: AbortSignal;
  /** The engine's: aborted when it closes. */
  closeSignal: AbortSignal;
  balancer: EndpointBalancer<UpstreamEndpoint>;
  watchdog: StallWatchdog;
  /** The engine's calls in flight, aborted when it closes. */
  inFlight: Set<UpstreamCall>;
  logger: EngineLogger;
  /** Whom the run is for, where it waits for an endpoint's connection (RunOptions.tenant). */
  tenant?: string | undefined;
  /**
   * Told how each attempt ended, once, for `/metrics`; not told of an attempt that was never sent
   * (its endpoint began to rest while it waited for a connection, and it went elsewhere).
   */
  countAttempt?: ((endpoint: UpstreamEndpoint, outcome: UpstreamAttemptOutcome) => void) | undefined;
}

/** The parts an attempt produced from what arrived, or why it produced nothing. */
export type AttemptBatch =
  | { kind: "parts"; parts: StreamPart[] /** The batch ends with `finish` or `error`. */; last: boolean }
  | { kind: "failed"; failure: UpstreamFailure };

/** One request on one endpoint, read batch by batch. */
export interface UpstreamAttempt {
  /**
   * The parts made from the next data (at least one), or the failure while nothing was produced
   * (the caller may retry). After a batch with `last`, the attempt is over and cleaned up.
   */
  next(): Promise<AttemptBatch>;
  /** Stops an attempt whose reader gave up before its last batch. */
  dispose(): void;
  /** When it started, on the balancer's clock: a failure is reported with it. */
  readonly startedAt: number;
}

/** Why a call was aborted: the client left, the engine closed, or the upstream stalled. */
export class AttemptStopped extends Error {}
