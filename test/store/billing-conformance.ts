import { randomUUID } from "node:crypto";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { Account, Store } from "../../src/store/store.ts";
import { describeSharedDatabaseConformance } from "./shared-database-conformance.ts";
import type { StoreConformanceBackend } from "./store-conformance.ts";
import { makeAccount, makeCredit, makeReservation, makeSettlement, makeUsage, T0 } from "./store-fixtures.ts";

/** The largest amount a store holds: 2^63 − 1 nano-units. */
const MAX_NANO = 9_223_372_036_854_775_807n;
const TWO_TO_62 = 4_611_686_018_427_387_904n;

/**
 * The billing half of the store conformance suite: credits, reservations, settlement, the usage
 * ledger and the audit, each atomic in the backend.
 */
export function describeBillingConformance(name: string, backend: StoreConformanceBackend): void {
  describe(`${name} store billing conformance`, () => {
    let store: Store;

    beforeEach(async () => {
      store = await backend.openFreshStore();
    });

    afterEach(async () => {
      await store.close();
    });

    async function openAccount(balanceNano: bigint, name = "acme"): Promise<Account> {
      const account = makeAccount({ name, balanceNano });
      expect(await store.insertAccount(account)).toBe("created");
      return account;
    }

    async function money(accountId: string) {
      return await store.getAccountMoney(accountId);
    }

    /** Reserves and settles `cost` on the account, then credits it back: the balance is as before. */
    async function chargeAndRefill(accountId: string, cost: bigint): Promise<void> {
      const reservation = makeReservation({ accountId, amountNano: cost });
      expect(await store.reserve(reservation)).toBe("reserved");
      expect(await store.settle(makeSettlement(reservation, cost))).toBe(cost);
      expect((await store.credit(makeCredit({ accountId, amountNano: cost }))).outcome).toBe("credited");
    }

    describe("opening balance and credits", () => {
      it("records a non-zero opening balance as the account's first credit", async () => {
        const account = await openAccount(12_500_000_000n);
        expect(await store.listCredits(account.id)).toEqual([
          {
            id: account.id,
            accountId: account.id,
            amountNano: 12_500_000_000n,
            note: "opening balance",
            createdAt: account.createdAt,
          },
        ]);
        expect(await store.audit()).toEqual([]);
      });

      it("writes no credit for a zero opening balance", async () => {
        const account = await openAccount(0n);
        expect(await store.listCredits(account.id)).toEqual([]);
      });

      it("writes no credit when the name is taken", async () => {
        const first = await openAccount(5n);
        const second = makeAccount({ name: "acme", balanceNano: 7n });
        expect(await store.insertAccount(second)).toBe("name_taken");
        expect(await store.listCredits(second.id)).toEqual([]);
        expect(await store.listCredits(first.id)).toHaveLength(1);
      });

      it("credits raise the balance and are listed oldest first", async () => {
        const account = await openAccount(1n);
        const later = makeCredit({
          accountId: account.id,
          amountNano: 3n,
          note: "top-up",
          createdAt: new Date("2025-03-01T00:00:00.000Z"),
        });
        const earlier = makeCredit({
          accountId: account.id,
          amountNano: 2n,
          createdAt: new Date("2025-02-01T00:00:00.000Z"),
        });
        expect((await store.credit(later)).outcome).toBe("credited");
        expect((await store.credit(earlier)).outcome).toBe("credited");
        expect((await store.getAccountById(account.id))?.balanceNano).toBe(6n);
        const credits = await store.listCredits(account.id);
        expect(credits.map((credit) => credit.amountNano)).toEqual([1n, 2n, 3n]);
        expect(credits[2]).toEqual(later);
        expect(credits[1]?.note).toBeUndefined();
        expect(await store.audit()).toEqual([]);
      });

      it("credits an id once: a retry, even several at once, answers already_credited", async () => {
        const account = await openAccount(1n);
        const credit = makeCredit({ accountId: account.id, amountNano: 5n });
        // With the money as the credit left it, read in its own transaction.
        expect(await store.credit(credit)).toEqual({
          outcome: "credited",
          money: { balanceNano: 6n, reservedNano: 0n, spentNano: 0n },
        });
        expect(await store.credit({ ...credit, createdAt: new Date() })).toEqual({
          outcome: "already_credited",
          money: { balanceNano: 6n, reservedNano: 0n, spentNano: 0n },
        });
        const again = makeCredit({ accountId: account.id, amountNano: 7n });
        const results = await Promise.all(Array.from({ length: 5 }, () => store.credit(again)));
        expect(results.filter((result) => result.outcome === "credited")).toHaveLength(1);
        expect(results.filter((result) => result.outcome === "already_credited")).toHaveLength(4);
        expect((await store.getAccountById(account.id))?.balanceNano).toBe(13n);
        expect(await store.listCredits(account.id)).toHaveLength(3);
        expect(await store.audit()).toEqual([]);
      });

      it("finds a credit by its id", async () => {
        const account = await openAccount(1n);
        const credit = makeCredit({ accountId: account.id, amountNano: 5n, note: "top-up" });
        await store.credit(credit);
        expect(await store.getCredit(credit.id)).toEqual(credit);
        expect(await store.getCredit(randomUUID())).toBeUndefined();
      });

      it("answers account_not_found for a credit to an unknown account, writing nothing", async () => {
        const accountId = randomUUID();
        expect((await store.credit(makeCredit({ accountId, amountNano: 1n }))).outcome).toBe(
          "account_not_found",
        );
        expect(await store.listCredits(accountId)).toEqual([]);
      });

      it("refuses a credit that would take the balance past 2^63 - 1, writing nothing", async () => {
        const account = await openAccount(MAX_NANO - 10n);
        expect((await store.credit(makeCredit({ accountId: account.id, amountNano: 11n }))).outcome).toBe(
          "balance_too_large",
        );
        expect(await store.listCredits(account.id)).toHaveLength(1);
        expect((await store.credit(makeCredit({ accountId: account.id, amountNano: 10n }))).outcome).toBe(
          "credited",
        );
        expect((await store.getAccountById(account.id))?.balanceNano).toBe(MAX_NANO);
        expect(await store.audit()).toEqual([]);
      });

      it("refuses credits of zero or less", async () => {
        const account = await openAccount(0n);
        await expect(store.credit(makeCredit({ accountId: account.id, amountNano: 0n }))).rejects.toThrow();
        await expect(store.credit(makeCredit({ accountId: account.id, amountNano: -1n }))).rejects.toThrow();
        expect(await store.listCredits(account.id)).toEqual([]);
      });
    });

    describe("reserve", () => {
      it("sets money aside when it fits the balance", async () => {
        const account = await openAccount(100n);
        const reservation = makeReservation({ accountId: account.id, amountNano: 60n });
        expect(await store.reserve(reservation)).toBe("reserved");
        expect(await money(account.id)).toEqual({ balanceNano: 100n, reservedNano: 60n, spentNano: 0n });
        expect(await store.listReservations()).toEqual([reservation]);
      });

      it("reserves against the available balance: balance minus open reservations", async () => {
        const account = await openAccount(100n);
        expect(await store.reserve(makeReservation({ accountId: account.id, amountNano: 60n }))).toBe(
          "reserved",
        );
        const tooMuch = makeReservation({ accountId: account.id, amountNano: 41n });
        expect(await store.reserve(tooMuch)).toBe("insufficient_balance");
        expect(await store.reserve(makeReservation({ accountId: account.id, amountNano: 40n }))).toBe(
          "reserved",
        );
        expect(await store.reserve(makeReservation({ accountId: account.id, amountNano: 1n }))).toBe(
          "insufficient_balance",
        );
        expect((await money(account.id))?.reservedNano).toBe(100n);
        expect((await store.listReservations()).map((each) => each.id)).not.toContain(tooMuch.id);
      });

      it("tells an account's balance and reserved money without what it spent", async () => {
        const account = await openAccount(100n);
        const reservation = makeReservation({ accountId: account.id, amountNano: 60n });
        expect(await store.reserve(reservation)).toBe("reserved");
        await store.settle(makeSettlement(reservation, 25n));
        expect(await store.reserve(makeReservation({ accountId: account.id, amountNano: 30n }))).toBe(
          "reserved",
        );
        expect(await store.getAccountBalance(account.id)).toEqual({ balanceNano: 75n, reservedNano: 30n });
        expect(await money(account.id)).toEqual({ balanceNano: 75n, reservedNano: 30n, spentNano: 25n });
        expect(await store.getAccountBalance("no-such-account")).toBeUndefined();
      });

      it("reserves nothing on an empty balance but a zero amount", async () => {
        const account = await openAccount(0n);
        expect(await store.reserve(makeReservation({ accountId: account.id, amountNano: 1n }))).toBe(
          "insufficient_balance",
        );
        expect(await store.reserve(makeReservation({ accountId: account.id, amountNano: 0n }))).toBe(
          "reserved",
        );
      });

      it("answers account_not_found for an unknown account", async () => {
        const reservation = makeReservation({ accountId: randomUUID(), amountNano: 0n });
        expect(await store.reserve(reservation)).toBe("account_not_found");
        expect(await store.listReservations()).toEqual([]);
      });

      it("refuses a second reservation with the same id and keeps the first alone", async () => {
        const account = await openAccount(100n);
        const reservation = makeReservation({ accountId: account.id, amountNano: 10n });
        await store.reserve(reservation);
        await expect(store.reserve({ ...reservation, amountNano: 20n })).rejects.toThrow();
        expect((await money(account.id))?.reservedNano).toBe(10n);
        expect(await store.listReservations()).toEqual([reservation]);
      });

      it("refuses a negative amount", async () => {
        const account = await openAccount(100n);
        await expect(
          store.reserve(makeReservation({ accountId: account.id, amountNano: -1n })),
        ).rejects.toThrow(new RangeError("A reservation's amount must be zero or more."));
        expect((await money(account.id))?.reservedNano).toBe(0n);
      });

      it("refuses an amount beyond what a column holds as insufficient, never failing (regression: 500 on PostgreSQL)", async () => {
        const account = await openAccount(MAX_NANO);
        const beyond = makeReservation({ accountId: account.id, amountNano: MAX_NANO + 1n });
        expect(await store.reserve(beyond)).toBe("insufficient_balance");
        expect(
          await store.reserve(makeReservation({ accountId: randomUUID(), amountNano: 10n ** 30n })),
        ).toBe("account_not_found");
        expect(await money(account.id)).toEqual({ balanceNano: MAX_NANO, reservedNano: 0n, spentNano: 0n });
        // What fits beside a reservation is still told apart from what does not.
        expect(await store.reserve(makeReservation({ accountId: account.id, amountNano: 5n }))).toBe(
          "reserved",
        );
        expect(
          await store.reserve(makeReservation({ accountId: account.id, amountNano: MAX_NANO - 2n })),
        ).toBe("insufficient_balance");
        expect(await store.listReservations()).toHaveLength(1);
        expect((await store.audit()).map((problem) => problem.kind)).toEqual(["open_reservation"]);
      });

      it("keeps reservations of different accounts apart", async () => {
        const acme = await openAccount(10n, "acme");
        const other = await openAccount(10n, "other");
        await store.reserve(makeReservation({ accountId: acme.id, amountNano: 10n }));
        expect(await store.reserve(makeReservation({ accountId: other.id, amountNano: 10n }))).toBe(
          "reserved",
        );
        expect((await money(acme.id))?.reservedNano).toBe(10n);
        expect((await money(other.id))?.reservedNano).toBe(10n);
      });
    });

    describe("settle", () => {
      it("charges the cost, frees the reservation and writes the usage row, in one step", async () => {
        const account = await openAccount(100n);
        const reservation = makeReservation({ accountId: account.id, amountNano: 60n });
        await store.reserve(reservation);
        const usage = makeSettlement(reservation, 25n, { user: "user-7", estimated: true });
        await store.settle(usage);
        expect(await money(account.id)).toEqual({ balanceNano: 75n, reservedNano: 0n, spentNano: 25n });
        expect((await store.getAccountById(account.id))?.balanceNano).toBe(75n);
        expect(await store.listReservations()).toEqual([]);
        expect(await store.listUsage()).toEqual([usage]);
        expect(await store.audit()).toEqual([]);
      });

      it("keeps nano arithmetic exact near 2^62", async () => {
        const account = await openAccount(MAX_NANO);
        const reservation = makeReservation({ accountId: account.id, amountNano: TWO_TO_62 + 1n });
        expect(await store.reserve(reservation)).toBe("reserved");
        const available = MAX_NANO - TWO_TO_62 - 1n;
        expect(
          await store.reserve(makeReservation({ accountId: account.id, amountNano: available + 1n })),
        ).toBe("insufficient_balance");
        const rest = makeReservation({ accountId: account.id, amountNano: available });
        expect(await store.reserve(rest)).toBe("reserved");
        expect((await money(account.id))?.reservedNano).toBe(MAX_NANO);

        await store.settle(makeSettlement(reservation, TWO_TO_62 - 3n));
        await store.settle(makeSettlement(rest, 1n));
        expect(await money(account.id)).toEqual({
          balanceNano: MAX_NANO - TWO_TO_62 + 2n,
          reservedNano: 0n,
          spentNano: TWO_TO_62 - 2n,
        });
        expect(
          await store.listUsage({ accountId: account.id }).then((rows) => rows.map((row) => row.costNano)),
        ).toEqual(expect.arrayContaining([TWO_TO_62 - 3n, 1n]));
        expect(await store.audit()).toEqual([]);
      });

      it("charges a settled request once: a second settle changes nothing and answers the first one's charge", async () => {
        const account = await openAccount(100n);
        const reservation = makeReservation({ accountId: account.id, amountNano: 60n });
        await store.reserve(reservation);
        const usage = makeSettlement(reservation, 25n);
        expect(await store.settle(usage)).toBe(25n);
        // What a retry after a lost answer sees: the charge its first attempt made.
        expect(await store.settle(usage)).toBe(25n);
        expect(await store.settle({ ...usage, costNano: 50n, completionTokens: 99 })).toBe(25n);
        await store.insertUsage({ ...usage, costNano: 0n });
        expect(await money(account.id)).toEqual({ balanceNano: 75n, reservedNano: 0n, spentNano: 25n });
        expect(await store.listUsage()).toEqual([usage]);
        expect(await store.audit()).toEqual([]);
      });

      it("settles concurrent duplicates once", async () => {
        const account = await openAccount(100n);
        const reservation = makeReservation({ accountId: account.id, amountNano: 60n });
        await store.reserve(reservation);
        const usage = makeSettlement(reservation, 25n);
        await Promise.all([store.settle(usage), store.settle(usage), store.settle(usage)]);
        expect(await money(account.id)).toEqual({ balanceNano: 75n, reservedNano: 0n, spentNano: 25n });
      });

      it("charges a request whose reservation was already released, leaving other reservations alone", async () => {
        const account = await openAccount(100n);
        const released = makeReservation({ accountId: account.id, amountNano: 30n, replicaId: "gone" });
        const other = makeReservation({ accountId: account.id, amountNano: 20n, replicaId: "alive" });
        await store.reserve(released);
        await store.reserve(other);
        expect(await store.releaseReservations({ replicaId: "gone" })).toBe(1);
        await store.settle(makeSettlement(released, 10n));
        expect(await money(account.id)).toEqual({ balanceNano: 90n, reservedNano: 20n, spentNano: 10n });
        expect(await store.listReservations()).toEqual([other]);
      });

      it("charges a cost above its reservation in full when the available balance covers it", async () => {
        const account = await openAccount(100n);
        const reservation = makeReservation({ accountId: account.id, amountNano: 10n });
        await store.reserve(reservation);
        expect(await store.settle(makeSettlement(reservation, 15n))).toBe(15n);
        expect(await money(account.id)).toEqual({ balanceNano: 85n, reservedNano: 0n, spentNano: 15n });
        expect(await store.audit()).toEqual([]);
      });

      it("never overspends: a cost above its reservation is charged only as far as the account can pay beside its other reservations", async () => {
        const account = await openAccount(30n);
        const short = makeReservation({ accountId: account.id, amountNano: 10n });
        const other = makeReservation({ accountId: account.id, amountNano: 20n });
        await store.reserve(short);
        await store.reserve(other);
        // 25 due on a reservation of 10: the other request's 20 stays whole, so 10 is all it can pay.
        expect(await store.settle(makeSettlement(short, 25n))).toBe(10n);
        expect(await money(account.id)).toEqual({ balanceNano: 20n, reservedNano: 20n, spentNano: 10n });
        expect(await store.listUsage().then((rows) => rows.map((row) => row.costNano))).toEqual([10n]);
        expect(await store.settle(makeSettlement(other, 20n))).toBe(20n);
        expect(await money(account.id)).toEqual({ balanceNano: 0n, reservedNano: 0n, spentNano: 30n });
        expect(await store.audit()).toEqual([]);
      });

      it("charges costs above their reservations settled together in full when together they fit", async () => {
        const account = await openAccount(100n);
        const first = makeReservation({ accountId: account.id, amountNano: 40n });
        const second = makeReservation({ accountId: account.id, amountNano: 40n });
        await store.reserve(first);
        await store.reserve(second);
        const charged = await Promise.all([
          store.settle(makeSettlement(first, 50n)),
          store.settle(makeSettlement(second, 50n)),
        ]);
        expect(charged).toEqual([50n, 50n]);
        expect(await money(account.id)).toEqual({ balanceNano: 0n, reservedNano: 0n, spentNano: 100n });
        expect(await store.audit()).toEqual([]);
      });

      it("charges a cost beyond what a column holds as far as the account can pay, recording the charge (regression: a settle that could never bind)", async () => {
        const account = await openAccount(3_000_000_000n);
        const short = makeReservation({ accountId: account.id, amountNano: 1_000n });
        const other = makeReservation({ accountId: account.id, amountNano: 500_000_000n });
        await store.reserve(short);
        await store.reserve(other);
        // 9007199254740991 prompt tokens at 1.123456789 and one completion token at 2.987654321 per
        // million: above 2^63 - 1 nano-units.
        const absurd = makeSettlement(short, 10_119_199_152_614_509_764n, {
          promptTokens: Number.MAX_SAFE_INTEGER,
          completionTokens: 1,
          estimated: true,
        });
        expect(await store.settle(absurd)).toBe(2_500_000_000n);
        // Again: nothing changes, and the answer is the recorded (smaller) charge.
        expect(await store.settle(absurd)).toBe(2_500_000_000n);
        expect(await money(account.id)).toEqual({
          balanceNano: 500_000_000n,
          reservedNano: 500_000_000n,
          spentNano: 2_500_000_000n,
        });
        expect(await store.listUsage()).toEqual([{ ...absurd, costNano: 2_500_000_000n }]);
        expect(await store.settle(makeSettlement(other, 500_000_000n))).toBe(500_000_000n);
        expect(await store.audit()).toEqual([]);
      });

      it("charges costs beyond what a column holds settled together no further than the balance", async () => {
        const account = await openAccount(10n);
        const first = makeReservation({ accountId: account.id, amountNano: 3n });
        const second = makeReservation({ accountId: account.id, amountNano: 3n });
        await store.reserve(first);
        await store.reserve(second);
        const charged = await Promise.all([
          store.settle(makeSettlement(first, MAX_NANO + 1n)),
          store.settle(makeSettlement(second, 10n ** 40n)),
        ]);
        expect(charged[0]! + charged[1]!).toBe(10n);
        expect(await money(account.id)).toEqual({ balanceNano: 0n, reservedNano: 0n, spentNano: 10n });
        expect(
          await store.listUsage().then((rows) => rows.reduce((sum, row) => sum + row.costNano, 0n)),
        ).toBe(10n);
        expect(await store.audit()).toEqual([]);
      });

      it("charges a request whose reservation was released no more than the account has available", async () => {
        const account = await openAccount(10n);
        const released = makeReservation({ accountId: account.id, amountNano: 2n, replicaId: "gone" });
        const other = makeReservation({ accountId: account.id, amountNano: 7n, replicaId: "alive" });
        expect(await store.reserve(released)).toBe("reserved");
        expect(await store.reserve(other)).toBe("reserved");
        expect(await store.releaseReservations({ replicaId: "gone" })).toBe(1);
        expect(await store.settle(makeSettlement(released, 5n))).toBe(3n);
        expect(await money(account.id)).toEqual({ balanceNano: 7n, reservedNano: 7n, spentNano: 3n });
      });

      it("charges nothing for a request that cost 0 and still frees its reservation", async () => {
        const account = await openAccount(10n);
        const reservation = makeReservation({ accountId: account.id, amountNano: 10n });
        await store.reserve(reservation);
        await store.settle(
          makeSettlement(reservation, 0n, {
            completionTokens: 0,
            finishReason: undefined,
            errorCode: "upstream_unavailable",
          }),
        );
        expect(await money(account.id)).toEqual({ balanceNano: 10n, reservedNano: 0n, spentNano: 0n });
      });

      it("refuses a usage row for another account than its reservation, changing nothing", async () => {
        const acme = await openAccount(10n, "acme");
        const other = await openAccount(10n, "other");
        const reservation = makeReservation({ accountId: acme.id, amountNano: 10n });
        await store.reserve(reservation);
        await expect(store.settle(makeSettlement(reservation, 5n, { accountId: other.id }))).rejects.toThrow(
          new Error(
            `Reservation ${reservation.id} belongs to another account than its usage row; nothing was settled.`,
          ),
        );
        expect(await money(acme.id)).toEqual({ balanceNano: 10n, reservedNano: 10n, spentNano: 0n });
        expect(await money(other.id)).toEqual({ balanceNano: 10n, reservedNano: 0n, spentNano: 0n });
        expect(await store.listUsage()).toEqual([]);
      });

      it("refuses a negative cost", async () => {
        const account = await openAccount(10n);
        await expect(store.settle(makeUsage({ accountId: account.id, costNano: -1n }))).rejects.toThrow(
          new RangeError("A usage row's cost must be zero or more."),
        );
        expect(await store.listUsage()).toEqual([]);
      });
    });

    describe("usage rows", () => {
      it("records a refused request at cost 0 without touching the balance, once", async () => {
        const account = await openAccount(10n);
        const usage = makeUsage({
          accountId: account.id,
          promptTokens: 0,
          completionTokens: 0,
          finishReason: undefined,
          errorCode: "rate_limit_exceeded",
          queueMs: undefined,
          firstTokenMs: undefined,
          totalMs: 0,
        });
        await store.insertUsage(usage);
        await store.insertUsage(usage);
        expect(await store.listUsage()).toEqual([usage]);
        expect(await money(account.id)).toEqual({ balanceNano: 10n, reservedNano: 0n, spentNano: 0n });
        expect(await store.audit()).toEqual([]);
      });

      it("refuses a refused request's row with a cost", async () => {
        const account = await openAccount(10n);
        await expect(store.insertUsage(makeUsage({ accountId: account.id, costNano: 1n }))).rejects.toThrow();
        expect(await store.listUsage()).toEqual([]);
      });

      it("reads back every field, absent ones as undefined, durations in whole milliseconds", async () => {
        const account = await openAccount(0n);
        const usage = makeUsage({
          accountId: account.id,
          requestId: "client-chosen-id",
          user: "end-user@example.com",
          finishReason: undefined,
          errorCode: "internal_error",
          queueMs: 1.4,
          firstTokenMs: undefined,
          totalMs: 2.6,
          estimated: true,
        });
        await store.insertUsage(usage);
        expect(await store.listUsage()).toEqual([{ ...usage, queueMs: 1, totalMs: 3 }]);
      });

      it("keeps rows of requests that share a client request id apart", async () => {
        const account = await openAccount(0n);
        const first = makeUsage({ accountId: account.id, requestId: "same" });
        const second = makeUsage({ accountId: account.id, requestId: "same" });
        await store.insertUsage(first);
        await store.insertUsage(second);
        expect(await store.listUsage()).toHaveLength(2);
      });

      it("filters by account, key, model and time, oldest first", async () => {
        const acme = await openAccount(0n, "acme");
        const other = await openAccount(0n, "other");
        const at = (day: number) => new Date(Date.UTC(2025, 0, day));
        const rows = [
          makeUsage({ accountId: acme.id, keyPublicId: "keyacme00001", model: "a", createdAt: at(3) }),
          makeUsage({ accountId: acme.id, keyPublicId: "keyacme00002", model: "b", createdAt: at(1) }),
          makeUsage({ accountId: other.id, keyPublicId: "keyother0001", model: "a", createdAt: at(2) }),
          makeUsage({ accountId: acme.id, keyPublicId: "keyacme00001", model: "b", createdAt: at(4) }),
        ];
        for (const row of rows) await store.insertUsage(row);
        const ids = async (filter: Parameters<Store["listUsage"]>[0]) =>
          (await store.listUsage(filter)).map((row) =>
            rows.indexOf(rows.find((each) => each.id === row.id)!),
          );
        expect(await ids({})).toEqual([1, 2, 0, 3]);
        expect(await ids({ accountId: acme.id })).toEqual([1, 0, 3]);
        expect(await ids({ keyPublicId: "keyacme00001" })).toEqual([0, 3]);
        expect(await ids({ model: "a" })).toEqual([2, 0]);
        expect(await ids({ since: at(2) })).toEqual([2, 0, 3]);
        expect(await ids({ until: at(3) })).toEqual([1, 2]);
        expect(await ids({ since: at(2), until: at(4), accountId: acme.id, model: "a" })).toEqual([0]);
        expect(await ids({ accountId: randomUUID() })).toEqual([]);
      });

      it("pages through the rows in the order of the whole list, from any cursor", async () => {
        const acme = await openAccount(0n, "acme");
        const other = await openAccount(0n, "other");
        // Rows in pairs that share a millisecond, so that pages must break ties by id.
        const rows = Array.from({ length: 9 }, (_, index) =>
          makeUsage({
            accountId: index % 3 === 0 ? other.id : acme.id,
            createdAt: new Date(T0.getTime() + Math.floor(index / 2)),
          }),
        );
        for (const row of rows.toReversed()) await store.insertUsage(row);
        for (const filter of [{}, { accountId: acme.id }, { since: new Date(T0.getTime() + 1) }]) {
          const whole = await store.listUsage(filter);
          for (const limit of [1, 2, 4, 100]) {
            const paged = [];
            let page = await store.listUsage(filter, { limit });
            while (page.length > 0) {
              expect(page.length).toBeLessThanOrEqual(limit);
              paged.push(...page);
              const last = page.at(-1)!;
              page = await store.listUsage(filter, {
                limit,
                after: { createdAt: last.createdAt, id: last.id },
              });
            }
            expect(paged).toEqual(whole);
          }
        }
        expect((await store.listUsage()).map((row) => row.createdAt.getTime() - T0.getTime())).toEqual([
          0, 0, 1, 1, 2, 2, 3, 3, 4,
        ]);
        // A cursor need not name a row: it is a position in (created_at, id) order.
        const after = { createdAt: new Date(T0.getTime() + 3), id: "" };
        expect(await store.listUsage({}, { limit: 10, after })).toHaveLength(3);
        await expect(store.listUsage({}, { limit: 0 })).rejects.toThrow(RangeError);
      });

      it("sums usage per day, model and key in the database, exactly", async () => {
        const acme = await openAccount(10n ** 18n, "acme");
        const other = await openAccount(10n ** 18n, "other");
        const large = 2n ** 53n + 1n;
        const day = (date: number, hour: number) => new Date(Date.UTC(2025, 5, date, hour));
        const settled: [Account, string, string, bigint, Date][] = [
          [acme, "keyacme00001", "small", 5n, day(1, 0)],
          [acme, "keyacme00001", "large", large, day(1, 23)],
          [acme, "keyacme00002", "large", large, day(2, 0)],
          [other, "keyother0001", "small", 7n, day(3, 12)],
        ];
        for (const [account, keyPublicId, model, cost, createdAt] of settled) {
          const reservation = makeReservation({
            accountId: account.id,
            keyPublicId,
            model,
            amountNano: cost,
          });
          expect(await store.reserve(reservation)).toBe("reserved");
          await store.settle(
            makeSettlement(reservation, cost, { promptTokens: 10, completionTokens: 3, createdAt }),
          );
        }
        const byGroup = (totals: Awaited<ReturnType<Store["sumUsage"]>>) =>
          totals.toSorted((first, second) => (first.group < second.group ? -1 : 1));
        const totals = (requests: number, costNano: bigint) => ({
          requests,
          promptTokens: 10 * requests,
          completionTokens: 3 * requests,
          costNano,
        });
        expect(await store.sumUsage()).toEqual([
          { group: "", accountId: undefined, ...totals(4, 2n * large + 12n) },
        ]);
        expect(byGroup(await store.sumUsage({}, "day"))).toEqual([
          { group: "2025-06-01", accountId: undefined, ...totals(2, large + 5n) },
          { group: "2025-06-02", accountId: undefined, ...totals(1, large) },
          { group: "2025-06-03", accountId: undefined, ...totals(1, 7n) },
        ]);
        expect(byGroup(await store.sumUsage({ accountId: acme.id }, "model"))).toEqual([
          { group: "large", accountId: undefined, ...totals(2, 2n * large) },
          { group: "small", accountId: undefined, ...totals(1, 5n) },
        ]);
        expect(byGroup(await store.sumUsage({ since: day(1, 12) }, "key"))).toEqual([
          { group: "keyacme00001", accountId: acme.id, ...totals(1, large) },
          { group: "keyacme00002", accountId: acme.id, ...totals(1, large) },
          { group: "keyother0001", accountId: other.id, ...totals(1, 7n) },
        ]);
        expect(await store.sumUsage({ model: "none" })).toEqual([
          { group: "", accountId: undefined, ...totals(0, 0n) },
        ]);
        expect(await store.sumUsage({ model: "none" }, "day")).toEqual([]);
      });

      it("sums the spent amount per account", async () => {
        const acme = await openAccount(100n, "acme");
        const other = await openAccount(100n, "other");
        for (const [account, cost] of [
          [acme, 7n],
          [acme, 8n],
          [other, 1n],
        ] as const) {
          const reservation = makeReservation({ accountId: account.id, amountNano: cost });
          await store.reserve(reservation);
          await store.settle(makeSettlement(reservation, cost));
        }
        expect(await money(acme.id)).toEqual({ balanceNano: 85n, reservedNano: 0n, spentNano: 15n });
        expect(await money(other.id)).toEqual({ balanceNano: 99n, reservedNano: 0n, spentNano: 1n });
        expect(await money(randomUUID())).toBeUndefined();
      });
    });

    describe("leases and release", () => {
      const lease = (minute: number) => new Date(Date.UTC(2025, 0, 1, 0, minute));
      let made = 0;

      /** A reservation made one millisecond after the previous one, so they list in this order. */
      async function reserveFor(
        account: Account,
        replicaId: string,
        amountNano: bigint,
        leaseMinute: number,
      ) {
        made += 1;
        const reservation = makeReservation({
          accountId: account.id,
          amountNano,
          replicaId,
          leaseExpiresAt: lease(leaseMinute),
          createdAt: new Date(T0.getTime() + made),
        });
        expect(await store.reserve(reservation)).toBe("reserved");
        return reservation;
      }

      it("releases a replica's reservations and gives their money back, no one else's", async () => {
        const acme = await openAccount(100n, "acme");
        const other = await openAccount(100n, "other");
        await reserveFor(acme, "a", 10n, 5);
        await reserveFor(other, "a", 20n, 5);
        const kept = await reserveFor(acme, "b", 30n, 5);
        expect(await store.releaseReservations({ replicaId: "a" })).toBe(2);
        expect(await store.listReservations()).toEqual([kept]);
        expect(await money(acme.id)).toEqual({ balanceNano: 100n, reservedNano: 30n, spentNano: 0n });
        expect(await money(other.id)).toEqual({ balanceNano: 100n, reservedNano: 0n, spentNano: 0n });
        expect(await store.listUsage()).toEqual([]);
        expect((await store.audit()).map((problem) => problem.kind)).toEqual(["open_reservation"]);
      });

      it("releases expired leases of other replicas, never their live ones", async () => {
        const account = await openAccount(100n);
        await reserveFor(account, "me", 1n, 10);
        await reserveFor(account, "crashed", 2n, 3);
        const live = await reserveFor(account, "alive", 4n, 10);
        const exactlyNow = await reserveFor(account, "alive", 8n, 5);
        expect(await store.releaseReservations({ replicaId: "me", expiredBefore: lease(5) })).toBe(2);
        expect(await store.listReservations()).toEqual([live, exactlyNow]);
        expect((await money(account.id))?.reservedNano).toBe(12n);
      });

      it("releases every reservation for replica *", async () => {
        const account = await openAccount(100n);
        await reserveFor(account, "a", 1n, 10);
        await reserveFor(account, "b", 2n, 10);
        expect(await store.releaseReservations({ replicaId: "*" })).toBe(2);
        expect(await store.listReservations()).toEqual([]);
        expect((await money(account.id))?.reservedNano).toBe(0n);
        expect(await store.audit()).toEqual([]);
      });

      it("releases nothing when nothing matches", async () => {
        const account = await openAccount(100n);
        await reserveFor(account, "a", 1n, 10);
        expect(await store.releaseReservations({ replicaId: "b", expiredBefore: lease(1) })).toBe(0);
        expect(await store.releaseReservations({})).toBe(0);
        expect((await money(account.id))?.reservedNano).toBe(1n);
      });

      it("renews the leases of one replica only", async () => {
        const account = await openAccount(100n);
        const mine = await reserveFor(account, "me", 1n, 1);
        const theirs = await reserveFor(account, "them", 2n, 1);
        await store.renewLeases("me", lease(30));
        expect(await store.listReservations()).toEqual([{ ...mine, leaseExpiresAt: lease(30) }, theirs]);
        expect(await store.releaseReservations({ expiredBefore: lease(10) })).toBe(1);
        expect((await store.listReservations()).map((each) => each.id)).toEqual([mine.id]);
      });

      it("renews only the leases of the reservations named, when it is given them", async () => {
        const account = await openAccount(100n);
        const live = await reserveFor(account, "me", 1n, 1);
        const orphan = await reserveFor(account, "me", 2n, 1);
        const theirs = await reserveFor(account, "them", 3n, 1);
        await store.renewLeases("me", lease(30), [live.id, theirs.id]);
        const byId = new Map((await store.listReservations()).map((each) => [each.id, each.leaseExpiresAt]));
        expect(byId.get(live.id)).toEqual(lease(30));
        // Not named: left to expire, and released with the expired ones.
        expect(byId.get(orphan.id)).toEqual(lease(1));
        // Another replica's, even when named.
        expect(byId.get(theirs.id)).toEqual(lease(1));
        await store.renewLeases("me", lease(40), []);
        expect((await store.listReservations()).find((each) => each.id === live.id)?.leaseExpiresAt).toEqual(
          lease(30),
        );
        expect(await store.releaseReservations({ expiredBefore: lease(10) })).toBe(2);
        expect((await store.listReservations()).map((each) => each.id)).toEqual([live.id]);
        expect((await money(account.id))?.reservedNano).toBe(1n);
      });

      it("lists open reservations oldest first", async () => {
        const account = await openAccount(100n);
        const later = makeReservation({
          accountId: account.id,
          createdAt: new Date("2025-01-02T00:00:00.000Z"),
        });
        const earlier = makeReservation({ accountId: account.id, createdAt: T0 });
        await store.reserve(later);
        await store.reserve(earlier);
        expect(await store.listReservations()).toEqual([earlier, later]);
      });
    });

    describe("audit", () => {
      it("passes on an empty store and after a full flow", async () => {
        expect(await store.audit()).toEqual([]);
        const account = await openAccount(50n);
        await store.credit(makeCredit({ accountId: account.id, amountNano: 25n }));
        const reservation = makeReservation({ accountId: account.id, amountNano: 40n });
        await store.reserve(reservation);
        await store.settle(makeSettlement(reservation, 33n));
        await store.insertUsage(makeUsage({ accountId: account.id, errorCode: "rate_limit_exceeded" }));
        expect(await store.audit()).toEqual([]);
      });

      it("reports every open reservation, whoever holds it", async () => {
        const account = await openAccount(50n);
        const first = makeReservation({ accountId: account.id, amountNano: 1n, replicaId: "a" });
        const second = makeReservation({
          accountId: account.id,
          amountNano: 2n,
          replicaId: "b",
          createdAt: new Date("2025-01-02T00:00:00.000Z"),
        });
        await store.reserve(second);
        await store.reserve(first);
        expect(await store.audit()).toEqual([
          { kind: "open_reservation", reservation: first },
          { kind: "open_reservation", reservation: second },
        ]);
      });

      it("stops an account's spending at 2^63 - 1 while charges and credits go on (regression: lost charges)", async () => {
        const account = await openAccount(MAX_NANO, "lifetime");
        const cost = TWO_TO_62 + 5n;
        // Three charges of more than 2^62 each, the balance refilled after each: 3 x cost spent.
        for (let round = 0; round < 3; round++) await chargeAndRefill(account.id, cost);
        expect(await money(account.id)).toEqual({
          balanceNano: MAX_NANO,
          reservedNano: 0n,
          spentNano: MAX_NANO,
        });
        // The ledger has every charge; the audit takes the saturated counter as agreeing with it.
        expect((await store.sumUsage({ accountId: account.id })).map((totals) => totals.costNano)).toEqual([
          3n * cost,
        ]);
        expect(await store.audit()).toEqual([]);
      });

      it("sums credits and charges beyond 2^63 - 1 exactly (regression: integer overflow)", async () => {
        // The largest balance, charged near 2^62 and credited back: the credits add up past what
        // a column holds, and the usage of two such accounts does too.
        const accounts = [await openAccount(MAX_NANO, "first"), await openAccount(MAX_NANO, "second")];
        const costs = [TWO_TO_62 + 5n, TWO_TO_62 + 7n];
        for (const [index, account] of accounts.entries()) {
          const cost = costs[index] as bigint;
          await chargeAndRefill(account.id, cost);
          expect(await money(account.id)).toEqual({
            balanceNano: MAX_NANO,
            reservedNano: 0n,
            spentNano: cost,
          });
        }
        // An open reservation beside them, of the whole balance.
        await store.reserve(makeReservation({ accountId: accounts[0]?.id as string, amountNano: MAX_NANO }));
        expect((await store.audit()).map((problem) => problem.kind)).toEqual(["open_reservation"]);

        const total = costs[0]! + costs[1]!;
        expect(total > MAX_NANO).toBe(true);
        expect((await store.sumUsage()).map((totals) => totals.costNano)).toEqual([total]);
        expect((await store.sumUsage({}, "model")).map((totals) => totals.costNano)).toEqual([total]);
        expect(
          (await store.sumUsage({}, "key")).map((totals) => [totals.group, totals.requests, totals.costNano]),
        ).toEqual([["keytest00001", 2, total]]);
      });
    });

    if (backend.openSharedDatabase !== undefined) {
      describeSharedDatabaseConformance(backend.openSharedDatabase);
    }
  });
}
