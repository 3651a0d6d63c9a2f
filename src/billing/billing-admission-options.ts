/**
 * What a `BillingAdmission` (reserve-and-settle.ts) is built from, and how its settlements are
 * retried while the store fails: kept apart so that reserve-and-settle.ts holds the flow itself.
 */
import type { KeyLimits } from "../limits/key-limits.ts";
import type { Store, UsageRecord } from "../store/store.ts";
import type { ChargeJournal } from "./charge-journal.ts";

export interface BillingAdmissionOptions {
  store: Store;
  limits: KeyLimits;
  /** Identifies this server in its reservations (SQLite: any stable name). */
  replicaId: string;
  /** This machine's clock, for ids and times of records. Default `Date.now`. */
  now?: () => number;
  /** The clock reservation leases go by (the store's, see lease-clock.ts). Default: `now`. */
  leaseNow?: () => number;
  /**
   * Where settlement failures are reported; they never reach the client. `retrying`: the
   * settlement is tried again in the background; false when it is given up (at close).
   */
  onSettleError?: (
    error: unknown,
    requestId: string,
    details: {
      retrying: boolean;
      usage: UsageRecord;
      /** The charge is in {@link journal}: the next start records it. */
      journaled: boolean;
    },
  ) => void;
  /**
   * Where a charge the store did not take is kept while it waits (a SQLite store's file), so that
   * it outlives the process; see charge-journal.ts. Without one it lives in memory only.
   */
  journal?: ChargeJournal;
  /**
   * Reported when the journal could not be written (a full disk): the charge waits in memory
   * only, and a process that ends before the store takes it loses it: `usage` is everything
   * needed to record it by hand.
   */
  onJournalError?: (error: unknown, usage: UsageRecord) => void;
  /**
   * Reported when a settlement that failed went through on a later attempt, in the background:
   * after the request's log line and metrics, which therefore do not hold its charge
   * (`chargedNano`, to the usage row's `model`).
   */
  onSettleRecovered?: (
    requestId: string,
    attempts: number,
    charge: { model: string; chargedNano: bigint },
  ) => void;
  /**
   * Pauses between the attempts to settle while the store fails: the first ones before the
   * request's last byte, then, in the background, the last repeated until it goes through.
   * Default {@link SETTLE_RETRY_DELAYS_MS}.
   */
  settleRetryDelaysMs?: { beforeAnswer: readonly number[]; background: readonly number[] };
  /**
   * How long a settle attempt may wait for the store once a shutdown began, for a charge the
   * journal holds (or takes) when the time is up. Default {@link DRAIN_SETTLE_TIMEOUT_MS}.
   */
  drainSettleTimeoutMs?: number;
}

/**
 * A store that fails now and then (a restart, a failover) must not lose a charge: settling is
 * idempotent (a usage row is written once), so it is tried again, twice before the last byte,
 * then in the background until it goes through; the reservation, kept alive meanwhile, still
 * holds the money.
 */
export const SETTLE_RETRY_DELAYS_MS = {
  beforeAnswer: [100, 400],
  background: [1_000, 2_000, 5_000, 15_000, 30_000],
};

/**
 * The wait before background attempt `attempts` (counted from 0) of a charge or a release: the
 * delays in turn, then the last for good; a second where none are given.
 */
export function backgroundRetryDelay(delays: readonly number[], attempts: number): number {
  return delays[Math.min(attempts, delays.length - 1)] ?? 1_000;
}

/**
 * A settle attempt that fails after this long (a timeout, not a blip) is not tried again before
 * the request's last byte: its retries go on in the background at once.
 */
export const SLOW_SETTLE_FAILURE_MS = 1_000;

/**
 * How long a settle attempt waits for the store once a shutdown began (`BillingAdmission.beginClosing`),
 * when its charge is in the journal by then: a store that hangs (a paused or partitioned database)
 * answers nothing before its statement timeout, 30 s on PostgreSQL, and a drain that waited it
 * out (twice: the request's own attempt, then the last try) was killed by the orchestrator's
 * SIGKILL first (`docker compose stop` after 30 s). The attempt is not cancelled: should it
 * commit later, the charge leaves the journal; should the process end first, the next start
 * records the charge from the journal, and a settle that committed meanwhile is not charged
 * again (a usage row per reservation id).
 */
export const DRAIN_SETTLE_TIMEOUT_MS = 3_000;
