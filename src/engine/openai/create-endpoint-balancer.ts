/**
 * Spreads requests over a model's endpoints and keeps failing ones out for a while.
 *
 * - Round-robin over the endpoints that are not cooling down.
 * - `failureThreshold` failures in a row (connection errors, timeouts, 5xx, refused credentials)
 *   put an endpoint in cooldown for `cooldownMs`, doubled with each further failure up to
 *   `maxCooldownMs`; one success clears the count. After its cooldown the endpoint gets requests
 *   again, and a failure there sends it straight back for longer.
 * - A `retry-after` (429, 503) keeps the endpoint out for at least that long, fault or not.
 */
export interface EndpointBalancer<Endpoint> {
  /** The next endpoint not cooling down and not in `exclude`, round-robin; `undefined` if none. */
  pick(exclude?: ReadonlySet<Endpoint>): Endpoint | undefined;
  /** Milliseconds until the first endpoint outside `exclude` leaves its cooldown (0: one is usable). */
  waitForEndpoint(exclude?: ReadonlySet<Endpoint>): number | undefined;
  reportSuccess(endpoint: Endpoint): void;
  reportFailure(
    endpoint: Endpoint,
    failure: { endpointFault: boolean; retryAfterMs: number | undefined },
  ): void;
  /** True while every endpoint is cooling down. */
  allCoolingDown(): boolean;
}

export interface EndpointBalancerOptions<Endpoint> {
  endpoints: readonly Endpoint[];
  failureThreshold: number;
  cooldownMs: number;
  maxCooldownMs: number;
  /** Milliseconds on any monotonic clock. Default `performance.now`. */
  now?: () => number;
}

interface EndpointHealth {
  consecutiveFailures: number;
  /** Clock time until which the endpoint is left out (0: never was). */
  coolingUntil: number;
}

export function createEndpointBalancer<Endpoint>(
  options: EndpointBalancerOptions<Endpoint>,
): EndpointBalancer<Endpoint> {
  const { endpoints } = options;
  const now = options.now ?? (() => performance.now());
  const health = new Map<Endpoint, EndpointHealth>(
    endpoints.map((endpoint) => [endpoint, { consecutiveFailures: 0, coolingUntil: 0 }]),
  );
  let cursor = 0;

  const healthOf = (endpoint: Endpoint): EndpointHealth => {
    const found = health.get(endpoint);
    if (found === undefined) throw new Error("endpoint not managed by this balancer");
    return found;
  };

  return {
    pick(exclude) {
      const time = now();
      for (let step = 0; step < endpoints.length; step++) {
        const index = (cursor + step) % endpoints.length;
        const endpoint = endpoints[index];
        if (endpoint === undefined || exclude?.has(endpoint)) continue;
        if (healthOf(endpoint).coolingUntil > time) continue;
        cursor = index + 1;
        return endpoint;
      }
      return undefined;
    },
    waitForEndpoint(exclude) {
      const time = now();
      let soonest: number | undefined;
      for (const endpoint of endpoints) {
        if (exclude?.has(endpoint)) continue;
        const wait = Math.max(0, healthOf(endpoint).coolingUntil - time);
        if (soonest === undefined || wait < soonest) soonest = wait;
      }
      return soonest;
    },
    reportSuccess(endpoint) {
      healthOf(endpoint).consecutiveFailures = 0;
    },
    reportFailure(endpoint, failure) {
      const state = healthOf(endpoint);
      const time = now();
      if (failure.endpointFault) {
        state.consecutiveFailures++;
        const beyond = state.consecutiveFailures - options.failureThreshold;
        if (beyond >= 0) {
          const cooldown = Math.min(options.maxCooldownMs, options.cooldownMs * 2 ** beyond);
          state.coolingUntil = Math.max(state.coolingUntil, time + cooldown);
        }
      }
      if (failure.retryAfterMs !== undefined) {
        state.coolingUntil = Math.max(state.coolingUntil, time + failure.retryAfterMs);
      }
    },
    allCoolingDown() {
      const time = now();
      for (const state of health.values()) if (state.coolingUntil <= time) return false;
      return true;
    },
  };
}
