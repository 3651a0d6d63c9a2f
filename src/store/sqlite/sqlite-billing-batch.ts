import type { StatementSync } from "node:sqlite";
import type { CompiledQuery, Insertable, Kysely } from "kysely";
import { toReservationRow, toUsageRow } from "../billing-rows.ts";
import { readBigInt } from "../column-values.ts";
import { createQueryTemplate, type TemplateParameter } from "../create-query-template.ts";
import type { Database, ReservationsTable, UsageTable } from "../database.ts";
import { compileHotQueries } from "../kysely-billing.ts";
import type { Reservation, ReserveResult, UsageRecord } from "../store.ts";
import { type NodeSqliteDatabase, toSqlParameters } from "./node-sqlite-database.ts";

/** The hot half of billing on SQLite: {@link Store.reserve} and {@link Store.settle}, batched. */
export interface SqliteBillingBatch {
  reserve(reservation: Reservation): Promise<ReserveResult>;
  settle(usage: UsageRecord): Promise<void>;
  /** Settles once every reserve and settle asked for so far has committed or failed. */
  drain(): Promise<void>;
}

type Operation =
  | {
      kind: "reserve";
      reservation: Reservation;
      row: Insertable<ReservationsTable>;
      resolve: (result: ReserveResult) => void;
      reject: (error: unknown) => void;
    }
  | {
      kind: "settle";
      usage: UsageRecord;
      row: Insertable<UsageTable>;
      resolve: () => void;
      reject: (error: unknown) => void;
    };

/** What one operation of a batch came to, handed to its caller once the batch commits. */
type Outcome = { ok: true; value: ReserveResult | undefined } | { ok: false; error: unknown };

/**
 * Group commit for reserve and settle on SQLite.
 *
 * Each reserve or settle used to be its own write transaction: `begin immediate`, two or three
 * statements, `commit`, each commit appending the same few pages (the account row, the tables
 * and their indexes) to the WAL again. Under load most of that was repeated work, and the WAL
 * filled (and was checkpointed, on the event loop) several times a second.
 *
 * Here the operations asked for during one turn of the event loop wait for its check phase
 * (`setImmediate`) and then run together in one transaction:
 * - each operation is still atomic: when one fails, the batch is rolled back and run again with
 *   a savepoint around each operation, so the failing one is rolled back to its savepoint and
 *   rejects while the others of its batch commit;
 * - nobody hears back before the commit: a reserve answers `reserved` and a settle resolves only
 *   once the transaction that holds their rows has committed (so a completed request still has
 *   its usage row before its last byte); a failed commit rejects the whole batch;
 * - the checks are those of `kysely-billing.ts`, with the same SQL (its compiled templates), run
 *   one after the other under the write lock: a batch cannot overspend any more than a sequence
 *   of single transactions could.
 *
 * The statements run directly on `node:sqlite` (kysely's per-call machinery cost more than the
 * statements), while the batch holds kysely's connection lock, so a batch never runs inside a
 * transaction that kysely has open for another call (credit, release, migrations).
 */
