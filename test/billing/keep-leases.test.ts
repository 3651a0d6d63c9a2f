import { afterEach, describe, expect, it } from "vitest";
import { keepLeases, LEASE_RENEWAL_MS } from "../../src/billing/keep-leases.ts";
import { LeaseClock } from "../../src/billing/lease-clock.ts";
import { RESERVATION_LEASE_MS } from "../../src/billing/reserve-and-settle.ts";
import { openStore } from "../../src/store/open-store.ts";
import type { Store } from "../../src/store/store.ts";
import { startTcpProxy, type TcpProxy } from "../cluster/tcp-proxy.ts";
import { createPostgresTestSchema } from "../store/postgres-test-database.ts";
import { makeAccount, makeReservation } from "../store/store-fixtures.ts";

/**
 * Replicas on one PostgreSQL database, each reaching it through a TCP proxy of its own, so that
 * the test can take the database away from them (an outage, a failover) and give it back. Time
 * is the test's: the database's clock is one number the test moves forward, and each replica's
 * steady clock follows it (from an origin of its own where a test says so).
 */
const probe = await createPostgresTestSchema();
if ("skipped" in probe) console.warn(`Skipping the lease-keeping tests: ${probe.skipped}.`);

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const INTERVAL_MS = LEASE_RENEWAL_MS;
const quiet = { warn() {}, error() {} };

