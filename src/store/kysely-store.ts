import { setImmediate } from "node:timers/promises";
import { type Kysely, type Selectable, type SelectQueryBuilder, sql, type Updateable } from "kysely";
import { toCreditRow } from "./billing-rows.ts";
import { fromTimestampText, readBigInt, requirePageLimit, toTimestampText } from "./column-values.ts";
import type { AccountsTable, ApiKeysTable, Database } from "./database.ts";
import { createKyselyBilling, type KyselyBillingOptions } from "./kysely-billing.ts";
import { repairSpent } from "./repair-spent.ts";
import type {
  Account,
  AccountPage,
  AccountWithMoney,
  ApiKeyChanges,
  ApiKeyFilter,
  ApiKeyPage,
  ApiKeyRecord,
  InsertAccountResult,
  InsertOptions,
  KeyRole,
  RevokeApiKeyResult,
  Store,
  UpdateApiKeyResult,
} from "./store.ts";

/** The note of the credit that records an account's opening balance. */
export const OPENING_CREDIT_NOTE = "opening balance";

/**
 * How many ids {@link Store.getAccountsByIds} binds per query: far below the smallest limit on
 * bound parameters (999 in SQLite before 3.32; 65,535 in PostgreSQL), and a page of usage rows
 * (1,000 rows) names at most two chunks of accounts. Between chunks the event loop takes a turn.
 */
export const ACCOUNT_IDS_PER_QUERY = 500;

/** A {@link Store} but for reserving and settling, which each database does its own way. */
export type KyselyStore = Omit<Store, "reserve" | "settle">;

/** The tables whose rows a store may stamp with its own time as it creates them. */
export type CreatedTable = "accounts" | "api_keys";

/**
 * How new accounts and keys take the database's time, not their record's `createdAt`, and paged
 * listings of them stay behind the creations under way (PostgreSQL's, postgres/creation-stamps.ts):
 * replicas' clocks differ, and a follower of `next_after` must never be passed by a row.
 */
export interface CreationStamps {
  /** SQL of the time a creating statement stamps its row with, as timestamp text. */
  timeSql: string;
  /** Runs first in a creation's transaction, before the statement that stamps the row. */
  announce(transaction: Kysely<Database>, table: CreatedTable): Promise<void>;
  /** The time before which a paged listing of `table` stays. */
  readHorizon(table: CreatedTable): Promise<string>;
}

/** How {@link createKyselyStore} runs on its dialect. */
export interface KyselyStoreOptions extends KyselyBillingOptions {
  /** Without it (SQLite, a CLI command's store), rows keep the times they are given. */
  creationStamps?: CreationStamps | undefined;
  /**
   * Makes the transactions that create accounts whose names are the same but for case take turns
   * (PostgreSQL: an advisory lock), so that each sees the other's row. SQLite needs none: one
   * connection's transactions take turns, and one whose read another connection's commit made
   * stale fails at its insert (SQLITE_BUSY_SNAPSHOT) instead of inserting.
   */
  lockAccountName?: ((transaction: Kysely<Database>, foldedName: string) => Promise<void>) | undefined;
}

/** The account names that fold to `folded` (a name in lower case): names are ASCII, as SQL's lower() folds. */
function selectNamesIgnoringCase(db: Kysely<Database>, folded: string) {
  return db
    .selectFrom("accounts")
    .select("name")
    .where((eb) => eb(eb.fn<string>("lower", ["name"]), "=", folded));
}

/**
 * The {@link Store} over any kysely dialect, but for reserving and settling (see
 * `kysely-billing.ts`). Queries use only what SQLite and PostgreSQL share (see `database.ts` for
 * the column conventions); each backend supplies the connection, and its reserve and settle.
 */
