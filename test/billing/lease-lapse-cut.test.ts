/**
 * A replica cut off from a shared store stops its requests before their leases lapse: once they
 * have, the other replicas release its reservations while its requests still run, and their
 * charges, recorded once it is back, were capped at what the account had left (found by an outage
 * review: a partitioned replica streamed on for a minute, and 0.27 of its 0.485 was never charged).
 */
import { describe, expect, it } from "vitest";
import { InFlightRequests, leaseLapsingError } from "../../src/api/in-flight-requests.ts";
import { keepLeases, LAPSE_CUT_MS, LEASE_RENEWAL_MS } from "../../src/billing/keep-leases.ts";
import { LeaseClock } from "../../src/billing/lease-clock.ts";
import type { Store } from "../../src/store/store.ts";

/** Lease keeping on a store the test takes away and gives back, on the test's clock. */
function keeper(options: { sweep: boolean; live: string[] }) {
  const state = { now: 1_000_000, down: false, lapsing: 0, renewed: 0 };
  const failIfDown = () => {
    if (state.down) throw new Error("connect ECONNREFUSED");
  };
  const store = {
    async renewLeases() {
      failIfDown();
      state.renewed++;
    },
    async readClock() {
      failIfDown();
      return new Date(state.now);
    },
    async releaseReservations() {
      return 0;
    },
    async listReservations() {
      return [];
    },
  } as unknown as Store;
  const leases = keepLeases({
    store,
    replicaId: "r1",
    liveReservationIds: () => options.live,
    sweep: options.sweep,
    logger: { warn() {}, error() {} },
    intervalMs: 0,
    clock: new LeaseClock({ steadyNow: () => state.now, wallNow: () => state.now }),
    readStoreTime: async () => {
      failIfDown();
      return state.now;
    },
    onLapsing: () => {
      state.lapsing++;
    },
  });
  /** Moves the clock on by `ms` and runs a round. */
  const roundAfter = async (ms: number) => {
    state.now += ms;
    await leases.tick();
  };
  return { state, roundAfter };
}

describe("a replica that cannot renew its leases", () => {
  it("is told once, a renewal interval before they lapse, and again only after a renewal", async () => {
    const { state, roundAfter } = keeper({ sweep: true, live: ["reservation-1"] });
    await roundAfter(0);
    expect(state.renewed).toBe(1);
    state.down = true;
    await roundAfter(LEASE_RENEWAL_MS);
    expect(state.lapsing).toBe(0);
    // The second round after the renewal, though its timer fires a little early.
    await roundAfter(LEASE_RENEWAL_MS - 50);
    expect(state.lapsing).toBe(1);
    expect(2 * LEASE_RENEWAL_MS - 50).toBeGreaterThanOrEqual(LAPSE_CUT_MS);
    await roundAfter(LEASE_RENEWAL_MS);
    expect(state.lapsing).toBe(1);
    state.down = false;
    await roundAfter(LEASE_RENEWAL_MS);
    state.down = true;
    await roundAfter(LEASE_RENEWAL_MS);
    expect(state.lapsing).toBe(1);
    await roundAfter(LEASE_RENEWAL_MS);
    expect(state.lapsing).toBe(2);
  });

  it("is not told after one failed round when the next one renews (regression: every request cut on a store that answered again)", async () => {
    const { state, roundAfter } = keeper({ sweep: true, live: ["reservation-1"] });
    await roundAfter(0);
    state.down = true;
    await roundAfter(LEASE_RENEWAL_MS);
    state.down = false;
    // Past LAPSE_CUT_MS since the last renewal, but this round renews first.
    await roundAfter(LEASE_RENEWAL_MS);
    expect(2 * LEASE_RENEWAL_MS).toBeGreaterThanOrEqual(LAPSE_CUT_MS);
    expect(state.lapsing).toBe(0);
    expect(state.renewed).toBe(2);
  });

  it("is not told with nothing reserved, nor on a store no other replica shares", async () => {
    for (const setup of [
      { sweep: true, live: [] },
      { sweep: false, live: ["reservation-1"] },
    ]) {
      const { state, roundAfter } = keeper(setup);
      await roundAfter(0);
      state.down = true;
      for (let round = 0; round < 5; round++) await roundAfter(LEASE_RENEWAL_MS);
      expect(state.lapsing).toBe(0);
    }
  });
});

describe("the requests stopped for it", () => {
  it("end with a 503 store_unavailable that says why and asks for a retry", () => {
    const inFlight = new InFlightRequests();
    const running = new AbortController();
    inFlight.track(running);
    inFlight.abortAll(leaseLapsingError());
    expect(running.signal.reason).toMatchObject({
      code: "store_unavailable",
      status: 503,
      retryAfterSeconds: 5,
      message:
        "This server lost its connection to the database for too long to keep the request's balance reserved; the request was stopped. Retry it.",
    });
  });
});
