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
 * - Failures in a row that all come from one tenant's requests (an account: see
 *   {@link EndpointBalancer.forTenant}) rest the endpoint for that tenant only: an upstream may
 *   answer a failure that depends on the request (a firewall's 403 for some content, a 500 for
 *   one input), and one account sending three such requests rested the endpoint, its rest
 *   doubling with each one more, for every account. Once another tenant's failure joins the run
 *   (or one with no tenant), the rest is everyone's; back from such a rest, one tenant's
 *   failures alone still rest it for that tenant only.
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
  /**
   * True while every endpoint is cooling down: for this view's tenant, as its requests find
   * them; for no tenant, as a status shows them (see `restsAtAll`: a rest for one tenant counts
   * while no attempt begun since served anyone).
   */
  allCoolingDown(): boolean;
  /** How many endpoints are cooling down now (a cooldown, or a `retry-after`), as a status shows them. */
  restingCount(): number;
  /** The balancer's clock, for `startedAt`. */
  clock(): number;
  /**
   * The same balancer as `tenant`'s requests see it: an endpoint resting for that tenant alone
   * is resting for it, and what it reports counts as that tenant's. `undefined`: no tenant (every
   * failure counts for everyone). Rests, counts and `restingCount` are shared; only a rest for
   * one tenant is that tenant's.
   */
  forTenant(tenant: string | undefined): EndpointBalancer<Endpoint>;
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

/** An endpoint's health for everyone, and its rests for one tenant each. */
interface EndpointState extends EndpointHealth {
  /**
   * Whose failures make up `consecutiveFailures`: one tenant (a string), several or one without
   * a tenant (`null`), none yet (`undefined`).
   */
  runOf: string | null | undefined;
  /** Rests for one tenant's failures alone, by tenant (their `consecutiveFailures` unused). */
  byTenant: Map<string, EndpointHealth>;
  /** When the last attempt that succeeded started (-Infinity: none yet). */
  succeededAt: number;
}

/** Doublings of the cooldown counted at most: 2 ** 40 times a millisecond is 35 years. */
const MAX_DOUBLINGS = 40;

/**
 * Tenants an endpoint keeps rests for at most; past it, the older half is forgotten (their next
 * failures count afresh), so that a crowd of failing tenants costs no scan per failure.
 */
const MAX_TENANT_RESTS = 1_000;

function createHealth(): EndpointHealth {
  return {
    consecutiveFailures: 0,
    coolingUntil: 0,
    cooledAt: Number.NEGATIVE_INFINITY,
    cooldownsInARow: 0,
    restFault: undefined,
  };
}

