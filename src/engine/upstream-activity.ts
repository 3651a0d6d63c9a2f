/**
 * What an upstream engine reports of its attempts and fallbacks, for `/metrics`
 * (`ChatEngine.upstreamActivity` in engine.ts, which re-exports these types).
 */

/**
 * How one HTTP attempt at an upstream endpoint ended:
 * - `ok`: the answer came whole;
 * - `http_error`: the upstream answered with a status other than 2xx (refused, rate-limited, failed);
 * - `stream_error`: it answered 2xx, but not with a whole answer (an error or a failure finish
 *   reason in its stream, something that is no answer, a stream ended too soon);
 * - `transport_error`: the connection failed (refused, reset, a host name that does not resolve,
 *   TLS, a response that is not HTTP);
 * - `timeout`: no connection, first byte or next piece in time;
 * - `cancelled`: Tollgate stopped it before its end (the client left, the engine closed for a
 *   reload or a shutdown).
 */
export type UpstreamAttemptOutcome =
  | "ok"
  | "http_error"
  | "stream_error"
  | "transport_error"
  | "timeout"
  | "cancelled";

/**
 * How a request fared on one of its model's fallbacks, once its own endpoints had failed:
 * `served` (the fallback began the answer), `failed` (it was tried and failed, or could not take
 * the request), `skipped` (it was unavailable, or not in the catalogue).
 */
export type FallbackOutcome = "served" | "failed" | "skipped";

/**
 * A model's cumulative upstream counts (see `ChatEngine.upstreamActivity`). Each endpoint
 * and fallback the model has is listed with every outcome, 0 where none happened yet, so that
 * the first failure shows as an increase.
 */
export interface UpstreamActivity {
  /** HTTP attempts, by endpoint: its base URL without credentials or query, as logs name it. */
  attempts: readonly { endpoint: string; outcome: UpstreamAttemptOutcome; count: number }[];
  /** Requests of the model that went on to a fallback model, by its catalogue id. */
  fallbacks: readonly { fallback: string; outcome: FallbackOutcome; count: number }[];
}
