import { randomUUID } from "node:crypto";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ACCOUNT_IDS_PER_QUERY } from "../../src/store/kysely-store.ts";
import type { Account, Store } from "../../src/store/store.ts";
import { describeBillingConformance } from "./billing-conformance.ts";
import type { StoreClient } from "./open-store-in-worker.ts";
import { makeAccount, makeCredit, makeKey, makeReservation, makeSettlement, T0 } from "./store-fixtures.ts";

/** A database that several clients can reach at once, for the multi-connection tests. */
export interface SharedDatabase {
  /** A store on the database, in this thread. */
  store: Store;
  /**
   * Opens another store on the same database with its own connection, running in parallel with
   * this thread, as another process or replica would (SQLite: in a worker thread).
   */
  openClient(): Promise<StoreClient>;
  /** Runs one SQL statement on the database outside the store, to break what the audit checks. */
  runSql(statement: string): Promise<void>;
  /** Closes `store` and the database. */
  close(): Promise<void>;
}

/** How a backend's test file plugs into the suite. */
export interface StoreConformanceBackend {
  /** Opens a fresh, empty, migrated store; the suite closes it after each test. */
  openFreshStore(): Promise<Store>;
  /**
   * Opens a fresh, empty, migrated database that several connections can share. Backends that
   * cannot (in-memory SQLite) leave it out and skip the multi-connection tests.
   */
  openSharedDatabase?(): Promise<SharedDatabase>;
}

/**
 * The behaviour every {@link Store} backend must have. Each backend's test file calls this with
 * a function that opens a fresh, empty, migrated store (and, where it can, a shared database).
 */
