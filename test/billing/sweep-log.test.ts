import { describe, expect, it } from "vitest";
import { keepLeases, LEASE_RENEWAL_MS, SWEEP_MARGIN_MS } from "../../src/billing/keep-leases.ts";
import { LeaseClock } from "../../src/billing/lease-clock.ts";
import { openStore } from "../../src/store/open-store.ts";
import { makeAccount, makeReservation } from "../store/store-fixtures.ts";
import { makeTemporaryDirectory, newDatabaseUrl } from "../store/temporary-directory.ts";

const directory = makeTemporaryDirectory();

describe("a lease sweep's line", () => {
  it("names the released reservations' requests and replicas, the first few and how many more", async () => {
    const store = await openStore(newDatabaseUrl(directory), { owner: true });
    try {
      let clock = Date.UTC(2026, 0, 1);
      const now = () => clock;
      const account = makeAccount({ name: "held", balanceNano: 1_000n });
      await store.insertAccount(account);
      // Seven reservations whose lease expired (of a replica gone, and of reserves that went
      // through unanswered), and one whose lease runs.
      for (let index = 0; index < 7; index++) {
        await store.reserve(
          makeReservation({
            accountId: account.id,
            amountNano: 10n,
            requestId: `req_expired_${index}`,
            replicaId: index < 4 ? "gone" : "partitioned",
            leaseExpiresAt: new Date(clock - 60_000),
            createdAt: new Date(clock - 120_000 + index),
          }),
        );
      }
      await store.reserve(
        makeReservation({
          accountId: account.id,
          amountNano: 10n,
          requestId: "req_live",
          replicaId: "alive",
          leaseExpiresAt: new Date(clock + 600_000),
        }),
      );
      const lines: { fields: object; message: string }[] = [];
      const keep = keepLeases({
        store,
        replicaId: "sweeper",
        liveReservationIds: () => [],
        sweep: true,
        logger: { warn: (fields, message) => lines.push({ fields, message }), error() {} },
        intervalMs: 0,
        clock: new LeaseClock({ steadyNow: now, wallNow: now }),
        readStoreTime: async () => now(),
      });
      await keep.tick();
      clock += LEASE_RENEWAL_MS + SWEEP_MARGIN_MS;
      await keep.tick();
      expect(lines).toEqual([
        {
          message: "released reservations whose lease expired",
          fields: {
            released: 7,
            reservations: [0, 1, 2, 3, 4].map((index) => ({
              requestId: `req_expired_${index}`,
              replicaId: index < 4 ? "gone" : "partitioned",
            })),
            more: 2,
          },
        },
      ]);
      expect((await store.listReservations()).map((reservation) => reservation.requestId)).toEqual([
        "req_live",
      ]);
    } finally {
      await store.close();
    }
  });
});
