import type { Insertable, Kysely } from "kysely";
import { capUsageCost, toReservationRow, toUsageRow } from "../billing-rows.ts";
import { MAX_BIGINT_COLUMN, readBigInt } from "../column-values.ts";
import type { Database, UsageTable } from "../database.ts";
import { capCharge, noAccountError } from "../reserve-settle-shared.ts";
import type { Reservation, ReserveResult, UsageRecord } from "../store.ts";
import { isSqliteUnavailable } from "./explain-sqlite-error.ts";
import type { NodeSqliteDatabase } from "./node-sqlite-database.ts";
import { createBillingGroupCommit } from "./sqlite-billing-group-commit.ts";
import { createBillingStatements } from "./sqlite-billing-statements.ts";
import type {
  HeldReservation,
  KnownMoney,
  Operation,
  Outcome,
  SettleEffect,
} from "./sqlite-billing-types.ts";
import { createHeldReservations } from "./sqlite-held-reservations.ts";

/** The hot half of billing on SQLite: {@link Store.reserve} and {@link Store.settle}. */
export interface SqliteBillingBatch {
  /**
   * With `hold`, the reservation is held in memory (see below): only for the one server that
   * owns the file. Without, its row is written at once with a conditional update, safe against
   * other processes reserving on the same file.
   */
  reserve(reservation: Reservation, options: { hold: boolean }): Promise<ReserveResult>;
  /** See {@link Store.settle}: charges the cost as far as the account can pay it; returns the charge. */
  settle(usage: UsageRecord): Promise<bigint>;
  /**
   * Writes every reservation still held in memory to the file, so that what the file says is
   * the whole truth; the store runs this before it reads or changes reservations otherwise.
   */
  writeHeld(): Promise<void>;
  /** The reserved money this process holds in memory for the account. */
  heldFor(accountId: string): bigint;
  /**
   * Call after reservation rows were deleted other than by a settle (a release): the ids of the
   * rows in the file are read again before the next reservation is checked against them.
   */
  forgetReservationIds(): void;
  /** Settles once every write asked for so far has committed or failed. */
  drain(): Promise<void>;
  /** Writes what is held, finishes pending writes and stops the timer; nothing may follow. */
  close(): Promise<void>;
}

/**
 * Reserve and settle on SQLite, the single-server store.
 *
 * One server owns a SQLite file (a second would release the first's reservations when it starts),
 * so the only reserves that can race are this process's own, and they run on one thread. That
 * lets a reservation live in memory: `reserve` reads the account row (balance and the reserved
 * money written to the file) synchronously, subtracts what this process holds, and answers at
 * once, with no write and no wait for a commit. Most requests are settled before their
 * reservation's row is ever written (sqlite-held-reservations.ts: what is held, and when a
 * reservation that lasts is written to the file after all).
 *
 * Reading the account row costs more than the rest of a reserve (each statement outside a
 * transaction opens and closes a read transaction of its own: file locks and the WAL index), so
 * the owner remembers each account's money as it last read it, with the changes of its own
 * commits applied. Other processes can only raise what an account has available (a credit from
 * the CLI; nothing else beside the owner reserves or charges), so that memory is a lower bound:
 * a reservation it covers is held without a read, and one it does not cover reads the file, which
 * then decides (and tells of any credit). Likewise the ids of the reservation rows in the file are
 * known (read once, then kept as this process writes and deletes them), for the check that an id
 * is not taken.
 *
 * Writes (settles, and reservations being written) are group-committed
 * (sqlite-billing-group-commit.ts): those asked for during one turn of the event loop run
 * together in one transaction at its check phase (`setImmediate`):
 * - each operation is still atomic: when one fails, the batch is rolled back and run again with
 *   a savepoint around each operation, so only the failing one is rolled back and rejects;
 * - nobody hears back before the commit: a settle resolves once the transaction that holds its
 *   usage row has committed (so a completed request has its usage row before its last byte);
 * - memory follows the file: a held reservation is forgotten (or moved to the file) in the same
 *   synchronous step that commits its settle (or its row), so a reserve never sees the money
 *   in neither place; in between it may count in both, which only errs on the safe side.
 *
 * Another process can hold the file's write lock for longer than the owner's short busy timeout
 * (a VACUUM, an open sqlite3 session): a batch then fails at once (its settles are retried by
 * their caller), and until a batch commits again reservations are written, not held, so they
 * fail too (503) instead of serving requests whose charges cannot be recorded.
 *
 * The statements run directly on `node:sqlite` (kysely's per-call machinery cost more than the
 * statements), while the batch holds kysely's connection lock, so a batch never runs inside a
 * transaction that kysely has open for another call (credit, release, migrations). A reserve
 * that finds such a transaction open waits for the lock instead of reading its uncommitted rows.
 */