describe.skipIf("skipped" in probe)("keeping reservation leases on a shared store", () => {
  let clock = Date.UTC(2026, 0, 1);
  const now = () => clock;

  /** A replica's own connection to the database, through a proxy the test controls. */
  async function connect(): Promise<{ store: Store; proxy: TcpProxy }> {
    if ("skipped" in probe) throw new Error("no PostgreSQL");
    const url = new URL(probe.url);
    const proxy = await startTcpProxy({ targetPort: Number(url.port || 5432), mode: "forward" });
    url.port = String(proxy.port);
    url.hostname = "127.0.0.1";
    const store = await openStore(url.toString());
    cleanups.push(() => proxy.close());
    cleanups.push(() => store.close());
    return { store, proxy };
  }

  /**
   * A replica's lease keeping on a shared store, its rounds run by the test on the test's clock;
   * `ownClockMs`: how far the replica's own clocks read from the database's.
   */
  const keeper = (
    store: Store,
    replicaId: string,
    live: string[],
    ownClockMs = 0,
    hooks: Pick<Parameters<typeof keepLeases>[0], "afterSweep" | "owedElsewhere"> = {},
  ) =>
    keepLeases({
      ...hooks,
      store,
      replicaId,
      liveReservationIds: () => live,
      sweep: true,
      logger: quiet,
      intervalMs: 0,
      clock: new LeaseClock({ steadyNow: () => now() + ownClockMs, wallNow: () => now() + ownClockMs }),
      // Asks the database (through the replica's proxy), then tells the test's time.
      readStoreTime: async () => {
        await store.readClock();
        return now();
      },
    });

  /** Two replicas on a fresh schema, the owner of requests and a sweeper, and an account of 1,000. */
  async function startOwnerAndSweeper() {
    if ("skipped" in probe) throw new Error("no PostgreSQL");
    const schema = probe;
    cleanups.push(() => schema.drop());
    const owner = await connect();
    const sweeper = await connect();
    const account = makeAccount({ name: "acme", balanceNano: 1_000n });
    expect(await owner.store.insertAccount(account)).toBe("created");
    return { owner, sweeper, account };
  }

  it("releases no live reservation after an outage longer than the lease, and still releases a stopped replica's", async () => {
    if ("skipped" in probe) return;
    const { owner, sweeper, account } = await startOwnerAndSweeper();
    const lease = () => new Date(clock + RESERVATION_LEASE_MS);
    // A request running on the owner, and one left by a replica that stopped for good.
    const live = makeReservation({
      accountId: account.id,
      amountNano: 600n,
      replicaId: "owner",
      leaseExpiresAt: lease(),
    });
    const orphan = makeReservation({
      accountId: account.id,
      amountNano: 100n,
      replicaId: "gone",
      leaseExpiresAt: lease(),
    });
    expect(await owner.store.reserve(live)).toBe("reserved");
    expect(await owner.store.reserve(orphan)).toBe("reserved");

    const keepOwner = keeper(owner.store, "owner", [live.id]);
    const keepSweeper = keeper(sweeper.store, "sweeper", []);
    const openIds = async () => (await sweeper.store.listReservations()).map((each) => each.id).sort();

    // Both have answered for a long time: rounds as usual.
    for (let round = 0; round < 3; round++) {
      await keepOwner.tick();
      await keepSweeper.tick();
      clock += INTERVAL_MS;
    }
    expect(await openIds()).toEqual([live.id, orphan.id].sort());

    // The database is gone for longer than a lease: every round fails on both.
    owner.proxy.setMode("cut");
    sweeper.proxy.setMode("cut");
    for (let round = 0; round < 4; round++) {
      await keepOwner.tick();
      await keepSweeper.tick();
      clock += INTERVAL_MS;
    }
    owner.proxy.setMode("forward");
    sweeper.proxy.setMode("forward");

    // Back: the sweeper's round comes first. Both leases have expired, but the owner has not
    // had its round yet: nothing may go.
    await keepSweeper.tick();
    expect(await openIds()).toEqual([live.id, orphan.id].sort());
    clock += INTERVAL_MS / 2;
    await keepOwner.tick();
    clock += INTERVAL_MS / 2;
    await keepSweeper.tick();
    expect(await openIds()).toEqual([live.id, orphan.id].sort());

    // A whole interval and a margin later: the stopped replica's money goes back, the live one stays.
    clock += INTERVAL_MS / 2;
    await keepOwner.tick();
    clock += INTERVAL_MS / 2;
    await keepSweeper.tick();
    expect(await openIds()).toEqual([live.id]);
    expect(await sweeper.store.getAccountMoney(account.id)).toMatchObject({ reservedNano: 600n });
  });

  it("records gone replicas' journals after a sweep, only once the database has answered a while", async () => {
    if ("skipped" in probe) return;
    const { sweeper } = await startOwnerAndSweeper();
    let adoptions = 0;
    const keep = keepLeases({
      store: sweeper.store,
      replicaId: "sweeper",
      liveReservationIds: () => [],
      sweep: true,
      logger: quiet,
      intervalMs: 0,
      clock: new LeaseClock({ steadyNow: now, wallNow: now }),
      readStoreTime: async () => {
        await sweeper.store.readClock();
        return now();
      },
      afterSweep: async () => {
        adoptions++;
      },
    });
    // The first rounds: the database has not answered for a whole interval and a margin yet.
    await keep.tick();
    clock += INTERVAL_MS;
    await keep.tick();
    expect(adoptions).toBe(0);
    clock += INTERVAL_MS;
    await keep.tick();
    expect(adoptions).toBe(1);
    // A round the database does not answer sweeps nothing, and records nothing.
    sweeper.proxy.setMode("cut");
    clock += INTERVAL_MS;
    await keep.tick();
    expect(adoptions).toBe(1);
    sweeper.proxy.setMode("forward");
  });

  it("judges leases on the database's clock, whatever a replica's own clock reads", async () => {
    if ("skipped" in probe) return;
    const { owner, sweeper, account } = await startOwnerAndSweeper();
    const live = makeReservation({
      accountId: account.id,
      amountNano: 600n,
      replicaId: "owner",
      leaseExpiresAt: new Date(clock + RESERVATION_LEASE_MS),
    });
    expect(await owner.store.reserve(live)).toBe("reserved");
    // The sweeper's clock reads 90 s ahead (a VM resumed with a stale clock, NTP stepping it),
    // beyond a lease: by its own time the owner's live lease would have expired.
    const keepOwner = keeper(owner.store, "owner", [live.id]);
    const keepSweeper = keeper(sweeper.store, "sweeper", [], 90_000);
    for (let round = 0; round < 4; round++) {
      await keepOwner.tick();
      await keepSweeper.tick();
      clock += INTERVAL_MS;
    }
    expect((await sweeper.store.listReservations()).map((each) => each.id)).toEqual([live.id]);
    expect(await sweeper.store.getAccountMoney(account.id)).toMatchObject({ reservedNano: 600n });
  });

  it("waits again after a round whose store call hung, as a paused database answers all at once when it resumes", async () => {
    if ("skipped" in probe) return;
    cleanups.push(() => probe.drop());
    const sweeper = await connect();
    const account = makeAccount({ name: "acme", balanceNano: 1_000n });
    expect(await sweeper.store.insertAccount(account)).toBe("created");
    const expired = makeReservation({
      accountId: account.id,
      amountNano: 100n,
      replicaId: "other",
      leaseExpiresAt: new Date(clock - 1),
    });
    expect(await sweeper.store.reserve(expired)).toBe("reserved");
    const keep = keeper(sweeper.store, "sweeper", []);
    await keep.tick();
    clock += INTERVAL_MS;
    // The database stops answering mid-round, for longer than a lease, then resumes.
    sweeper.proxy.setMode("pause");
    const hung = keep.tick();
    await new Promise((resolve) => setTimeout(resolve, 50));
    clock += RESERVATION_LEASE_MS;
    sweeper.proxy.setMode("forward");
    await hung;
    expect((await sweeper.store.listReservations()).map((each) => each.id)).toEqual([expired.id]);
    // Answering quickly for an interval and a margin: now it sweeps.
    clock += INTERVAL_MS;
    await keep.tick();
    expect((await sweeper.store.listReservations()).map((each) => each.id)).toEqual([expired.id]);
    clock += INTERVAL_MS;
    await keep.tick();
    expect(await sweeper.store.listReservations()).toEqual([]);
  });

  it("keeps renewing its own leases while a sweep waits to record a gone replica's journal", async () => {
    if ("skipped" in probe) return;
    const { owner, account } = await startOwnerAndSweeper();
    const live = makeReservation({
      accountId: account.id,
      amountNano: 600n,
      replicaId: "owner",
      leaseExpiresAt: new Date(clock + RESERVATION_LEASE_MS),
    });
    expect(await owner.store.reserve(live)).toBe("reserved");
    // Recording the journal waits (its account's row locked by another session, up to a
    // statement's timeout per charge).
    let recorded: () => void = () => {};
    const recording = new Promise<void>((resolve) => {
      recorded = resolve;
    });
    let sweeps = 0;
    const keep = keeper(owner.store, "owner", [live.id], 0, {
      afterSweep: async () => {
        sweeps++;
        await recording;
      },
    });
    await keep.tick();
    clock += INTERVAL_MS;
    await keep.tick();
    clock += INTERVAL_MS;
    const sweeping = keep.tick();
    while (sweeps === 0) await new Promise((resolve) => setTimeout(resolve, 10));
    // Rounds go on beside it: the lease is renewed from the database's time now.
    const rounds: Promise<void>[] = [];
    const leaseOf = async () => (await owner.store.listReservations())[0]?.leaseExpiresAt.getTime();
    for (let round = 0; round < 3; round++) {
      clock += INTERVAL_MS;
      rounds.push(keep.tick());
      const renewedBy = Date.now() + 2_000;
      while ((await leaseOf()) !== clock + RESERVATION_LEASE_MS && Date.now() < renewedBy)
        await new Promise((resolve) => setTimeout(resolve, 10));
      expect(await leaseOf()).toBe(clock + RESERVATION_LEASE_MS);
    }
    recorded();
    await sweeping;
    await Promise.all(rounds);
    // One sweep at a time.
    expect(sweeps).toBe(1);
  });

  it("releases nothing in a sweep that could not read which reservations other replicas' journals still owe", async () => {
    if ("skipped" in probe) return;
    const { sweeper, account } = await startOwnerAndSweeper();
    const expired = makeReservation({
      accountId: account.id,
      amountNano: 100n,
      replicaId: "gone",
      leaseExpiresAt: new Date(clock - 1),
    });
    expect(await sweeper.store.reserve(expired)).toBe("reserved");
    let readable = false;
    const keep = keeper(sweeper.store, "sweeper", [], 0, {
      owedElsewhere: async () => {
        if (!readable) throw new Error("the journals kept moving");
        return [];
      },
    });
    await keep.tick();
    clock += INTERVAL_MS;
    await keep.tick();
    clock += INTERVAL_MS;
    await keep.tick();
    expect((await sweeper.store.listReservations()).map((each) => each.id)).toEqual([expired.id]);
    readable = true;
    clock += INTERVAL_MS;
    await keep.tick();
    expect(await sweeper.store.listReservations()).toEqual([]);
  });
});
