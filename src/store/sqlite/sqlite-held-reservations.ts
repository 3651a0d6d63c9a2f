import type { Reservation } from "../store.ts";
import type { HeldReservation } from "./sqlite-billing-types.ts";

/** How long a reservation stays in memory only before its row is written to the file. */
export const HOLD_MS = 1_000;

/**
 * The reservations the owner of a SQLite file holds in memory (see sqlite-billing-batch.ts for
 * why it may), the money each account has held, and the timer that writes their rows.
 */
export interface HeldReservations {
  /** Reservations held in memory by id, oldest first (a Map keeps insertion order). */
  readonly held: ReadonlyMap<string, HeldReservation>;
  /** The money the account has held in memory (0 for none). */
  heldFor(accountId: string): bigint;
  /** Holds a reservation just made, and arms the timer that writes its row once it is {@link HOLD_MS} old. */
  hold(reservation: Reservation): void;
  /** Holds it no longer: it was settled, or its row was written. */
  forget(entry: HeldReservation): void;
  /** Arms the timer for the oldest reservation that is only in memory, if none is armed. */
  scheduleWrites(): void;
  /** A row could not be written for a lock on the file (or a full disk): none is written for {@link HOLD_MS}. */
  pauseWrites(): void;
  /** Writes the row of every reservation only in memory now, but those that could not be written. */
  writeAll(): void;
  /** Disarms the timer for good: after this, rows are written only by {@link writeAll}. */
  stop(): void;
}

/**
 * The reservations held in memory, for the SQLite billing batch (sqlite-billing-batch.ts).
 *
 * Most requests finish well within {@link HOLD_MS}; their settle then writes the usage row and
 * charges the balance, and the reservation never touches the file. A request that runs longer
 * gets its reservation row written (the account's reserved column raised with it), so the CLI
 * beside the server sees its money set aside, and a crash leaves a reservation that the next start
 * releases. A crash that loses a reservation held in memory loses nothing else: nothing was
 * charged for it.
 *
 * `write` queues the writing of a row (the entry is marked `writing` first); the batch forgets
 * the entry once that commits. A row that could not be written for a lock on the file is tried
 * again after {@link HOLD_MS} ({@link HeldReservations.pauseWrites}); one that could not be written
 * otherwise stays in memory (`unwritable`) until it is settled.
 */
export function createHeldReservations(options: {
  write: (entry: HeldReservation) => void;
}): HeldReservations {
  const { write } = options;
  const held = new Map<string, HeldReservation>();
  /** The money each account has held in memory. */
  const heldByAccount = new Map<string, bigint>();

  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  /** `performance.now()` before which no row is written: the file was locked by another process. */
  let writesPausedUntil = 0;

  function writeEntry(entry: HeldReservation): void {
    entry.state = "writing";
    write(entry);
  }

  function scheduleWrites(): void {
    if (timer !== undefined || stopped) return;
    for (const entry of held.values()) {
      if (entry.state !== "memory" || entry.unwritable) continue;
      const now = performance.now();
      const delay = Math.max(0, entry.heldAt + HOLD_MS - now, writesPausedUntil - now);
      timer = setTimeout(writeDue, delay);
      timer.unref();
      return;
    }
  }

  function writeDue(): void {
    timer = undefined;
    if (performance.now() < writesPausedUntil) {
      scheduleWrites();
      return;
    }
    const due = performance.now() - HOLD_MS;
    for (const entry of held.values()) {
      if (entry.state !== "memory" || entry.unwritable) continue;
      // Held in order: the first one not due yet is the next to arm the timer for.
      if (entry.heldAt > due) break;
      writeEntry(entry);
    }
    scheduleWrites();
  }

  return {
    held,

    heldFor(accountId: string): bigint {
      return heldByAccount.get(accountId) ?? 0n;
    },

    hold(reservation: Reservation): void {
      const { id, accountId, amountNano } = reservation;
      held.set(id, { reservation, heldAt: performance.now(), state: "memory", unwritable: false });
      heldByAccount.set(accountId, (heldByAccount.get(accountId) ?? 0n) + amountNano);
      scheduleWrites();
    },

    forget(entry: HeldReservation): void {
      const { id, accountId, amountNano } = entry.reservation;
      held.delete(id);
      const remaining = (heldByAccount.get(accountId) ?? 0n) - amountNano;
      if (remaining === 0n) heldByAccount.delete(accountId);
      else heldByAccount.set(accountId, remaining);
    },

    scheduleWrites,

    pauseWrites(): void {
      writesPausedUntil = performance.now() + HOLD_MS;
      scheduleWrites();
    },

    writeAll(): void {
      for (const entry of held.values()) {
        if (entry.state === "memory" && !entry.unwritable) writeEntry(entry);
      }
    },

    stop(): void {
      stopped = true;
      if (timer !== undefined) clearTimeout(timer);
      timer = undefined;
    },
  };
}