export function describeStoreConformance(name: string, backend: StoreConformanceBackend): void {
  describe(`${name} store conformance`, () => {
    let store: Store;

    beforeEach(async () => {
      store = await backend.openFreshStore();
    });

    afterEach(async () => {
      await store.close();
    });

    describe("accounts", () => {
      it("reads back an inserted account by id and by name", async () => {
        const account = makeAccount({ name: "acme", balanceNano: 12_500_000_000n });
        expect(await store.insertAccount(account)).toBe("created");
        expect(await store.getAccountById(account.id)).toEqual(account);
        expect(await store.getAccountByName("acme")).toEqual(account);
      });

      it("refuses a name that differs from another only in case, also when both are created at once", async () => {
        expect(await store.insertAccount(makeAccount({ name: "Zoe" }))).toBe("created");
        expect(await store.insertAccount(makeAccount({ name: "zoe" }))).toBe("name_taken_ignoring_case");
        expect(await store.insertAccount(makeAccount({ name: "Zoe" }))).toBe("name_taken");
        // Regression (PostgreSQL): each found none of the other's case and both were created.
        for (let round = 0; round < 5; round++) {
          const names = [`dup${round}`, `DUP${round}`, `Dup${round}`, `dUp${round}`];
          const results = await Promise.all(names.map((name) => store.insertAccount(makeAccount({ name }))));
          expect(results.filter((result) => result === "created")).toHaveLength(1);
          expect(await store.listAccountNamesIgnoringCase(`dup${round}`)).toHaveLength(1);
        }
      });

      it("lists the names that differ from a name only in case", async () => {
        for (const name of ["Zoe", "zoey", "acme"]) await store.insertAccount(makeAccount({ name }));
        expect(await store.listAccountNamesIgnoringCase("ZOE")).toEqual(["Zoe"]);
        expect(await store.listAccountNamesIgnoringCase("Zoe")).toEqual(["Zoe"]);
        expect(await store.listAccountNamesIgnoringCase("zo")).toEqual([]);
        expect(await store.listAccountNamesIgnoringCase("zoe%")).toEqual([]);
      });

      it("answers undefined for an unknown id or name", async () => {
        expect(await store.getAccountById(randomUUID())).toBeUndefined();
        expect(await store.getAccountByName("nobody")).toBeUndefined();
      });

      it("refuses a second account with the same name and keeps the first", async () => {
        const first = makeAccount({ name: "acme", balanceNano: 1n });
        await store.insertAccount(first);
        expect(await store.insertAccount(makeAccount({ name: "acme", balanceNano: 2n }))).toBe("name_taken");
        expect(await store.listAccounts()).toEqual([first]);
      });

      it("keeps balances above 2^53 nano-units exact", async () => {
        const balanceNano = 9_223_372_036_854_775_807n;
        const account = makeAccount({ name: "rich", balanceNano });
        await store.insertAccount(account);
        const read = await store.getAccountById(account.id);
        expect(read?.balanceNano).toBe(balanceNano);
        expect(typeof read?.balanceNano).toBe("bigint");
      });

      it("lists accounts oldest first", async () => {
        const later = makeAccount({ name: "later", createdAt: new Date("2025-02-01T00:00:00.000Z") });
        const earlier = makeAccount({ name: "earlier", createdAt: new Date("2025-01-01T00:00:00.000Z") });
        await store.insertAccount(later);
        await store.insertAccount(earlier);
        expect((await store.listAccounts()).map((account) => account.name)).toEqual(["earlier", "later"]);
      });

      it("lists accounts made in the same millisecond by name", async () => {
        for (const name of ["charlie", "alpha", "bravo"]) await store.insertAccount(makeAccount({ name }));
        expect((await store.listAccounts()).map((account) => account.name)).toEqual([
          "alpha",
          "bravo",
          "charlie",
        ]);
      });

      it("lists accounts with their money a page at a time, after a (time, name) cursor", async () => {
        const names = ["delta", "alpha", "charlie", "bravo"];
        for (const name of names) await store.insertAccount(makeAccount({ name, createdAt: T0 }));
        const latest = makeAccount({ name: "aaa", balanceNano: 42n, createdAt: new Date(T0.getTime() + 1) });
        await store.insertAccount(latest);
        await store.reserve(makeReservation({ accountId: latest.id, amountNano: 2n }));
        const pages: string[][] = [];
        let after: { createdAt: Date; name: string } | undefined;
        for (;;) {
          const page = await store.listAccountsWithMoney({ limit: 2, after });
          if (page.length === 0) break;
          pages.push(page.map((account) => account.name));
          const last = page.at(-1);
          after = last === undefined ? undefined : { createdAt: last.createdAt, name: last.name };
        }
        expect(pages).toEqual([["alpha", "bravo"], ["charlie", "delta"], ["aaa"]]);
        // A page reads the money as the whole listing does (a SQLite server's held reservations too).
        const [last] = await store.listAccountsWithMoney({
          limit: 10,
          after: { createdAt: T0, name: "delta" },
        });
        expect(last).toMatchObject({ name: "aaa", balanceNano: 42n, reservedNano: 2n, spentNano: 0n });
        await expect(store.listAccountsWithMoney({ limit: 0 })).rejects.toThrow(RangeError);
      });

      it("tells whether any account exists", async () => {
        expect(await store.hasAccounts()).toBe(false);
        await store.insertAccount(makeAccount({ name: "acme" }));
        expect(await store.hasAccounts()).toBe(true);
      });

      it("reads accounts by id, more ids than one query binds, unknown and repeated ones included", async () => {
        const accounts = Array.from({ length: ACCOUNT_IDS_PER_QUERY + 20 }, (_, index) =>
          makeAccount({ name: `account-${index}`, balanceNano: BigInt(index) }),
        );
        for (const account of accounts) await store.insertAccount(account);
        const ids = [...accounts.map((account) => account.id), randomUUID(), accounts[0]?.id ?? ""];
        const read = await store.getAccountsByIds(ids);
        expect(read.sort(byName)).toEqual([...accounts].sort(byName));
        expect(await store.getAccountsByIds([])).toEqual([]);
        expect(await store.getAccountsByIds([randomUUID()])).toEqual([]);
      });

      it("lists every account with the money getAccountMoney reads, in the order of listAccounts", async () => {
        const rich = makeAccount({ name: "rich", balanceNano: 10_000n, createdAt: T0 });
        const poor = makeAccount({ name: "poor", balanceNano: 0n, createdAt: T0 });
        const later = makeAccount({
          name: "later",
          balanceNano: 500n,
          createdAt: new Date(T0.getTime() + 1),
        });
        for (const account of [later, rich, poor]) await store.insertAccount(account);
        await store.credit(makeCredit({ accountId: poor.id, amountNano: 300n }));
        const settled = makeReservation({ accountId: rich.id, amountNano: 1_000n });
        await store.reserve(settled);
        await store.settle(makeSettlement(settled, 700n));
        // Open: a SQLite server holds these in memory, not in the file.
        await store.reserve(makeReservation({ accountId: rich.id, amountNano: 2_000n }));
        await store.reserve(makeReservation({ accountId: later.id, amountNano: 1n }));
        const listed = await store.listAccountsWithMoney();
        expect(listed.map((account) => account.name)).toEqual(
          (await store.listAccounts()).map((account) => account.name),
        );
        expect(listed.map((account) => account.name)).toEqual(["poor", "rich", "later"]);
        for (const account of listed) {
          const { reservedNano, spentNano, ...rest } = account;
          expect(rest).toEqual(await store.getAccountById(account.id));
          expect({ balanceNano: account.balanceNano, reservedNano, spentNano }).toEqual(
            await store.getAccountMoney(account.id),
          );
        }
        expect(listed.find((account) => account.id === rich.id)).toMatchObject({
          balanceNano: 9_300n,
          reservedNano: 2_000n,
          spentNano: 700n,
        });
        expect((await store.audit()).map((problem) => problem.kind)).toEqual([
          "open_reservation",
          "open_reservation",
        ]);
      });
    });

    describe("API keys", () => {
      it("reads back every field of a user key by public id", async () => {
        const account = makeAccount({ name: "acme" });
        await store.insertAccount(account);
        const key = makeKey({
          accountId: account.id,
          name: "ci",
          allowedModels: ["qwen3-0.6b", "org/model:Q4_K_M"],
          rpm: 60,
          tpm: 100_000,
          expiresAt: new Date("2030-01-01T12:34:56.789Z"),
        });
        await store.insertApiKey(key);
        expect(await store.getApiKeyByPublicId(key.publicId)).toEqual(key);
      });

      it("reads back an admin key without account and without limits", async () => {
        const key = makeKey({ role: "admin", accountId: undefined });
        await store.insertApiKey(key);
        const read = await store.getApiKeyByPublicId(key.publicId);
        expect(read).toEqual(key);
        expect(read?.accountId).toBeUndefined();
        expect(read?.allowedModels).toBeUndefined();
        expect(read?.rpm).toBeUndefined();
      });

      it("keeps an empty model list apart from every model", async () => {
        const account = makeAccount({ name: "acme" });
        await store.insertAccount(account);
        const key = makeKey({ accountId: account.id, allowedModels: [] });
        await store.insertApiKey(key);
        expect((await store.getApiKeyByPublicId(key.publicId))?.allowedModels).toEqual([]);
      });

      it("answers undefined for an unknown public id", async () => {
        expect(await store.getApiKeyByPublicId("zzzzzzzzzzzz")).toBeUndefined();
      });

      it("refuses a key whose account does not exist", async () => {
        await expect(store.insertApiKey(makeKey({ accountId: randomUUID() }))).rejects.toThrow();
      });

      it("refuses a user key without an account", async () => {
        await expect(store.insertApiKey(makeKey({ role: "user", accountId: undefined }))).rejects.toThrow();
      });

      it("refuses a second key with the same public id", async () => {
        const account = makeAccount({ name: "acme" });
        await store.insertAccount(account);
        const key = makeKey({ accountId: account.id });
        await store.insertApiKey(key);
        await expect(store.insertApiKey({ ...key, id: randomUUID() })).rejects.toThrow();
      });

      it("lists keys oldest first, all of them or one account's", async () => {
        const acme = makeAccount({ name: "acme" });
        const other = makeAccount({ name: "other" });
        await store.insertAccount(acme);
        await store.insertAccount(other);
        const second = makeKey({ accountId: acme.id, createdAt: new Date("2025-01-02T00:00:00.000Z") });
        const first = makeKey({ accountId: acme.id, createdAt: new Date("2025-01-01T00:00:00.000Z") });
        const others = makeKey({ accountId: other.id, createdAt: new Date("2025-01-03T00:00:00.000Z") });
        for (const key of [second, first, others]) await store.insertApiKey(key);
        expect(await store.listApiKeys()).toEqual([first, second, others]);
        expect(await store.listApiKeys({ accountId: acme.id })).toEqual([first, second]);
        expect(await store.listApiKeys({ accountId: randomUUID() })).toEqual([]);
      });

      it("lists keys a page at a time, after a (time, public id) cursor, one account's too", async () => {
        const acme = makeAccount({ name: "acme" });
        const other = makeAccount({ name: "other" });
        await store.insertAccount(acme);
        await store.insertAccount(other);
        // Three made in one millisecond (by public id among them), one later, one of another account.
        const at = new Date("2025-01-01T00:00:00.000Z");
        const keys = ["cccccccccccc", "aaaaaaaaaaaa", "bbbbbbbbbbbb"].map((publicId) =>
          makeKey({ accountId: acme.id, publicId, createdAt: at }),
        );
        const later = makeKey({ accountId: acme.id, createdAt: new Date("2025-01-02T00:00:00.000Z") });
        const others = makeKey({ accountId: other.id, createdAt: at });
        for (const key of [...keys, later, others]) await store.insertApiKey(key);
        const pages: string[][] = [];
        let after: { createdAt: Date; publicId: string } | undefined;
        for (;;) {
          const page = await store.listApiKeys({ accountId: acme.id }, { limit: 2, after });
          if (page.length === 0) break;
          pages.push(page.map((key) => key.publicId));
          const last = page.at(-1);
          after = last === undefined ? undefined : { createdAt: last.createdAt, publicId: last.publicId };
        }
        expect(pages).toEqual([
          ["aaaaaaaaaaaa", "bbbbbbbbbbbb"],
          ["cccccccccccc", later.publicId],
        ]);
        expect(await store.listApiKeys({}, { limit: 10 })).toHaveLength(5);
        await expect(store.listApiKeys({}, { limit: 0 })).rejects.toThrow(RangeError);
      });

      it("lists the keys of one role", async () => {
        const account = makeAccount({ name: "acme" });
        await store.insertAccount(account);
        const user = makeKey({ accountId: account.id, createdAt: new Date("2025-01-01T00:00:00.000Z") });
        const admin = makeKey({ role: "admin", createdAt: new Date("2025-01-02T00:00:00.000Z") });
        for (const key of [user, admin]) await store.insertApiKey(key);
        expect(await store.listApiKeys({ role: "admin" })).toEqual([admin]);
        expect(await store.listApiKeys({ role: "user" })).toEqual([user]);
        expect(await store.listApiKeys({ role: "admin", accountId: account.id })).toEqual([]);
      });

      it("revokes a key once and keeps the first revocation time", async () => {
        const account = makeAccount({ name: "acme" });
        await store.insertAccount(account);
        const key = makeKey({ accountId: account.id });
        await store.insertApiKey(key);
        const firstTime = new Date("2025-03-01T00:00:00.000Z");
        expect(await store.revokeApiKey(key.publicId, firstTime)).toBe("revoked");
        expect(await store.revokeApiKey(key.publicId, new Date("2025-04-01T00:00:00.000Z"))).toBe(
          "already_revoked",
        );
        expect((await store.getApiKeyByPublicId(key.publicId))?.revokedAt).toEqual(firstTime);
      });

      it("answers not_found when revoking an unknown key", async () => {
        expect(await store.revokeApiKey("zzzzzzzzzzzz", new Date())).toBe("not_found");
      });

      it("changes a key's settings in place and answers the key as it is now", async () => {
        const account = makeAccount({ name: "acme" });
        await store.insertAccount(account);
        const key = makeKey({ accountId: account.id, name: "ci", rpm: 1 });
        await store.insertApiKey(key);
        const changed = {
          ...key,
          name: "deploy",
          allowedModels: ["m1", "org/model:Q4"],
          rpm: 5,
          tpm: 100_000,
          expiresAt: new Date("2031-02-03T04:05:06.789Z"),
        };
        expect(
          await store.updateApiKey(key.publicId, {
            name: "deploy",
            allowedModels: ["m1", "org/model:Q4"],
            rpm: 5,
            tpm: 100_000,
            expiresAt: new Date("2031-02-03T04:05:06.789Z"),
          }),
        ).toEqual({ outcome: "updated", key: changed });
        expect(await store.getApiKeyByPublicId(key.publicId)).toEqual(changed);
      });

      it("keeps what a change leaves out, and clears what it sets to null", async () => {
        const account = makeAccount({ name: "acme" });
        await store.insertAccount(account);
        const key = makeKey({
          accountId: account.id,
          name: "ci",
          allowedModels: ["m1"],
          rpm: 60,
          tpm: 1000,
          expiresAt: new Date("2030-01-01T00:00:00.000Z"),
        });
        await store.insertApiKey(key);
        expect(await store.updateApiKey(key.publicId, { rpm: 120, tpm: undefined })).toEqual({
          outcome: "updated",
          key: { ...key, rpm: 120 },
        });
        const cleared = {
          ...key,
          rpm: undefined,
          tpm: undefined,
          allowedModels: undefined,
          expiresAt: undefined,
        };
        expect(
          await store.updateApiKey(key.publicId, {
            allowedModels: null,
            rpm: null,
            tpm: null,
            expiresAt: null,
          }),
        ).toEqual({ outcome: "updated", key: cleared });
        expect(await store.getApiKeyByPublicId(key.publicId)).toEqual(cleared);
        // No field: nothing written, the key as it is.
        expect(await store.updateApiKey(key.publicId, {})).toEqual({ outcome: "updated", key: cleared });
      });

      it("changes an expired key, and an admin key's name and expiry", async () => {
        const account = makeAccount({ name: "acme" });
        await store.insertAccount(account);
        const expired = makeKey({ accountId: account.id, expiresAt: new Date("2020-01-01T00:00:00.000Z") });
        const admin = makeKey({ role: "admin", accountId: undefined });
        for (const key of [expired, admin]) await store.insertApiKey(key);
        const later = new Date("2040-01-01T00:00:00.000Z");
        expect(await store.updateApiKey(expired.publicId, { expiresAt: later })).toEqual({
          outcome: "updated",
          key: { ...expired, expiresAt: later },
        });
        expect(await store.updateApiKey(admin.publicId, { name: "ops", expiresAt: later })).toEqual({
          outcome: "updated",
          key: { ...admin, name: "ops", expiresAt: later },
        });
        expect(await store.hasAdminKey()).toBe(true);
      });

      it("refuses to change a revoked key, writing nothing, and answers not_found for an unknown one", async () => {
        const account = makeAccount({ name: "acme" });
        await store.insertAccount(account);
        const key = makeKey({ accountId: account.id, rpm: 1 });
        await store.insertApiKey(key);
        const revokedAt = new Date("2025-03-01T00:00:00.000Z");
        await store.revokeApiKey(key.publicId, revokedAt);
        expect(await store.updateApiKey(key.publicId, { rpm: 1000, name: "again" })).toEqual({
          outcome: "revoked",
        });
        expect(await store.updateApiKey(key.publicId, {})).toEqual({ outcome: "revoked" });
        expect(await store.getApiKeyByPublicId(key.publicId)).toEqual({ ...key, revokedAt });
        expect(await store.updateApiKey("zzzzzzzzzzzz", { rpm: 5 })).toEqual({ outcome: "not_found" });
        expect(await store.updateApiKey("zzzzzzzzzzzz", {})).toEqual({ outcome: "not_found" });
      });

      it("changes only the key it names", async () => {
        const account = makeAccount({ name: "acme" });
        await store.insertAccount(account);
        const first = makeKey({ accountId: account.id, rpm: 1 });
        const second = makeKey({ accountId: account.id, rpm: 1 });
        for (const key of [first, second]) await store.insertApiKey(key);
        await store.updateApiKey(first.publicId, { rpm: 9 });
        expect(await store.getApiKeyByPublicId(second.publicId)).toEqual(second);
      });

      it("tells whether an admin key exists, revoked ones included", async () => {
        expect(await store.hasAdminKey()).toBe(false);
        const account = makeAccount({ name: "acme" });
        await store.insertAccount(account);
        await store.insertApiKey(makeKey({ accountId: account.id }));
        expect(await store.hasAdminKey()).toBe(false);
        const admin = makeKey({ role: "admin", accountId: undefined });
        await store.insertApiKey(admin);
        await store.revokeApiKey(admin.publicId, new Date());
        expect(await store.hasAdminKey()).toBe(true);
      });
    });

    describe("clock", () => {
      it("tells the store's time (on this machine, this machine's)", async () => {
        const before = Date.now();
        const time = await store.readClock();
        const after = Date.now();
        // PostgreSQL's clock_timestamp() keeps microseconds: a millisecond either way.
        expect(time).toBeGreaterThanOrEqual(before - 1);
        expect(time).toBeLessThanOrEqual(after + 1);
      });
    });
  });

  describeBillingConformance(name, backend);
}

function byName(first: Account, second: Account): number {
  return first.name < second.name ? -1 : first.name > second.name ? 1 : 0;
}
