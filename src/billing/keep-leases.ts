import { setTimeout as delay } from "node:timers/promises";
import type { Reservation, Store } from "../store/store.ts";
import { LeaseClock } from "./lease-clock.ts";
import { RESERVATION_LEASE_MS } from "./reserve-and-settle.ts";

/**
 * How long the store must have answered this replica without a break before it releases other
 * replicas' expired reservations, beyond one renewal interval: see {@link keepLeases}.
 */
export const SWEEP_MARGIN_MS = 5_000;

/** How often every replica renews its leases: a third of a lease. */
export const LEASE_RENEWAL_MS = RESERVATION_LEASE_MS / 3;

/**
 * How long after its last renewal a replica that cannot reach the store stops the requests whose
 * reservations it holds (see {@link keepLeases}): the round two intervals after that renewal does
 * (half an interval allows for its timer), a renewal interval before their leases lapse, whether
 * the rounds between failed or still wait for the store.
 */
export const LAPSE_CUT_MS = RESERVATION_LEASE_MS - (3 * LEASE_RENEWAL_MS) / 2;

/** How long a round waits for its renewal before it judges whether the leases lapse. */
const LAPSE_CHECK_WAIT_MS = 1_000;

/** Reservations of another replica whose charges are still owed (in its journal). */
export interface OwedReservations {
  replicaId: string;
  reservationIds: readonly string[];
}

export interface LeaseKeeping {
  /**
   * One round: renew, then (on a shared store, when it is safe) release expired reservations;
   * resolves once the sweep it started, or one under way, is over.
   */
  tick(): Promise<void>;
  /** Stops the timer; a round under way finishes. */
  stop(): void;
}

interface LeaseLogger {
  warn(fields: object, message: string): void;
  error(fields: object, message: string): void;
}

/**
 * Keeps the leases of this replica's open reservations alive, every `intervalMs` (a third of the
 * lease), and on a shared store (`sweep`) releases any whose lease expired: a replica that stopped
 * for good (scaled away after a crash) renews nothing, and the money its reservations hold goes
 * back without waiting for its restart.
 *
 * A lease also expires when its replica is alive but could not reach the store: during a
 * database outage longer than the lease, every replica's leases run out together. Once the store
 * answers again, whichever replica swept first would release the others' live reservations
 * before they could renew them, and their accounts could then be spent twice over. So a replica
 * releases expired reservations only once the store has answered each of its rounds, quickly,
 * for a whole renewal interval and a margin ({@link SWEEP_MARGIN_MS}): by then every live replica
 * has had a round of its own on the store as it is now. A round that failed, or whose store call
 * took longer than a quarter of the interval (a paused database answers everything at once when
 * it resumes), starts that wait again. Each round renews before it releases, so a replica never
 * takes its own live reservations for expired ones.
 *
 * Leases are written and judged on the store's clock ({@link LeaseClock}), which each round
 * reads again (with nothing to renew, that read is also what tells whether the store answers):
 * replicas' own clocks may differ, or step.
 *
 * A replica killed while the store refused its settles left those charges in its journal
 * (charge-journal.ts), their reservations still open. Released first, their money went back to
 * the account, which could spend it before the journal was recorded, and each charge was then
 * capped at what was left: lost. So before it releases, a sweep renews the leases of the
 * reservations whose charges other replicas' journals hold (`owedElsewhere`), and they stay
 * until the journal is recorded (`afterSweep`), each charge against its own reservation.
 *
 * A replica cut off from the store alone (a network partition) cannot tell that from an outage:
 * the others go on answering, and once its leases lapse they release its reservations, though its
 * requests still run. Their accounts could then be spent again by the others, and its charges,
 * recorded once it is back, were capped at what was left: a stream that ran on for a minute was
 * never paid for. So a replica whose rounds have not renewed its leases for {@link LAPSE_CUT_MS}
 * stops its requests (`onLapsing`), about a renewal interval before anyone may release their
 * money; what they generated until then is charged (through the journal, while the store does not
 * answer). In an outage of the whole store this cuts the streams that run through its first 40 s
 * or so, the price of never serving a request whose money another replica may give back.
 *
 * A sweep (that renewal, the release, `afterSweep`) runs beside the rounds, one at a time:
 * recording a journal may wait on a locked account row for a statement's timeout per charge,
 * and the rounds meanwhile keep renewing this replica's own leases.
 */
