/**
 * Spreads requests over a model's endpoints and keeps failing ones out for a while.
 *
 * - Round-robin over the endpoints that are not cooling down.
 * - `failureThreshold` failures in a row (connection errors, timeouts, 5xx, refused credentials,
 *   answers broken off) put an endpoint in cooldown for `cooldownMs`; one success (an answer that
 *   came whole, not merely one that began) clears the count. After its cooldown the endpoint
 *   gets requests again, and a failure of one of those sends it straight back for twice as long
 *   (up to `maxCooldownMs`, or `cooldownMs` when that is longer); a success ends the doubling.
 * - Only what an attempt started since the endpoint's last cooldown began says anything new: the
 *   failures of attempts already under way when it began (a blip that hit fifty requests at once)
 *   and failures reported while it rests neither lengthen nor double the rest, and the successes
 *   of such attempts (long answers that were still streaming) do not end the doubling. Callers
 *   say when an attempt started (`startedAt`, on {@link EndpointBalancer.clock}).
 * - A `retry-after` (429, 503) keeps the endpoint out for at least that long, fault or not.
 * - A rest begun or lengthened by a failure only the operator can mend (a refused api_key, a
 *   missing model) remembers what it was ({@link EndpointBalancer.operatorFaults}), so that a
 *   request that finds every endpoint resting can be told so, as the request that failed was.
 */
export interface EndpointBalancer<Endpoint> {
  /** The next endpoint not cooling down and not in `exclude`, round-robin; `undefined` if none. */
  pick(exclude?: ReadonlySet<Endpoint>): Endpoint | undefined;
  /** Milliseconds until the first endpoint outside `exclude` leaves its cooldown (0: one is usable). */
  waitForEndpoint(exclude?: ReadonlySet<Endpoint>): number | undefined;
  reportSuccess(
    endpoint: Endpoint,
    success?: {
      /** When the attempt started, on {@link clock}; unknown counts as now. */
      startedAt?: number | undefined;
    },
  ): void;
  reportFailure(
    endpoint: Endpoint,
    failure: {
      endpointFault: boolean;
      retryAfterMs: number | undefined;
      /** When the failed attempt started, on {@link clock}; unknown counts as now. */
      startedAt?: number | undefined;
      /** What failed, when only the operator can mend it (see {@link operatorFaults}). */
      operatorFault?: string | undefined;
    },
  ): void;
  /**
   * When every endpoint outside `exclude` rests and each began its rest (or last lengthened it)
   * for a failure only the operator can mend, what those failures were (`operatorFault`), in the
   * endpoints' order; otherwise an empty list.
   */
  operatorFaults(exclude?: ReadonlySet<Endpoint>): string[];
  /** True while every endpoint is cooling down. */
  allCoolingDown(): boolean;
  /** How many endpoints are cooling down now (a cooldown, or a `retry-after`). */
  restingCount(): number;
  /** The balancer's clock, for `startedAt`. */
  clock(): number;
}

export interface EndpointBalancerOptions<Endpoint> {
  endpoints: readonly Endpoint[];
  failureThreshold: number;
  cooldownMs: number;
  maxCooldownMs: number;
  /** Milliseconds on any monotonic clock. Default `performance.now`. */
  now?: () => number;
  /** Told when an endpoint begins to rest (a cooldown, or a `retry-after`). */
  onRest?: ((endpoint: Endpoint) => void) | undefined;
}

interface EndpointHealth {
  consecutiveFailures: number;
  /** Clock time until which the endpoint is left out (0: never was). */
  coolingUntil: number;
  /** When its last cooldown for faults began (-Infinity: none yet). */
  cooledAt: number;
  /** Cooldowns for faults in a row, without a success between: the next one lasts 2^this times as long. */
  cooldownsInARow: number;
  /** The `operatorFault` of the failure that began or last lengthened the rest, if it had one. */
  restFault: string | undefined;
}

/** Doublings of the cooldown counted at most: 2 ** 40 times a millisecond is 35 years. */
const MAX_DOUBLINGS = 40;

export function createEndpointBalancer<Endpoint>(
  options: EndpointBalancerOptions<Endpoint>,
): EndpointBalancer<Endpoint> {
  const { endpoints } = options;
  const now = options.now ?? (() => performance.now());
  // A configured first cooldown longer than the usual bound is not cut short by it.
  const longestCooldownMs = Math.max(options.maxCooldownMs, options.cooldownMs);
  const health = new Map<Endpoint, EndpointHealth>(
    endpoints.map((endpoint) => [
      endpoint,
      {
        consecutiveFailures: 0,
        coolingUntil: 0,
        cooledAt: Number.NEGATIVE_INFINITY,
        cooldownsInARow: 0,
        restFault: undefined,
      },
    ]),
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
    reportSuccess(endpoint, success = {}) {
      const state = healthOf(endpoint);
      if ((success.startedAt ?? now()) < state.cooledAt) return;
      state.consecutiveFailures = 0;
      state.cooldownsInARow = 0;
    },
    reportFailure(endpoint, failure) {
      const state = healthOf(endpoint);
      const time = now();
      const startedAt = failure.startedAt ?? time;
      const wasResting = state.coolingUntil > time;
      const restedUntil = state.coolingUntil;
      const fresh = state.coolingUntil <= time && startedAt >= state.cooledAt;
      if (failure.endpointFault && fresh) {
        state.consecutiveFailures++;
        // Back from a rest, one failure sends it back; otherwise it takes the threshold.
        const needed = state.cooldownsInARow > 0 ? 1 : options.failureThreshold;
        if (state.consecutiveFailures >= needed) {
          // The doubling stops at the bound, long before 2 ** n overflows (0 * Infinity is NaN).
          const doublings = Math.min(state.cooldownsInARow, MAX_DOUBLINGS);
          const cooldown = Math.min(longestCooldownMs, options.cooldownMs * 2 ** doublings);
          state.coolingUntil = Math.max(state.coolingUntil, time + cooldown);
          state.cooledAt = time;
          state.cooldownsInARow++;
          state.consecutiveFailures = 0;
        }
      }
      if (failure.retryAfterMs !== undefined) {
        state.coolingUntil = Math.max(state.coolingUntil, time + failure.retryAfterMs);
      }
      if (state.coolingUntil > restedUntil) state.restFault = failure.operatorFault;
      if (!wasResting && state.coolingUntil > time) options.onRest?.(endpoint);
    },
    operatorFaults(exclude) {
      const time = now();
      const faults: string[] = [];
      for (const endpoint of endpoints) {
        if (exclude?.has(endpoint)) continue;
        const state = healthOf(endpoint);
        if (state.coolingUntil <= time || state.restFault === undefined) return [];
        faults.push(state.restFault);
      }
      return faults;
    },
    allCoolingDown() {
      const time = now();
      for (const state of health.values()) if (state.coolingUntil <= time) return false;
      return true;
    },
    restingCount() {
      const time = now();
      let resting = 0;
      for (const state of health.values()) if (state.coolingUntil > time) resting++;
      return resting;
    },
    clock: now,
  };
}
