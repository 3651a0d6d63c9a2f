import type { Insertable } from "kysely";
import type { UsageTable } from "../database.ts";
import type { Reservation, ReserveResult, UsageRecord } from "../store.ts";

// The shapes shared by the SQLite billing batch (sqlite-billing-batch.ts) and its group commit
// (sqlite-billing-group-commit.ts).

/** A reservation this process made whose row is not in the file (yet). */
export interface HeldReservation {
  reservation: Reservation;
  /**
   * `performance.now()` when it was made: it is written once it is `HOLD_MS` old (see
   * sqlite-held-reservations.ts).
   */
  heldAt: number;
  /**
   * - `memory`: only here;
   * - `writing`: its row is being written (a settle then goes through the row, queued after it);
   * - `settling`: its settle is queued; it charges the account without touching the reserved
   *   column, and the reservation is forgotten once that commits.
   */
  state: "memory" | "writing" | "settling";
  /** Its row could not be written: it stays in memory until it is settled. */
  unwritable: boolean;
}

export type Operation =
  | {
      kind: "reserve";
      reservation: Reservation;
      resolve: (result: ReserveResult) => void;
      reject: (error: unknown) => void;
    }
  | { kind: "write"; held: HeldReservation }
  | {
      kind: "settle";
      usage: UsageRecord;
      row: Insertable<UsageTable>;
      /** The reservation it settles, when that is held in memory. */
      held: HeldReservation | undefined;
      resolve: (chargedNano: bigint) => void;
      reject: (error: unknown) => void;
    };

/**
 * What a committed settle changed on its account; `repeated` when it had been settled before
 * (nothing changed, and `chargedNano` is what the earlier settle charged).
 */
export interface SettleEffect {
  repeated: boolean;
  chargedNano: bigint;
  /** The money its reservation row gave back (0 for a reservation held in memory). */
  releasedNano: bigint;
  /** Whether it deleted a reservation row. */
  releasedRow: boolean;
}

/** What one operation of a batch came to. */
export type Outcome =
  | { ok: true; value: ReserveResult | SettleEffect | undefined }
  | { ok: false; error: unknown };

/**
 * What this process knows of an account's money: the file's balance and reserved money when it
 * last read them, with what its own commits changed since.
 */
export interface KnownMoney {
  balanceNano: bigint;
  reservedNano: bigint;
}