export function keepLeases(options: {
  store: Pick<Store, "renewLeases" | "releaseReservations" | "readClock" | "listReservations">;
  replicaId: string;
  /** The reservations this replica's requests hold (see `BillingAdmission.liveReservationIds`). */
  liveReservationIds: () => readonly string[];
  /** Release other replicas' expired reservations: on a store that replicas share. */
  sweep: boolean;
  logger: LeaseLogger;
  /** Default {@link LEASE_RENEWAL_MS}; 0: no timer (rounds by `tick` only). */
  intervalMs?: number;
  /** The clock leases go by, kept on the store's; the admission's reservations share it. */
  clock?: LeaseClock;
  /** Reads the store's clock. Default `store.readClock`. */
  readStoreTime?: () => Promise<number>;
  /**
   * The reservations whose charges other replicas' journals hold (billing/adopt-orphan-
   * journals.ts), read before each release: their leases are renewed, so that they are not
   * released before the charges are recorded. A failure is logged, and that sweep releases
   * nothing.
   */
  owedElsewhere?: () => Promise<readonly OwedReservations[]>;
  /**
   * Run after each sweep, when the store has answered for a while: the charges gone replicas
   * left in journals (billing/adopt-orphan-journals.ts). A failure is logged.
   */
  afterSweep?: () => Promise<void>;
  /**
   * On a shared store (`sweep`): called once when this replica's leases are about to lapse (no
   * round has renewed them for {@link LAPSE_CUT_MS}) while it still holds live reservations, so
   * that it stops their requests (see {@link keepLeases}). Called again only after a round that
   * renewed.
   */
  onLapsing?: () => void;
}): LeaseKeeping {
  const { store, replicaId, sweep, logger } = options;
  const clock = options.clock ?? new LeaseClock();
  const readStoreTime = options.readStoreTime ?? (() => store.readClock());
  const intervalMs = options.intervalMs ?? LEASE_RENEWAL_MS;
  /** How long the store must have answered before a sweep: other replicas renew on their own timers. */
  const quietMs = LEASE_RENEWAL_MS + SWEEP_MARGIN_MS;
  const slowMs = LEASE_RENEWAL_MS / 4;
  /** Since when the store has answered every round quickly; `undefined` after a failure. */
  let answeringSince: number | undefined;
  let renewing: Promise<boolean> | undefined;
  let sweeping: Promise<void> | undefined;
  /** Whether the store has answered every round quickly for long enough to sweep. */
  const quiet = (at: number) => answeringSince !== undefined && at - answeringSince >= quietMs;
  /** When the last round that renewed this replica's leases began (the leases count from then). */
  let renewedAt = clock.steadyNow();
  /** Whether `onLapsing` was called since that round. */
  let lapsingTold = false;

  /** Renews this replica's leases; answers whether a sweep may follow. */
  const renew = async (): Promise<boolean> => {
    // Rounds are timed on the steady clock: a reading of the store's may move its own.
    const startedAt = clock.steadyNow();
    try {
      await clock.sync(readStoreTime);
      const ids = options.liveReservationIds();
      // Only the reservations of this server's requests: one the store made although its answer
      // never came back (a partition) belongs to none, and expires.
      if (ids.length > 0)
        await store.renewLeases(replicaId, new Date(clock.now() + RESERVATION_LEASE_MS), ids);
    } catch (error) {
      answeringSince = undefined;
      logger.error({ err: error }, "renewing reservation leases failed");
      return false;
    }
    renewedAt = startedAt;
    lapsingTold = false;
    const answeredAt = clock.steadyNow();
    if (answeredAt - startedAt > slowMs) answeringSince = answeredAt;
    else answeringSince ??= startedAt;
    return sweep && quiet(answeredAt);
  };

  const sweepOnce = async () => {
    if (options.owedElsewhere !== undefined) {
      let owed: readonly OwedReservations[];
      try {
        owed = await options.owedElsewhere();
      } catch (error) {
        logger.error(
          { err: error },
          "reading the charges other replicas' journals hold failed; no expired reservation is released this round",
        );
        return;
      }
      try {
        for (const { replicaId: owner, reservationIds } of owed) {
          await store.renewLeases(owner, new Date(clock.now() + RESERVATION_LEASE_MS), reservationIds);
        }
      } catch (error) {
        answeringSince = undefined;
        logger.error({ err: error }, "renewing the leases of charges other replicas' journals hold failed");
        return;
      }
    }
    // A round beside this sweep may have found the store failing or slow since it began.
    if (!quiet(clock.steadyNow())) return;
    try {
      const expiredBefore = new Date(clock.earliestNow());
      // Read first, to name them in the line: a release answers only how many it released.
      const expiring = (await store.listReservations()).filter(
        (reservation) => reservation.leaseExpiresAt < expiredBefore,
      );
      const expired = await store.releaseReservations({ expiredBefore });
      if (expired > 0) {
        logger.warn(
          { released: expired, ...nameReleased(expiring) },
          "released reservations whose lease expired",
        );
      }
    } catch (error) {
      answeringSince = undefined;
      logger.error({ err: error }, "releasing expired reservations failed");
      return;
    }
    await options.afterSweep?.().catch((error: unknown) => {
      logger.error({ err: error }, "recording the journals of gone replicas failed");
    });
  };

  /** Tells `onLapsing` when no round has renewed this replica's live leases for long. */
  const checkLapse = () => {
    if (!sweep || lapsingTold || options.onLapsing === undefined) return;
    const live = options.liveReservationIds().length;
    const sinceRenewalMs = clock.steadyNow() - renewedAt;
    if (live === 0 || sinceRenewalMs < LAPSE_CUT_MS) return;
    lapsingTold = true;
    logger.error(
      { requests: live, sinceRenewalMs: Math.round(sinceRenewalMs) },
      "cannot renew reservation leases before they lapse: stopping this replica's requests, whose reservations other replicas will soon release",
    );
    options.onLapsing();
  };

  const tick = async () => {
    // A round still waiting for the store: the next one would only queue behind it, and renews
    // nothing either.
    if (renewing !== undefined) {
      checkLapse();
      if (!(await renewing)) return;
    } else {
      const round = renew().finally(() => {
        renewing = undefined;
      });
      renewing = round;
      // The lapse is judged once this round has had its moment to renew: judged before it, one
      // failed round (a dropped connection, a row locked for a while) made the next cut every
      // request of the replica, on a store that answered again and with a third of the leases
      // left. A store that does not answer within the moment renews nothing.
      await Promise.race([round, delay(LAPSE_CHECK_WAIT_MS, undefined, { ref: false })]);
      checkLapse();
      if (!(await round)) return;
    }
    // A sweep under way (recording a journal) is not started twice; this round renewed anyway.
    sweeping ??= sweepOnce().finally(() => {
      sweeping = undefined;
    });
    return await sweeping;
  };

  const timer = intervalMs > 0 ? setInterval(() => void tick(), intervalMs) : undefined;
  timer?.unref();
  return {
    tick,
    stop() {
      clearInterval(timer);
    },
  };
}

/** How many released reservations the sweep's line names. */
export const NAMED_RELEASES = 5;

/**
 * The first {@link NAMED_RELEASES} released reservations by request and replica id (what tells an
 * operator whose requests' money was held: a replica gone, a reserve that went through unanswered),
 * and how many more there were.
 */
function nameReleased(expiring: readonly Reservation[]): {
  reservations: { requestId: string; replicaId: string }[];
  more?: number;
} {
  const reservations = expiring
    .slice(0, NAMED_RELEASES)
    .map(({ requestId, replicaId }) => ({ requestId, replicaId }));
  const more = expiring.length - reservations.length;
  return more > 0 ? { reservations, more } : { reservations };
}