export function createSqliteBillingBatch(options: {
  db: Kysely<Database>;
  database: NodeSqliteDatabase;
}): SqliteBillingBatch {
  const { db, database } = options;
  const { queries, templates, run, all, execute } = createBillingStatements(db, database);
  const { findAccount, readAccountMoney, setAsideBeside, addReserved, listReservationIds } = templates;

  const holding = createHeldReservations({ write: (entry) => enqueue({ kind: "write", held: entry }) });
  const { held, heldFor, hold, forget, scheduleWrites, pauseWrites, writeAll, stop } = holding;

  /** Each account's money as this process knows it (see the function's comment). */
  const knownMoney = new Map<string, KnownMoney>();
  /** Ids of the reservation rows in the file; `undefined` until read (again). */
  let rowIds: Set<string> | undefined;

  function readRowIds(): Set<string> {
    rowIds ??= new Set(all(listReservationIds({})).map((row) => String(row.id)));
    return rowIds;
  }

  /** Applies a commit of this process to what it knows of the account. */
  function adjustKnown(accountId: string, balanceNano: bigint, reservedNano: bigint): void {
    const known = knownMoney.get(accountId);
    if (known === undefined) return;
    known.balanceNano += balanceNano;
    known.reservedNano += reservedNano;
  }

  /** Runs synchronously, outside any transaction: reads committed rows only. */
  function reserveNow(reservation: Reservation): ReserveResult {
    const { id, accountId, amountNano } = reservation;
    if (held.has(id) || readRowIds().has(id)) throw new Error(`A reservation with the id ${id} exists.`);
    const heldNano = heldFor(accountId);
    let known = knownMoney.get(accountId);
    if (known === undefined || amountNano > known.balanceNano - known.reservedNano - heldNano) {
      const account = all(readAccountMoney({ accountId, id }))[0];
      if (account === undefined) {
        knownMoney.delete(accountId);
        return "account_not_found";
      }
      if (Number(account.taken) !== 0) throw new Error(`A reservation with the id ${id} exists.`);
      known = {
        balanceNano: readBigInt(account.balance_nano),
        reservedNano: readBigInt(account.reserved_nano),
      };
      knownMoney.set(accountId, known);
      if (amountNano > known.balanceNano - known.reservedNano - heldNano) return "insufficient_balance";
    }
    hold(reservation);
    return "reserved";
  }

  /** The conditional write of a reservation that is not held: safe beside other processes. */
  function reserveRow(reservation: Reservation): ReserveResult {
    const { accountId, amountNano } = reservation;
    if (held.has(reservation.id)) throw new Error(`A reservation with the id ${reservation.id} exists.`);
    const needed = amountNano + heldFor(accountId);
    // No balance exceeds what a column holds: an amount beyond it never fits (and cannot be bound).
    if (needed > MAX_BIGINT_COLUMN || run(setAsideBeside({ accountId, amount: amountNano, needed })) === 0) {
      return all(findAccount({ accountId })).length === 0 ? "account_not_found" : "insufficient_balance";
    }
    run(queries.insertReservation(toReservationRow(reservation)));
    return "reserved";
  }

  /**
   * Money that moved out of memory in the running transaction (held reservations whose row was
   * written, or that were settled), by account: until the transaction commits they still count
   * in {@link heldFor}, and must not count twice beside the file's rows and charges.
   */
  const movedInTransaction = new Map<string, bigint>();

  function moveOutOfMemory(accountId: string, amountNano: bigint): void {
    movedInTransaction.set(accountId, (movedInTransaction.get(accountId) ?? 0n) + amountNano);
  }

  function writeRow(entry: HeldReservation): void {
    const { reservation } = entry;
    if (run(addReserved({ accountId: reservation.accountId, amount: reservation.amountNano })) === 0) {
      throw new Error(`No account has the id ${reservation.accountId}; the reservation stays in memory.`);
    }
    run(queries.insertReservation(toReservationRow(reservation)));
    moveOutOfMemory(reservation.accountId, reservation.amountNano);
  }

  /**
   * Writes the usage row and charges the account; a reservation held in memory (`held`) has no
   * row to release, any other gives back its row's money. A cost above the reservation is
   * charged as far as the account can pay beside its other reservations, those held in memory
   * included (see {@link Store.settle}).
   */
  function settleNow(
    usage: UsageRecord,
    row: Insertable<UsageTable>,
    held: HeldReservation | undefined,
  ): SettleEffect {
    // Settled before (or recorded as refused): never charge twice; answer what was charged.
    if (run(queries.insertUsage(row)) === 0) {
      const recorded = all(queries.readUsageCost({ id: usage.id }))[0];
      return {
        repeated: true,
        chargedNano: recorded === undefined ? 0n : readBigInt(recorded.cost_nano),
        releasedNano: 0n,
        releasedRow: false,
      };
    }
    const { accountId, costNano } = usage;
    let releasedNano = 0n;
    let releasedRow = false;
    if (held === undefined) {
      const released = all(queries.deleteReservation({ id: usage.id }))[0];
      if (released !== undefined && released.account_id !== accountId) {
        throw new Error(
          `Reservation ${usage.id} belongs to another account than its usage row; nothing was settled.`,
        );
      }
      if (released !== undefined) {
        releasedNano = readBigInt(released.amount_nano);
        releasedRow = true;
      }
    }
    const heldNano = held?.reservation.amountNano ?? 0n;
    let chargedNano = costNano;
    if (costNano <= (held === undefined ? releasedNano : heldNano)) {
      // Within its reservation a charge always fits.
      if (run(queries.charge({ accountId, cost: costNano, released: releasedNano })) === 0) {
        throw noAccountError(accountId);
      }
    } else {
      const otherHeldNano = heldFor(accountId) - (movedInTransaction.get(accountId) ?? 0n) - heldNano;
      const fits = run(
        queries.chargeWithin({ accountId, cost: costNano, released: releasedNano, held: otherHeldNano }),
      );
      if (fits === 0) {
        const account = all(readAccountMoney({ accountId, id: usage.id }))[0];
        if (account === undefined) throw noAccountError(accountId);
        chargedNano = capCharge(costNano, {
          balanceNano: readBigInt(account.balance_nano),
          reservedNano: readBigInt(account.reserved_nano) - releasedNano,
          heldNano: otherHeldNano,
        });
        run(queries.charge({ accountId, cost: chargedNano, released: releasedNano }));
        run(queries.setUsageCost({ id: usage.id, cost: chargedNano }));
      }
    }
    if (held !== undefined) moveOutOfMemory(accountId, heldNano);
    return { repeated: false, chargedNano, releasedNano, releasedRow };
  }

  function apply(operation: Operation): ReserveResult | SettleEffect | undefined {
    switch (operation.kind) {
      case "reserve":
        return reserveRow(operation.reservation);
      case "write":
        writeRow(operation.held);
        return undefined;
      case "settle":
        return settleNow(operation.usage, operation.row, operation.held);
      default: {
        const unreachable: never = operation;
        throw new Error(`unknown billing operation ${String(unreachable)}`);
      }
    }
  }

  /** Brings memory in line with what the batch committed, then tells the callers. */
  function finish(operation: Operation, outcome: Outcome): void {
    switch (operation.kind) {
      case "reserve": {
        if (!outcome.ok) {
          operation.reject(outcome.error);
          return;
        }
        const result = outcome.value === undefined ? "reserved" : (outcome.value as ReserveResult);
        if (result === "reserved") {
          const { id, accountId, amountNano } = operation.reservation;
          rowIds?.add(id);
          adjustKnown(accountId, 0n, amountNano);
        }
        operation.resolve(result);
        return;
      }
      case "write":
        if (outcome.ok) {
          const { id, accountId, amountNano } = operation.held.reservation;
          rowIds?.add(id);
          adjustKnown(accountId, 0n, amountNano);
          forget(operation.held);
        } else if (isSqliteUnavailable(outcome.error)) {
          // Another process holds the file, or its disk is full or failing: written again later.
          operation.held.state = "memory";
          pauseWrites();
        } else {
          operation.held.state = "memory";
          operation.held.unwritable = true;
        }
        return;
      case "settle":
        if (outcome.ok && outcome.value !== undefined && !(outcome.value as SettleEffect).repeated) {
          const effect = outcome.value as SettleEffect;
          if (effect.releasedRow) rowIds?.delete(operation.usage.id);
          adjustKnown(operation.usage.accountId, -effect.chargedNano, -effect.releasedNano);
        }
        if (operation.held !== undefined) {
          if (outcome.ok) forget(operation.held);
          else {
            operation.held.state = "memory";
            scheduleWrites();
          }
        } else if (outcome.ok) {
          // Settled through the file while its reservation is still held: its row could not be
          // written. The settle is what counts; hold its money no longer.
          const stale = held.get(operation.usage.id);
          if (stale !== undefined && stale.state === "memory") forget(stale);
        }
        if (outcome.ok)
          operation.resolve(outcome.value === undefined ? 0n : (outcome.value as SettleEffect).chargedNano);
        else operation.reject(outcome.error);
        return;
      default: {
        const unreachable: never = operation;
        throw new Error(`unknown billing operation ${String(unreachable)}`);
      }
    }
  }

  const commit = createBillingGroupCommit({
    db,
    database,
    execute,
    apply,
    onBegin: () => movedInTransaction.clear(),
    finish,
  });
  const { enqueue, drain } = commit;

  let closed = false;

  async function writeHeld(): Promise<void> {
    writeAll();
    await drain();
  }

  return {
    async reserve(reservation: Reservation, options: { hold: boolean }): Promise<ReserveResult> {
      if (reservation.amountNano < 0n) throw new RangeError("A reservation's amount must be zero or more.");
      // While the file cannot be written (another process holds it, its disk is full), the
      // server's writes (its settles) fail: a reservation is then written, not held, so that it
      // fails too (503, retry later) rather than let requests run whose charges cannot be
      // recorded; the first that commits ends this.
      if (!options.hold || commit.writesFailing) {
        return await new Promise<ReserveResult>((resolve, reject) => {
          enqueue({ kind: "reserve", reservation, resolve, reject });
        });
      }
      if (closed) throw new Error("The store is closed.");
      // Another call's transaction is open on this connection: its rows are not committed yet.
      if (database.inTransaction) return await db.connection().execute(async () => reserveNow(reservation));
      return reserveNow(reservation);
    },

    async settle(record: UsageRecord): Promise<bigint> {
      if (record.costNano < 0n) throw new RangeError("A usage row's cost must be zero or more.");
      const usage = capUsageCost(record);
      // Converted now so that a bad record (negative tokens) fails alone, before any batch.
      const row = toUsageRow(usage);
      const entry = held.get(usage.id);
      let heldEntry: HeldReservation | undefined;
      if (entry !== undefined && entry.state === "memory") {
        if (entry.reservation.accountId !== usage.accountId) {
          throw new Error(
            `Reservation ${usage.id} belongs to another account than its usage row; nothing was settled.`,
          );
        }
        entry.state = "settling";
        heldEntry = entry;
      }
      // A reservation being written is settled through its row, in a later statement or batch.
      return await new Promise<bigint>((resolve, reject) => {
        enqueue({ kind: "settle", usage, row, held: heldEntry, resolve, reject });
      });
    },

    writeHeld,
    drain,

    heldFor,

    forgetReservationIds(): void {
      rowIds = undefined;
    },

    async close(): Promise<void> {
      await writeHeld();
      closed = true;
      stop();
      await drain();
    },
  };
}