export function createSqliteBillingBatch(options: {
  db: Kysely<Database>;
  database: NodeSqliteDatabase;
}): SqliteBillingBatch {
  const { db, database } = options;
  const queries = compileHotQueries(db);
  const findAccount = createQueryTemplate((parameter: TemplateParameter<{ accountId: string }>) =>
    db.selectFrom("accounts").select("id").where("id", "=", parameter("accountId")),
  );

  const statements = new Map<string, StatementSync>();
  function statementOf(sql: string): StatementSync {
    let statement = statements.get(sql);
    if (statement === undefined) {
      statement = database.prepareDirect(sql);
      statements.set(sql, statement);
    }
    return statement;
  }
  function run(query: CompiledQuery<unknown>): number {
    return Number(statementOf(query.sql).run(...toSqlParameters(query.parameters)).changes);
  }
  function all(query: CompiledQuery<unknown>): Record<string, unknown>[] {
    return statementOf(query.sql).all(...toSqlParameters(query.parameters));
  }
  function execute(sql: string): void {
    statementOf(sql).run();
  }

  function reserveNow(reservation: Reservation, row: Insertable<ReservationsTable>): ReserveResult {
    const amount = reservation.amountNano;
    if (run(queries.setAside({ accountId: reservation.accountId, amount })) === 0) {
      return all(findAccount({ accountId: reservation.accountId })).length === 0
        ? "account_not_found"
        : "insufficient_balance";
    }
    run(queries.insertReservation(row));
    return "reserved";
  }

  function settleNow(usage: UsageRecord, row: Insertable<UsageTable>): void {
    // Settled before (or recorded as refused): never charge twice.
    if (run(queries.insertUsage(row)) === 0) return;
    const released = all(queries.deleteReservation({ id: usage.id }))[0];
    if (released !== undefined && released.account_id !== usage.accountId) {
      throw new Error(
        `Reservation ${usage.id} belongs to another account than its usage row; nothing was settled.`,
      );
    }
    const releasedNano = released === undefined ? 0n : readBigInt(released.amount_nano);
    if (
      run(queries.charge({ accountId: usage.accountId, cost: usage.costNano, released: releasedNano })) === 0
    ) {
      throw new Error(`No account has the id ${usage.accountId}; nothing was settled.`);
    }
  }

  function apply(operation: Operation): ReserveResult | undefined {
    switch (operation.kind) {
      case "reserve":
        return reserveNow(operation.reservation, operation.row);
      case "settle":
        settleNow(operation.usage, operation.row);
        return undefined;
      default: {
        const unreachable: never = operation;
        throw new Error(`unknown billing operation ${String(unreachable)}`);
      }
    }
  }

  /**
   * Runs a batch in one transaction; throws (nothing written) when it failed as a whole. Most
   * batches fail nowhere, so the first attempt runs the operations bare; when one throws, the
   * transaction is rolled back (nothing was published yet) and the batch runs again with a
   * savepoint around each operation, so only the failing ones fail.
   */
  function runBatch(batch: readonly Operation[]): Outcome[] {
    let operationFailed = false;
    const runBare = (operation: Operation): Outcome => {
      try {
        return { ok: true, value: apply(operation) };
      } catch (error) {
        operationFailed = true;
        throw error;
      }
    };
    try {
      return runTransaction(batch, runBare);
    } catch (error) {
      // Only an operation's failure is worth a second attempt (not a busy `begin` or a failed
      // commit), and a batch of one has nothing to keep.
      if (!operationFailed || batch.length === 1) throw error;
      return runTransaction(batch, runInSavepoint);
    }
  }

  function runTransaction(batch: readonly Operation[], runOne: (operation: Operation) => Outcome): Outcome[] {
    execute("begin immediate");
    try {
      const outcomes = batch.map(runOne);
      execute("commit");
      return outcomes;
    } catch (error) {
      if (database.inTransaction) execute("rollback");
      throw error;
    }
  }

  function runInSavepoint(operation: Operation): Outcome {
    execute("savepoint billing_operation");
    try {
      const value = apply(operation);
      execute("release billing_operation");
      return { ok: true, value };
    } catch (error) {
      // SQLite rolls a whole transaction back after some errors (disk full, I/O): then the
      // batch cannot commit what came before, and fails as a whole.
      if (!database.inTransaction) throw error;
      execute("rollback to billing_operation");
      execute("release billing_operation");
      return { ok: false, error };
    }
  }

  let pending: Operation[] = [];
  let scheduled = false;
  let inFlight = 0;
  let idle: PromiseWithResolvers<void> | undefined;

  function enqueue(operation: Operation): void {
    pending.push(operation);
    if (scheduled) return;
    scheduled = true;
    inFlight += 1;
    setImmediate(() => void flush());
  }

  async function flush(): Promise<void> {
    scheduled = false;
    const batch = pending;
    pending = [];
    try {
      const outcomes = await db.connection().execute(async () => runBatch(batch));
      batch.forEach((operation, index) => {
        const outcome = outcomes[index] as Outcome;
        if (!outcome.ok) operation.reject(outcome.error);
        else if (operation.kind === "reserve") operation.resolve(outcome.value ?? "reserved");
        else operation.resolve();
      });
    } catch (error) {
      for (const operation of batch) operation.reject(error);
    } finally {
      inFlight -= 1;
      if (inFlight === 0 && idle !== undefined) {
        idle.resolve();
        idle = undefined;
      }
    }
  }

  return {
    async reserve(reservation: Reservation): Promise<ReserveResult> {
      if (reservation.amountNano < 0n) throw new RangeError("A reservation's amount must be zero or more.");
      const row = toReservationRow(reservation);
      return await new Promise<ReserveResult>((resolve, reject) => {
        enqueue({ kind: "reserve", reservation, row, resolve, reject });
      });
    },

    async settle(usage: UsageRecord): Promise<void> {
      if (usage.costNano < 0n) throw new RangeError("A usage row's cost must be zero or more.");
      // Converted now so that a bad record (negative tokens) fails alone, before any batch.
      const row = toUsageRow(usage);
      await new Promise<void>((resolve, reject) => {
        enqueue({ kind: "settle", usage, row, resolve, reject });
      });
    },

    async drain(): Promise<void> {
      if (inFlight === 0) return;
      idle ??= Promise.withResolvers<void>();
      await idle.promise;
    },
  };
}