export function createEndpointBalancer<Endpoint>(
  options: EndpointBalancerOptions<Endpoint>,
): EndpointBalancer<Endpoint> {
  const { endpoints } = options;
  const now = options.now ?? (() => performance.now());
  // A configured first cooldown longer than the usual bound is not cut short by it.
  const longestCooldownMs = Math.max(options.maxCooldownMs, options.cooldownMs);
  const states = new Map<Endpoint, EndpointState>(
    endpoints.map((endpoint) => [
      endpoint,
      { ...createHealth(), runOf: undefined, byTenant: new Map(), succeededAt: Number.NEGATIVE_INFINITY },
    ]),
  );
  let cursor = 0;

  const stateOf = (endpoint: Endpoint): EndpointState => {
    const found = states.get(endpoint);
    if (found === undefined) throw new Error("endpoint not managed by this balancer");
    return found;
  };

  /** The rest of `tenant` alone on `state`, if it has one. */
  const restOf = (state: EndpointState, tenant: string | undefined): EndpointHealth | undefined =>
    tenant === undefined ? undefined : state.byTenant.get(tenant);

  /** Until when `endpoint` is left out of `tenant`'s requests: its rest, or its rest for that tenant. */
  const restsUntil = (state: EndpointState, tenant: string | undefined): number =>
    Math.max(state.coolingUntil, restOf(state, tenant)?.coolingUntil ?? 0);

  /** Begins (or doubles) a cooldown of `health` at `time`. */
  const coolDown = (health: EndpointHealth, time: number): void => {
    // The doubling stops at the bound, long before 2 ** n overflows (0 * Infinity is NaN).
    const doublings = Math.min(health.cooldownsInARow, MAX_DOUBLINGS);
    const cooldown = Math.min(longestCooldownMs, options.cooldownMs * 2 ** doublings);
    health.coolingUntil = Math.max(health.coolingUntil, time + cooldown);
    health.cooledAt = time;
    health.cooldownsInARow++;
    health.consecutiveFailures = 0;
  };

  /** The rest of `tenant` alone on `state`, made when missing. */
  const tenantHealth = (state: EndpointState, tenant: string): EndpointHealth => {
    let health = state.byTenant.get(tenant);
    if (health === undefined) {
      if (state.byTenant.size >= MAX_TENANT_RESTS) {
        let forget = state.byTenant.size / 2;
        for (const other of state.byTenant.keys()) {
          if (forget-- <= 0) break;
          state.byTenant.delete(other);
        }
      }
      health = createHealth();
      state.byTenant.set(tenant, health);
    }
    return health;
  };

  /**
   * Whether `state`'s endpoint rests as its status and metrics tell: for everyone, or for a
   * tenant while no attempt that began since served anyone (the only tenant of a deployment
   * with one account: a dead endpoint showed as available); not for a tenant whose requests
   * fail while others' are served.
   */
  const restsAtAll = (state: EndpointState, time: number): boolean => {
    if (state.coolingUntil > time) return true;
    for (const rest of state.byTenant.values())
      if (rest.coolingUntil > time && rest.cooledAt > state.succeededAt) return true;
    return false;
  };

  const view = (tenant: string | undefined): EndpointBalancer<Endpoint> => ({
    pick(exclude) {
      const time = now();
      for (let step = 0; step < endpoints.length; step++) {
        const index = (cursor + step) % endpoints.length;
        const endpoint = endpoints[index];
        if (endpoint === undefined || exclude?.has(endpoint)) continue;
        if (restsUntil(stateOf(endpoint), tenant) > time) continue;
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
        const wait = Math.max(0, restsUntil(stateOf(endpoint), tenant) - time);
        if (soonest === undefined || wait < soonest) soonest = wait;
      }
      return soonest;
    },
    reportSuccess(endpoint, success = {}) {
      const state = stateOf(endpoint);
      const time = now();
      const startedAt = success.startedAt ?? time;
      state.succeededAt = Math.max(state.succeededAt, startedAt);
      const own = restOf(state, tenant);
      if (tenant !== undefined && own !== undefined && startedAt >= own.cooledAt) {
        own.cooldownsInARow = 0;
        if (own.coolingUntil <= time) state.byTenant.delete(tenant);
      }
      if (startedAt < state.cooledAt) return;
      state.consecutiveFailures = 0;
      state.runOf = undefined;
      state.cooldownsInARow = 0;
    },
    reportFailure(endpoint, failure) {
      const state = stateOf(endpoint);
      const time = now();
      const startedAt = failure.startedAt ?? time;
      const wasResting = state.coolingUntil > time;
      const restedUntil = state.coolingUntil;
      const fresh = state.coolingUntil <= time && startedAt >= state.cooledAt;
      if (failure.endpointFault && fresh) {
        const own = restOf(state, tenant);
        const ownRested = own !== undefined && own.cooldownsInARow > 0;
        // Back from a rest for this tenant alone: one failure of its own sends it back, for it.
        if (ownRested && own.coolingUntil <= time && startedAt >= own.cooledAt) {
          coolDown(own, time);
          own.restFault = failure.operatorFault;
        }
        state.consecutiveFailures++;
        if (tenant === undefined) state.runOf = null;
        else if (state.runOf === undefined) state.runOf = tenant;
        else if (state.runOf !== tenant) state.runOf = null;
        if (state.runOf === null) {
          // Several tenants' failures (or one's without a tenant): the endpoint rests for all.
          // Back from such a rest, one more failure sends it back (the run already has two).
          const needed = state.cooldownsInARow > 0 ? 1 : options.failureThreshold;
          if (state.consecutiveFailures >= needed) {
            coolDown(state, time);
            state.runOf = undefined;
          }
        } else if (state.consecutiveFailures >= options.failureThreshold) {
          // All of one tenant's requests, even back from a rest for all: the rest is its own
          // (regression: one account kept the endpoint resting for everyone, doubling, with a
          // failure each time a rest for all ended). One resting already was sent back above.
          if (!ownRested) {
            const health = tenantHealth(state, state.runOf);
            coolDown(health, time);
            health.restFault = failure.operatorFault;
          }
          // Either way the run starts over: one tenant's failures piling up in it would make any
          // other tenant's single failure a rest for all.
          state.consecutiveFailures = 0;
          state.runOf = undefined;
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
        const state = stateOf(endpoint);
        const own = restOf(state, tenant);
        // The rest that keeps it out longest is the one the request waits for.
        const rest = own !== undefined && own.coolingUntil > state.coolingUntil ? own : state;
        if (rest.coolingUntil <= time || rest.restFault === undefined) return [];
        faults.push(rest.restFault);
      }
      return faults;
    },
    allCoolingDown() {
      const time = now();
      for (const state of states.values()) {
        const rests = tenant === undefined ? restsAtAll(state, time) : restsUntil(state, tenant) > time;
        if (!rests) return false;
      }
      return true;
    },
    restingCount() {
      const time = now();
      let resting = 0;
      for (const state of states.values()) if (restsAtAll(state, time)) resting++;
      return resting;
    },
    clock: now,
    forTenant: view,
  });

  return view(undefined);
}
