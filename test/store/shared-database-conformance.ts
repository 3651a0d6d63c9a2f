import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { Account } from "../../src/store/store.ts";
import type { StoreClient } from "./open-store-in-worker.ts";
import type { SharedDatabase } from "./store-conformance.ts";
import { makeAccount, makeCredit, makeReservation, makeSettlement } from "./store-fixtures.ts";

/** The tests that need several connections to one database, or to change it behind the store. */
export function describeSharedDatabaseConformance(openSharedDatabase: () => Promise<SharedDatabase>): void {
  describe("with several connections", () => {
    let shared: SharedDatabase;
    let clients: StoreClient[] = [];

    beforeEach(async () => {
      shared = await openSharedDatabase();
      clients = [];
    });

    afterEach(async () => {
      await Promise.all(clients.map((client) => client.close()));
      await shared.close();
    });

    async function openAccount(balanceNano: bigint, name = "acme"): Promise<Account> {
      const account = makeAccount({ name, balanceNano });
      await shared.store.insertAccount(account);
      return account;
    }

    it("never reserves more than the balance, whatever the concurrency", async () => {
      const account = await openAccount(100n);
      clients = await Promise.all([1, 2, 3, 4].map(() => shared.openClient()));
      const attemptsPerClient = 40;
      const results = await Promise.all(
        clients.flatMap((client, clientIndex) =>
          Array.from({ length: attemptsPerClient }, () =>
            client.reserve(
              makeReservation({ accountId: account.id, amountNano: 3n, replicaId: `client-${clientIndex}` }),
            ),
          ),
        ),
      );
      const reserved = results.filter((result) => result === "reserved").length;
      // 100 / 3: every attempt ran, so exactly as many fit as the balance allows.
      expect(reserved).toBe(33);
      expect(results.filter((result) => result === "insufficient_balance")).toHaveLength(
        clients.length * attemptsPerClient - 33,
      );
      expect(await shared.store.getAccountMoney(account.id)).toEqual({
        balanceNano: 100n,
        reservedNano: 99n,
        spentNano: 0n,
      });
      expect(await shared.store.listReservations()).toHaveLength(33);
      const problems = await shared.store.audit();
      expect(problems.filter((problem) => problem.kind !== "open_reservation")).toEqual([]);
    });

    it("keeps the ledger exact under concurrent reserve, settle and credit", async () => {
      const account = await openAccount(1_000n);
      clients = await Promise.all([1, 2, 3].map(() => shared.openClient()));
      const runs = clients.map(async (client, clientIndex) => {
        for (let run = 0; run < 15; run++) {
          const reservation = makeReservation({ accountId: account.id, amountNano: 10n });
          if ((await client.reserve(reservation)) === "reserved") {
            await client.settle(makeSettlement(reservation, BigInt(clientIndex + 1)));
          }
          if (run % 5 === 0) await client.credit(makeCredit({ accountId: account.id, amountNano: 2n }));
        }
      });
      await Promise.all(runs);
      // 3 clients × 15 settles at costs 1, 2 and 3; 3 clients × 3 credits of 2.
      expect(await shared.store.getAccountMoney(account.id)).toEqual({
        balanceNano: 1_000n - 15n * (1n + 2n + 3n) + 9n * 2n,
        reservedNano: 0n,
        spentNano: 90n,
      });
      expect(await shared.store.audit()).toEqual([]);
    });

    it("never overspends when costs above their reservations settle at once on several connections", async () => {
      const account = await openAccount(120n);
      clients = await Promise.all([1, 2, 3, 4].map(() => shared.openClient()));
      // Each reserves 30 (all 120 of the account) and then owes 45: together they can pay 120 only.
      const reservations = clients.map((_client, index) =>
        makeReservation({ accountId: account.id, amountNano: 30n, replicaId: `client-${index}` }),
      );
      for (const [index, client] of clients.entries())
        expect(await client.reserve(reservations[index] as (typeof reservations)[number])).toBe("reserved");
      const charged = await Promise.all(
        clients.map((client, index) =>
          client.settle(makeSettlement(reservations[index] as (typeof reservations)[number], 45n)),
        ),
      );
      // Whoever settles first may take more than its reservation; the others keep theirs whole.
      for (const charge of charged) expect(charge).toBeGreaterThanOrEqual(30n);
      expect(charged.reduce((sum, charge) => sum + charge, 0n)).toBe(120n);
      expect(await shared.store.getAccountMoney(account.id)).toEqual({
        balanceNano: 0n,
        reservedNano: 0n,
        spentNano: 120n,
      });
      expect(await shared.store.audit()).toEqual([]);
    });

    it("reports a balance that does not match its credits and charges", async () => {
      const account = await openAccount(100n);
      await shared.runSql(`update accounts set balance_nano = 101 where id = '${account.id}'`);
      expect(await shared.store.audit()).toEqual([
        { kind: "balance_mismatch", accountId: account.id, balanceNano: 101n, expectedNano: 100n },
      ]);
    });

    it("reports a reserved amount that does not match the open reservations", async () => {
      const account = await openAccount(100n);
      const reservation = makeReservation({ accountId: account.id, amountNano: 5n });
      await shared.store.reserve(reservation);
      await shared.runSql(`update accounts set reserved_nano = 7 where id = '${account.id}'`);
      expect(await shared.store.audit()).toEqual([
        { kind: "reserved_mismatch", accountId: account.id, reservedNano: 7n, expectedNano: 5n },
        { kind: "open_reservation", reservation },
      ]);
    });

    it("reports a lost usage row as a balance mismatch", async () => {
      const account = await openAccount(100n);
      const reservation = makeReservation({ accountId: account.id, amountNano: 5n });
      await shared.store.reserve(reservation);
      await shared.store.settle(makeSettlement(reservation, 4n));
      await shared.runSql(`delete from usage where id = '${reservation.id}'`);
      expect(await shared.store.audit()).toEqual([
        { kind: "balance_mismatch", accountId: account.id, balanceNano: 96n, expectedNano: 100n },
        { kind: "spent_mismatch", accountId: account.id, spentNano: 4n, expectedNano: 0n },
      ]);
    });

    it("reports a spent amount that does not match the charges", async () => {
      const account = await openAccount(100n);
      const reservation = makeReservation({ accountId: account.id, amountNano: 5n });
      await shared.store.reserve(reservation);
      await shared.store.settle(makeSettlement(reservation, 4n));
      expect(await shared.store.getAccountMoney(account.id)).toEqual({
        balanceNano: 96n,
        reservedNano: 0n,
        spentNano: 4n,
      });
      await shared.runSql(`update accounts set spent_nano = 3 where id = '${account.id}'`);
      expect(await shared.store.audit()).toEqual([
        { kind: "spent_mismatch", accountId: account.id, spentNano: 3n, expectedNano: 4n },
      ]);
      // What an account has spent is read from its row, not summed from the ledger.
      expect((await shared.store.getAccountMoney(account.id))?.spentNano).toBe(3n);
    });

    it("repairs a spent amount that does not match the charges, and only that", async () => {
      const [off, right] = [await openAccount(100n, "off"), await openAccount(100n, "right")];
      for (const account of [off, right]) {
        const reservation = makeReservation({ accountId: account.id, amountNano: 5n });
        await shared.store.reserve(reservation);
        await shared.store.settle(makeSettlement(reservation, 4n));
      }
      // What a server of an older version leaves: a charge its settle did not add to spent.
      await shared.runSql(`update accounts set spent_nano = 0 where id = '${off.id}'`);
      expect(await shared.store.repairSpent()).toEqual([{ accountId: off.id, fromNano: 0n, toNano: 4n }]);
      expect(await shared.store.audit()).toEqual([]);
      expect(await shared.store.getAccountMoney(off.id)).toEqual({
        balanceNano: 96n,
        reservedNano: 0n,
        spentNano: 4n,
      });
      expect(await shared.store.repairSpent()).toEqual([]);
    });
  });
}