export function createKyselyStore(
  db: Kysely<Database>,
  options: KyselyStoreOptions = { lockRows: false },
): KyselyStore {
  const billing = createKyselyBilling(db, options);
  const stamps = options.creationStamps;
  /** The `created_at` a creation writes: the record's, or the creating statement's time. */
  const creationTime = (given: Date) =>
    stamps === undefined ? toTimestampText(given) : sql<string>`${sql.raw(stamps.timeSql)}`;
  /** Where a page of `table` stops: nowhere without stamps. */
  const readHorizon = (table: CreatedTable) =>
    stamps === undefined ? Promise.resolve(undefined) : stamps.readHorizon(table);
  return {
    async insertAccount(account: Account, insert: InsertOptions = {}): Promise<InsertAccountResult> {
      if (account.balanceNano < 0n) throw new RangeError("An opening balance must be zero or more.");
      const folded = account.name.toLowerCase();
      const created = await db.transaction().execute(async (transaction) => {
        // First, as creation-stamps.ts asks of a creation's transaction.
        await stamps?.announce(transaction, "accounts");
        // Names that differ only in case are refused: checked in the transaction that inserts,
        // which takes turns with any other creating the same name but for case.
        await options.lockAccountName?.(transaction, folded);
        const alike = await selectNamesIgnoringCase(transaction, folded).executeTakeFirst();
        if (alike !== undefined)
          return alike.name === account.name
            ? ("name_taken" as const)
            : ("name_taken_ignoring_case" as const);
        const row = await transaction
          .insertInto("accounts")
          .values({
            id: account.id,
            name: account.name,
            balance_nano: account.balanceNano,
            created_at: creationTime(account.createdAt),
          })
          .onConflict((conflict) => conflict.column("name").doNothing())
          .returning("created_at")
          .executeTakeFirst();
        if (row === undefined) return "name_taken" as const;
        const createdAt = fromTimestampText(row.created_at);
        if (account.balanceNano !== 0n) {
          await transaction
            .insertInto("credits")
            .values(
              toCreditRow({
                id: account.id,
                accountId: account.id,
                amountNano: account.balanceNano,
                note: OPENING_CREDIT_NOTE,
                createdAt,
              }),
            )
            .execute();
        }
        return createdAt;
      });
      if (typeof created === "string") return created;
      insert.onCreated?.(created);
      return "created";
    },

    async getAccountById(id: string): Promise<Account | undefined> {
      const row = await db.selectFrom("accounts").selectAll().where("id", "=", id).executeTakeFirst();
      return row === undefined ? undefined : toAccount(row);
    },

    async getAccountByName(name: string): Promise<Account | undefined> {
      const row = await db.selectFrom("accounts").selectAll().where("name", "=", name).executeTakeFirst();
      return row === undefined ? undefined : toAccount(row);
    },

    async listAccountNamesIgnoringCase(name: string): Promise<string[]> {
      const rows = await selectNamesIgnoringCase(db, name.toLowerCase()).orderBy("name").limit(10).execute();
      return rows.map((row) => row.name);
    },

    async listAccounts(): Promise<Account[]> {
      const rows = await selectAccountsInOrder(db).execute();
      return rows.map(toAccount);
    },

    async getAccountsByIds(ids: readonly string[]): Promise<Account[]> {
      const unique = [...new Set(ids)];
      const accounts: Account[] = [];
      for (let start = 0; start < unique.length; start += ACCOUNT_IDS_PER_QUERY) {
        // On SQLite a query runs on the event loop's thread and kysely resolves it in a
        // microtask: without a turn between chunks, 50,000 ids (a report grouped by key) would
        // hold every request in flight for a second.
        if (start > 0) await setImmediate();
        const chunk = unique.slice(start, start + ACCOUNT_IDS_PER_QUERY);
        const rows = await db.selectFrom("accounts").selectAll().where("id", "in", chunk).execute();
        accounts.push(...rows.map(toAccount));
      }
      return accounts;
    },

    listAccountsWithMoney: async (page?: AccountPage) =>
      readAccountsWithMoney(db, page, page === undefined ? undefined : await readHorizon("accounts")),

    async hasAccounts(): Promise<boolean> {
      const row = await db.selectFrom("accounts").select("id").limit(1).executeTakeFirst();
      return row !== undefined;
    },

    async insertApiKey(key: ApiKeyRecord, insert: InsertOptions = {}): Promise<void> {
      if (key.role === "admin" && key.accountId !== undefined) {
        // whereAdminKeys finds admin keys by their empty account: one with an account would be lost.
        throw new RangeError("An admin key belongs to no account.");
      }
      const write = (executor: Kysely<Database>) =>
        executor
          .insertInto("api_keys")
          .values({
            id: key.id,
            public_id: key.publicId,
            account_id: key.accountId ?? null,
            role: key.role,
            name: key.name,
            secret_hash: key.secretHash,
            allowed_models: key.allowedModels === undefined ? null : JSON.stringify(key.allowedModels),
            rpm: key.rpm === undefined ? null : BigInt(key.rpm),
            tpm: key.tpm === undefined ? null : BigInt(key.tpm),
            expires_at: key.expiresAt === undefined ? null : toTimestampText(key.expiresAt),
            revoked_at: key.revokedAt === undefined ? null : toTimestampText(key.revokedAt),
            created_at: creationTime(key.createdAt),
          })
          .returning("created_at")
          .executeTakeFirstOrThrow();
      const row =
        stamps === undefined
          ? await write(db)
          : await db.transaction().execute(async (transaction) => {
              await stamps.announce(transaction, "api_keys");
              return await write(transaction);
            });
      insert.onCreated?.(fromTimestampText(row.created_at));
    },

    async getApiKeyByPublicId(publicId: string): Promise<ApiKeyRecord | undefined> {
      const row = await db
        .selectFrom("api_keys")
        .selectAll()
        .where("public_id", "=", publicId)
        .executeTakeFirst();
      return row === undefined ? undefined : toApiKeyRecord(row);
    },

    async listApiKeys(filter: ApiKeyFilter = {}, page?: ApiKeyPage): Promise<ApiKeyRecord[]> {
      let query = db.selectFrom("api_keys").selectAll();
      if (filter.accountId !== undefined) query = query.where("account_id", "=", filter.accountId);
      if (filter.role === "admin") query = whereAdminKeys(query);
      else if (filter.role !== undefined) query = query.where("role", "=", filter.role);
      if (page !== undefined) {
        const limit = requirePageLimit(page.limit, "key");
        const horizon = await readHorizon("api_keys");
        if (horizon !== undefined) query = query.where("created_at", "<", horizon);
        const after = page.after;
        if (after !== undefined) {
          const createdAt = toTimestampText(after.createdAt);
          query = query.where((eb) =>
            eb(eb.refTuple("created_at", "public_id"), ">", eb.tuple(createdAt, after.publicId)),
          );
        }
        query = query.limit(limit);
      }
      const rows = await query.orderBy("created_at").orderBy("public_id").execute();
      return rows.map(toApiKeyRecord);
    },

    async revokeApiKey(publicId: string, revokedAt: Date): Promise<RevokeApiKeyResult> {
      const result = await db
        .updateTable("api_keys")
        .set({ revoked_at: toTimestampText(revokedAt) })
        .where("public_id", "=", publicId)
        .where("revoked_at", "is", null)
        .executeTakeFirst();
      if (result.numUpdatedRows > 0n) return "revoked";
      const existing = await db
        .selectFrom("api_keys")
        .select("id")
        .where("public_id", "=", publicId)
        .executeTakeFirst();
      return existing === undefined ? "not_found" : "already_revoked";
    },

    async updateApiKey(publicId: string, changes: ApiKeyChanges): Promise<UpdateApiKeyResult> {
      const columns = toApiKeyChangeColumns(changes);
      return await db.transaction().execute(async (transaction) => {
        // Only a key not revoked: on PostgreSQL a revocation that commits first is seen by the
        // update's condition, and one that comes after waits for this transaction.
        if (Object.keys(columns).length > 0) {
          await transaction
            .updateTable("api_keys")
            .set(columns)
            .where("public_id", "=", publicId)
            .where("revoked_at", "is", null)
            .execute();
        }
        const row = await transaction
          .selectFrom("api_keys")
          .selectAll()
          .where("public_id", "=", publicId)
          .executeTakeFirst();
        if (row === undefined) return { outcome: "not_found" };
        if (row.revoked_at !== null) return { outcome: "revoked" };
        return { outcome: "updated", key: toApiKeyRecord(row) };
      });
    },

    async hasAdminKey(): Promise<boolean> {
      const row = await whereAdminKeys(db.selectFrom("api_keys").select("id")).limit(1).executeTakeFirst();
      return row !== undefined;
    },

    // One machine's file: its clock is the store's. PostgreSQL's store replaces this.
    readClock: async () => Date.now(),

    ...billing,
    repairSpent: () => repairSpent(db, billing.audit),

    async close(): Promise<void> {
      await db.destroy();
    },
  };
}

