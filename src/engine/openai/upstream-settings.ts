import type { UpstreamTuning } from "../../catalog/catalog.ts";

/**
 * How the upstream engine talks to its endpoints. Every value has a default; the `engine` block of
 * an `openai` model may override the ones in {@link UpstreamTuning}.
 */
export interface UpstreamSettings {
  /** Longest wait for a TCP (and TLS) connection, in ms. Default 10 s. */
  connectTimeoutMs: number;
  /** Longest wait from sending a request to the first byte of the response body, in ms. Default 60 s. */
  firstByteTimeoutMs: number;
  /** Longest silence between two chunks of a streamed response, in ms. Default 60 s. */
  idleTimeoutMs: number;
  /** Retries after the first attempt, on any endpoint, before the first byte. Default 2. */
  maxRetries: number;
  /** First backoff pause of a request, doubled on each further one, in ms (with jitter). Default 250 ms. */
  retryBaseDelayMs: number;
  /** Longest backoff pause, in ms. Default 4 s. */
  retryMaxDelayMs: number;
  /**
   * Longest time a request pauses for endpoints in all (backoff, `retry-after`, cooldowns), in
   * ms: the pauses on the model's own endpoints and on its fallbacks' add up to this at most (the
   * model asked for sets it). Default 10 s. (With a fallback, or a further fallback, that could
   * serve, a request does not wait for resting endpoints at all.)
   */
  maxRetryWaitMs: number;
  /** Failures in a row that put an endpoint in cooldown. Default 3. */
  failureThreshold: number;
  /** First cooldown, doubled on each further failure, in ms. Default 5 s. */
  cooldownMs: number;
  /** Longest cooldown, in ms. Default 60 s. */
  maxCooldownMs: number;
  /** Most open connections per endpoint; `undefined` means no limit. */
  maxConnections: number | undefined;
  /**
   * The completion tokens reserved for a request without `max_tokens` when the catalogue gives the
   * model no `context_length`. Default 4096.
   */
  defaultMaxCompletionTokens: number;
}

export const DEFAULT_UPSTREAM_SETTINGS: Readonly<UpstreamSettings> = {
  connectTimeoutMs: 10_000,
  firstByteTimeoutMs: 60_000,
  idleTimeoutMs: 60_000,
  maxRetries: 2,
  retryBaseDelayMs: 250,
  retryMaxDelayMs: 4_000,
  maxRetryWaitMs: 10_000,
  failureThreshold: 3,
  cooldownMs: 5_000,
  maxCooldownMs: 60_000,
  maxConnections: undefined,
  defaultMaxCompletionTokens: 4096,
};

/** Every tuning field: one added to {@link UpstreamTuning} and not here fails to compile. */
const TUNING_FIELDS: Record<keyof UpstreamTuning, true> = {
  connectTimeoutMs: true,
  firstByteTimeoutMs: true,
  idleTimeoutMs: true,
  maxRetries: true,
  cooldownMs: true,
  maxConnections: true,
};

/** The settings of one engine: the defaults, then the configuration's values, then `overrides`. */
export function resolveUpstreamSettings(
  tuning: UpstreamTuning,
  overrides: Partial<UpstreamSettings> = {},
): UpstreamSettings {
  const configured: Partial<UpstreamSettings> = {};
  for (const key of Object.keys(TUNING_FIELDS) as (keyof UpstreamTuning)[]) {
    const value = tuning[key];
    if (value !== undefined) configured[key] = value;
  }
  return { ...DEFAULT_UPSTREAM_SETTINGS, ...configured, ...overrides };
}
