import type { Kysely } from "kysely";
import type { Database } from "../database.ts";
import type { ReserveResult } from "../store.ts";
import { isSqliteUnavailable } from "./explain-sqlite-error.ts";
import type { NodeSqliteDatabase } from "./node-sqlite-database.ts";
import type { Operation, Outcome, SettleEffect } from "./sqlite-billing-types.ts";

/** The group commit of the SQLite billing batch's writes (see sqlite-billing-batch.ts). */
export interface BillingGroupCommit {
  /** Queues a write: it runs in the batch of this turn of the event loop. */
  enqueue(operation: Operation): void;
  /** Settles once every write asked for so far has committed or failed (not those asked for later). */
  drain(): Promise<void>;
  /**
   * True from a batch that failed because the file could not be written (another process held
   * its write lock: a CLI command, a VACUUM, an open sqlite3 session; or its disk is full or
   * failing, or it was made read-only) until a batch commits again. Meanwhile reservations are
   * written rather than held (see `reserve` in sqlite-billing-batch.ts).
   */
  readonly writesFailing: boolean;
}

/**
 * Runs the operations asked for during one turn of the event loop together, in one transaction
 * at its check phase (`setImmediate`), under kysely's connection lock; then hands each operation
 * its outcome, in order, once the transaction has committed or failed.
 */
export function createBillingGroupCommit(options: {
  db: Kysely<Database>;
  database: NodeSqliteDatabase;
  execute: (sql: string) => void;
  /** Runs one operation inside the batch's transaction; throws when it fails. */
  apply: (operation: Operation) => ReserveResult | SettleEffect | undefined;
  /** Called as each transaction begins: a batch run again starts over. */
  onBegin: () => void;
  /** Brings memory in line with what the batch committed, then tells the caller. */
  finish: (operation: Operation, outcome: Outcome) => void;
}): BillingGroupCommit {
  const { db, database, execute, apply, onBegin, finish } = options;

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
    onBegin();
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
  /** What this returns: `writesFailing` is a plain field, not a getter (every reserve reads it). */
  const commit = { enqueue, drain, writesFailing: false };
  /** Batches scheduled so far, numbered from 1. */
  let batchesScheduled = 0;
  /** Every batch up to this number has committed or failed. */
  let batchesDone = 0;
  /** Batches done out of order, past `batchesDone`. */
  const doneAhead = new Set<number>();
  /** Drains waiting for every batch up to `batch`. */
  let drains: { batch: number; resolve: () => void }[] = [];

  function enqueue(operation: Operation): void {
    pending.push(operation);
    if (scheduled) return;
    scheduled = true;
    const batch = ++batchesScheduled;
    setImmediate(() => void flush(batch));
  }

  /** Counts batch `batch` as done, and ends the drains that waited for it and those before it. */
  function batchDone(batch: number): void {
    doneAhead.add(batch);
    while (doneAhead.delete(batchesDone + 1)) batchesDone += 1;
    if (drains.length === 0) return;
    const waiting = drains;
    drains = [];
    for (const drain of waiting) {
      if (drain.batch <= batchesDone) drain.resolve();
      else drains.push(drain);
    }
  }

  async function flush(batchNumber: number): Promise<void> {
    scheduled = false;
    const batch = pending;
    pending = [];
    let finished = false;
    try {
      await db.connection().execute(async () => {
        // The checkpoint worker is copying the rest of the WAL so that it can start over
        // (start-checkpointer.ts): writing now would leave it something more to copy.
        const paused = database.writesResumed;
        if (paused !== undefined) await paused;
        let outcomes: Outcome[];
        try {
          outcomes = runBatch(batch);
          // An operation may fail alone for want of space while the rest of its batch commits;
          // and a batch that wrote nothing (refusals, repeated settles) commits on a full disk too:
          // only one that wrote says the file can be written again.
          if (outcomes.some((outcome) => !outcome.ok && isSqliteUnavailable(outcome.error)))
            commit.writesFailing = true;
          else if (batch.some((operation, index) => wrote(operation, outcomes[index] as Outcome)))
            commit.writesFailing = false;
        } catch (error) {
          if (isSqliteUnavailable(error)) commit.writesFailing = true;
          outcomes = batch.map(() => ({ ok: false, error }));
        }
        finished = true;
        batch.forEach((operation, index) => {
          finish(operation, outcomes[index] as Outcome);
        });
      });
    } catch (error) {
      // The lock itself failed (the connection is gone): nothing ran.
      if (!finished) for (const operation of batch) finish(operation, { ok: false, error });
    } finally {
      batchDone(batchNumber);
    }
  }

  /** Whether an operation that succeeded changed the file (a refusal or a repeated settle did not). */
  function wrote(operation: Operation, outcome: Outcome): boolean {
    if (!outcome.ok) return false;
    if (operation.kind === "reserve") return outcome.value === undefined || outcome.value === "reserved";
    if (operation.kind === "settle") return !(outcome.value as SettleEffect | undefined)?.repeated;
    return true;
  }

  /** Waits for the batches scheduled so far, not for those scheduled later (a steady load never pauses). */
  async function drain(): Promise<void> {
    const batch = batchesScheduled;
    if (batchesDone >= batch) return;
    await new Promise<void>((resolve) => drains.push({ batch, resolve }));
  }

  return commit;
}