/**
 * Narrows a query of API keys to the admin keys, through the index on `account_id`: admin keys
 * are the keys without an account (user keys must have one, by a check constraint; an admin key
 * never has one, see insertApiKey). `role = 'admin'` alone has no index and reads every key:
 * 34 ms on SQLite with 100,000 keys and none of them admin, on every GET /ready.
 */
function whereAdminKeys<Output>(
  query: SelectQueryBuilder<Database, "api_keys", Output>,
): SelectQueryBuilder<Database, "api_keys", Output> {
  return query.where("account_id", "is", null).where("role", "=", "admin");
}

/**
 * Every account with its money as the file (or database) has it, in the order of
 * {@link Store.listAccounts}: the money lives on the account's row (see `database.ts`), so one
 * query reads it all. `horizon`: a page holds only accounts stamped before it (see
 * {@link CreationStamps}).
 */
export async function readAccountsWithMoney(
  db: Kysely<Database>,
  page?: AccountPage,
  horizon?: string,
): Promise<AccountWithMoney[]> {
  let query = selectAccountsInOrder(db);
  if (horizon !== undefined) query = query.where("created_at", "<", horizon);
  if (page !== undefined) {
    const limit = requirePageLimit(page.limit, "account");
    const after = page.after;
    if (after !== undefined) {
      const createdAt = toTimestampText(after.createdAt);
      query = query.where((eb) =>
        eb(eb.refTuple("created_at", "name"), ">", eb.tuple(createdAt, after.name)),
      );
    }
    query = query.limit(limit);
  }
  const rows = await query.execute();
  return rows.map((row) => ({
    ...toAccount(row),
    reservedNano: readBigInt(row.reserved_nano),
    spentNano: readBigInt(row.spent_nano),
  }));
}

