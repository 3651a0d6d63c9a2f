/**
 * A PostgreSQL replica whose settles failed (its account row locked by another session) wrote the
 * owed charges to its journal in the shared `charge_journal_dir`, answered its clients, and was
 * killed for good. Another replica's lease sweep released its expired reservations about a minute
 * later, but recorded its journal only at its next rescan (every 5 minutes, and only once the
 * file was a lease old): meanwhile the money was neither reserved nor charged, the account spent
 * it, and each charge was then capped at what was left (1,154,000 of 3,195,000 nano charged;
 * `audit` passed). A sweep now keeps the reservations of the charges journals hold and records
 * those journals at once, each charge against its own reservation.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { ChargeJournal } from "../../src/billing/charge-journal.ts";
import { keepLeases, LEASE_RENEWAL_MS } from "../../src/billing/keep-leases.ts";
import { LeaseClock } from "../../src/billing/lease-clock.ts";
import { openChargeJournal } from "../../src/billing/open-charge-journal.ts";
import { RESERVATION_LEASE_MS } from "../../src/billing/reserve-and-settle.ts";
import { claimReplicaId, openStore } from "../../src/store/open-store.ts";
import type { Store } from "../../src/store/store.ts";
import { createPostgresTestSchema } from "../store/postgres-test-database.ts";
import { makeAccount, makeReservation, makeSettlement } from "../store/store-fixtures.ts";

const probe = await createPostgresTestSchema();
if ("skipped" in probe) console.warn(`Skipping the gone replica's journal sweep tests: ${probe.skipped}.`);

const cleanups: (() => Promise<unknown> | unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

describe.skipIf("skipped" in probe)(
  "a lease sweep and the journal of a replica killed while it owed charges",
  () => {
    /** The database's time as the test tells it; the sweeper's clocks follow it. */
    let clock = Date.UTC(2026, 0, 1);
    const now = () => clock;

    /**
     * A fresh store with an account of 10,000 and the reservation of 3,000 a killed replica
     * (`gone-1`) left, its lease expired; the charge of 2,500 it owed is in its journal, written
     * just now (under `journalSuffix` after its name: one another replica took to record); and a
     * sweeper replica started on it, its lease keeping driven by the test.
     */
    async function start(journalSuffix = "") {
      if ("skipped" in probe) throw new Error("no PostgreSQL");
      const schema = probe;
      cleanups.push(() => schema.drop());
      const store = await openStore(schema.url);
      cleanups.push(() => store.close());
      const folder = mkdtempSync(join(tmpdir(), "tollgate-journal-sweep-"));
      cleanups.push(() => rmSync(folder, { recursive: true, force: true }));
      const account = makeAccount({ name: "acme", balanceNano: 10_000n });
      expect(await store.insertAccount(account)).toBe("created");
      const reservation = makeReservation({
        accountId: account.id,
        amountNano: 3_000n,
        replicaId: "gone-1",
        leaseExpiresAt: new Date(clock - 1),
      });
      expect(await store.reserve(reservation)).toBe("reserved");
      const tagProbe = await claimReplicaId(schema.url, { replicaId: "store-tag-probe" });
      await tagProbe?.close();
      const storeTag = tagProbe?.storeTag ?? "";
      const journalPath = join(folder, `pending-charges-gone-1.${storeTag}.jsonl${journalSuffix}`);
      const usage = makeSettlement(reservation, 2_500n, { createdAt: new Date() });
      new ChargeJournal(journalPath).owe(usage);
      // The sweeper's start ran its adoption of gone replicas' journals (this one is too recent
      // for it), and so just ran the 5-minute rescan too.
      const opened = await openChargeJournal({
        databaseUrl: schema.url,
        store,
        logger: pino({ level: "silent" }),
        replica: { id: "sweeper", storeTag, folder },
      });
      const keeper = keepLeases({
        store,
        replicaId: "sweeper",
        liveReservationIds: () => [],
        sweep: true,
        logger: { warn() {}, error() {} },
        intervalMs: 0,
        clock: new LeaseClock({ steadyNow: now, wallNow: now }),
        readStoreTime: async () => {
          await store.readClock();
          return now();
        },
        afterSweep: opened.adoptOrphans,
        owedElsewhere: opened.owedElsewhere,
      });
      cleanups.push(() => keeper.stop());
      return { store, account, reservation, journalPath, keeper, schemaUrl: schema.url };
    }

    /** Rounds until the first that may sweep: the store must have answered for 25 s on end. */
    async function roundsUntilSweep(keeper: { tick(): Promise<void> }) {
      await keeper.tick();
      clock += LEASE_RENEWAL_MS;
      await keeper.tick();
      clock += LEASE_RENEWAL_MS;
    }

    async function expectChargedInFull(store: Store, accountId: string, reservationId: string) {
      const rows = (await store.listUsage()).filter((row) => row.id === reservationId);
      expect(rows.map((row) => row.costNano)).toEqual([2_500n]);
      expect(await store.listReservations()).toEqual([]);
      expect(await store.getAccountMoney(accountId)).toMatchObject({
        balanceNano: 7_500n,
        reservedNano: 0n,
        spentNano: 2_500n,
      });
      expect(await store.audit()).toEqual([]);
    }

    it("records the charges in full at its first sweep, against their reservation, before the account can spend the money", async () => {
      if ("skipped" in probe) return;
      const { store, account, reservation, journalPath, keeper } = await start();
      await roundsUntilSweep(keeper);
      await keeper.tick();
      await expectChargedInFull(store, account.id, reservation.id);
      expect(new ChargeJournal(journalPath).readOwed()).toEqual([]);
    });

    it("keeps the reservation while the gone replica's id is still claimed (its machine vanished, its session not yet ended), and records the charge once it is free", async () => {
      if ("skipped" in probe) return;
      const { store, account, reservation, journalPath, keeper, schemaUrl } = await start();
      const lingering = await claimReplicaId(schemaUrl, { replicaId: "gone-1" });
      cleanups.push(() => lingering?.close());
      await roundsUntilSweep(keeper);
      await keeper.tick();
      // Not recorded, not released: the money stays reserved, its lease renewed.
      expect(await store.listUsage()).toEqual([]);
      const kept = await store.listReservations();
      expect(kept.map((each) => each.id)).toEqual([reservation.id]);
      expect(kept[0]?.leaseExpiresAt.getTime()).toBe(clock + RESERVATION_LEASE_MS);
      expect(new ChargeJournal(journalPath).readOwed().map((usage) => usage.id)).toEqual([reservation.id]);
      // Later than the reservation's first lease would have run: still kept.
      clock += RESERVATION_LEASE_MS + 1;
      await keeper.tick();
      expect((await store.listReservations()).map((each) => each.id)).toEqual([reservation.id]);
      expect(await store.getAccountMoney(account.id)).toMatchObject({ reservedNano: 3_000n });

      await lingering?.close();
      clock += LEASE_RENEWAL_MS;
      await keeper.tick();
      await expectChargedInFull(store, account.id, reservation.id);
    });

    it("keeps the reservation while another replica records the journal (taken, renamed `.adopting-`)", async () => {
      if ("skipped" in probe) return;
      const { store, reservation, keeper } = await start(".adopting-0a1b2c");
      await roundsUntilSweep(keeper);
      clock += RESERVATION_LEASE_MS;
      await keeper.tick();
      // The other replica's settle, whenever it comes, finds the reservation and charges in full.
      expect((await store.listReservations()).map((each) => each.id)).toEqual([reservation.id]);
      expect(await store.listUsage()).toEqual([]);
    });
  },
);
