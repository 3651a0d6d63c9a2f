/**
 * What {@link Store.audit} finds and {@link Store.repairSpent} changes (store.ts).
 */
import type { Reservation } from "./store.ts";

/** An account's spent amount as {@link Store.repairSpent} found it and set it. */
export interface SpentRepair {
  accountId: string;
  fromNano: bigint;
  toNano: bigint;
}

/** One disagreement found by {@link Store.audit}. */
export type AuditProblem =
  | { kind: "balance_mismatch"; accountId: string; balanceNano: bigint; expectedNano: bigint }
  | { kind: "spent_mismatch"; accountId: string; spentNano: bigint; expectedNano: bigint }
  | { kind: "reserved_mismatch"; accountId: string; reservedNano: bigint; expectedNano: bigint }
  | { kind: "open_reservation"; reservation: Reservation };