/** Every account row, oldest first (by name among accounts made in the same millisecond). */
function selectAccountsInOrder(db: Kysely<Database>) {
  return db.selectFrom("accounts").selectAll().orderBy("created_at").orderBy("name");
}

function toAccount(row: Selectable<AccountsTable>): Account {
  return {
    id: row.id,
    name: row.name,
    balanceNano: readBigInt(row.balance_nano),
    createdAt: fromTimestampText(row.created_at),
  };
}

function toApiKeyRecord(row: Selectable<ApiKeysTable>): ApiKeyRecord {
  return {
    id: row.id,
    publicId: row.public_id,
    accountId: row.account_id ?? undefined,
    role: toKeyRole(row.role),
    name: row.name,
    secretHash: row.secret_hash,
    allowedModels: row.allowed_models === null ? undefined : parseModelList(row.allowed_models),
    rpm: row.rpm === null ? undefined : Number(row.rpm),
    tpm: row.tpm === null ? undefined : Number(row.tpm),
    expiresAt: row.expires_at === null ? undefined : fromTimestampText(row.expires_at),
    revokedAt: row.revoked_at === null ? undefined : fromTimestampText(row.revoked_at),
    createdAt: fromTimestampText(row.created_at),
  };
}

/** The columns that {@link Store.updateApiKey} sets: those whose field is given (`null` clears one). */
function toApiKeyChangeColumns(changes: ApiKeyChanges): Updateable<ApiKeysTable> {
  const columns: Updateable<ApiKeysTable> = {};
  if (changes.name !== undefined) columns.name = changes.name;
  if (changes.allowedModels !== undefined)
    columns.allowed_models = changes.allowedModels === null ? null : JSON.stringify(changes.allowedModels);
  if (changes.rpm !== undefined) columns.rpm = changes.rpm === null ? null : BigInt(changes.rpm);
  if (changes.tpm !== undefined) columns.tpm = changes.tpm === null ? null : BigInt(changes.tpm);
  if (changes.expiresAt !== undefined)
    columns.expires_at = changes.expiresAt === null ? null : toTimestampText(changes.expiresAt);
  return columns;
}

function toKeyRole(value: string): KeyRole {
  if (value === "user" || value === "admin") return value;
  throw new Error(`The store holds an API key with an unknown role "${value}".`);
}

function parseModelList(text: string): string[] {
  const value: unknown = JSON.parse(text);
  if (Array.isArray(value) && value.every((entry) => typeof entry === "string")) return value;
  throw new Error("The store holds an API key whose allowed_models is not a JSON array of strings.");
}
