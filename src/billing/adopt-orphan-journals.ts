/**
 * The journals of owed charges that PostgreSQL replicas left in a shared `charge_journal_dir`
 * and will not read again: a replica removed for good, or one whose id changes at each start
 * (port 0; a host name that changes, as a pod's does). A starting replica records them, and so
 * do the running ones' lease sweeps (see {@link adoptOrphanJournals}), which keep the
 * reservations of the charges they hold until then (see {@link listOwedElsewhere}).
 */
import { randomBytes } from "node:crypto";
import { existsSync, readdirSync, renameSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import type { Logger } from "pino";
import { isStoreUnavailable } from "../store/is-store-unavailable.ts";
import { claimReplicaId } from "../store/open-store.ts";
import type { Store, UsageRecord } from "../store/store.ts";
import { ChargeJournal, recordOwedCharges, UNREADABLE_JOURNAL_LINES } from "./charge-journal.ts";
import type { OwedReservations } from "./keep-leases.ts";
import { RESERVATION_LEASE_MS } from "./reserve-and-settle.ts";

/**
 * How long another replica's journal must be untouched before a start takes its replica for gone:
 * a reservation's lease, after which the running replicas take the gone one's reservations for
 * left-overs too.
 */
export const ORPHAN_AFTER_MS = RESERVATION_LEASE_MS;

/**
 * `pending-charges-<replica id>.<store tag>.jsonl`, or one a start took to record and that is
 * still there (`.adopting-<random>` after it: that start died, or still works on it).
 */
const JOURNAL_NAME = /^pending-charges-(.+)\.([0-9a-f]{12})\.jsonl(\.adopting-[0-9a-f]+)?$/;

/**
 * Records the journals in `folder` of other replicas of this store (`storeTag`: deployments that
 * share the folder never read each other's) untouched for {@link ORPHAN_AFTER_MS}, or, with
 * `owingOnly`, those that hold charges, however recently written. A journal is
 * taken only while its replica id can be claimed on the database (no live server has it), and
 * taken by renaming it: the claim is given up at once (a replica on its way back finds its id
 * free), and a replica that still writes to it (alive, its claim lost in an outage) appends to a
 * new file instead of to the one being recorded. Charges the store cannot take now go back to
 * the journal's own name, for a later start; a charge recorded by both this start and its own
 * replica is recorded once (a usage row per reservation).
 */
export async function adoptOrphanJournals(options: {
  databaseUrl: string;
  folder: string;
  storeTag: string;
  ownPath: string;
  store: Pick<Store, "settle">;
  logger: Logger;
  /** Told of the charges the store refused for good, before they leave the journal. */
  onRefused: (refused: readonly { usage: UsageRecord; error: unknown }[]) => Promise<void>;
  /** Told of each charge recorded (see recordOwedCharges). */
  onRecorded?: (model: string, chargedNano: bigint) => void;
  /**
   * Only the journals that hold charges, however recently written: a lease sweep's, every round,
   * so that a gone replica's charges are recorded within a round or two (the claim, not the
   * journal's age, tells that its replica is gone). Those a start or sweep took (`.adopting-`)
   * are left to the aged pass: one may be recording them still. With no journal holding charges,
   * it costs a listing of the folder.
   */
  owingOnly?: boolean;
}): Promise<void> {
  const { folder, logger } = options;
  let names: string[];
  try {
    names = readdirSync(folder);
  } catch {
    return;
  }
  for (const name of names) {
    const match = JOURNAL_NAME.exec(name);
    const path = join(folder, name);
    if (match?.[1] === undefined || match[2] !== options.storeTag || path === options.ownPath) continue;
    const journalPath = join(folder, `pending-charges-${match[1]}.${match[2]}.jsonl`);
    let replicaId: string;
    try {
      replicaId = decodeURIComponent(match[1]);
      const stats = statSync(path);
      if (options.owingOnly === true) {
        if (stats.size === 0 || match[3] !== undefined) continue;
      } else if (Date.now() - stats.mtimeMs < ORPHAN_AFTER_MS) continue;
    } catch {
      continue;
    }
    const taken = await take({ ...options, path, journalPath, replicaId, abandoned: match[3] !== undefined });
    if (taken === undefined) continue;
    try {
      const journal = new ChargeJournal(taken);
      const { recorded, owed, unreadable } = await recordOwedCharges({
        store: options.store,
        journal,
        now: new Date(),
        isUnavailable: isStoreUnavailable,
        onRefused: options.onRefused,
        onRecorded: options.onRecorded,
      });
      if (unreadable !== undefined)
        logger.warn(
          { lines: unreadable.lines, keptIn: unreadable.path, replicaId },
          UNREADABLE_JOURNAL_LINES,
        );
      // Back under the journal's own name, appended: its replica may have begun a new one.
      const back = new ChargeJournal(journalPath);
      for (const usage of owed) back.owe(usage);
      rmSync(taken, { force: true });
      logger.warn(
        { recorded, stillOwed: owed.length, journal: journalPath, replicaId },
        "recorded the charges another replica journaled (it stopped, or lost the database)",
      );
    } catch (error) {
      logger.error(
        { err: error, journal: taken, replicaId },
        "could not record a gone replica's journal; a later sweep or start tries again",
      );
    }
  }
}

/**
 * Renames the journal at `path` to a name of this start's own, and answers that name; `undefined`
 * when it is not to be taken: its replica runs, the database cannot be reached, or another start
 * took it first. One a start took and left (`abandoned`) is taken without a claim: its replica
 * gave it up already.
 */
async function take(options: {
  databaseUrl: string;
  path: string;
  /** The journal's own name (`path` without what a start that took it added). */
  journalPath: string;
  replicaId: string;
  abandoned: boolean;
  logger: Logger;
}): Promise<string | undefined> {
  const { path, replicaId } = options;
  const taken = `${options.journalPath}.adopting-${randomBytes(6).toString("hex")}`;
  if (options.abandoned) return renameOrNothing(path, taken);
  let claim: Awaited<ReturnType<typeof claimReplicaId>>;
  try {
    claim = await claimReplicaId(options.databaseUrl, { replicaId });
  } catch (error) {
    // A live replica has it (and records its journal itself), or the database is gone again.
    if (!(error instanceof Error && error.name === "ReplicaIdInUseError")) {
      options.logger.warn(
        { err: error, journal: path, replicaId },
        "could not claim a gone replica's id to record its journal; a later sweep or start tries again",
      );
    }
    return undefined;
  }
  try {
    return renameOrNothing(path, taken);
  } finally {
    await claim?.close();
  }
}

function renameOrNothing(from: string, to: string): string | undefined {
  try {
    renameSync(from, to);
    return to;
  } catch {
    return undefined;
  }
}

/** How often {@link listOwedElsewhere} reads the folder again when a journal moved as it read it. */
const OWED_LISTING_TRIES = 5;

/**
 * The reservations whose charges the journals in `folder` of other replicas of this store hold,
 * by replica id: a gone replica's, one a start or sweep is recording (`.adopting-`), a live
 * one's (whose own rounds renew them too). A lease sweep keeps them before it releases expired
 * reservations (keep-leases.ts). A journal that moved while it was read (taken to be recorded,
 * or put back) has the folder read again; one that cannot be read is logged and left out. Costs
 * a listing of the folder when no journal holds charges.
 */
export async function listOwedElsewhere(options: {
  folder: string;
  storeTag: string;
  ownPath: string;
  logger: Pick<Logger, "warn">;
}): Promise<OwedReservations[]> {
  for (let attempt = 0; attempt < OWED_LISTING_TRIES; attempt++) {
    const owed = readOwedElsewhere(options);
    if (owed !== undefined) return owed;
  }
  throw new Error(
    `the journals in ${options.folder} kept moving while they were read (${OWED_LISTING_TRIES} tries)`,
  );
}

/** One reading of {@link listOwedElsewhere}; `undefined` when a journal moved meanwhile. */
function readOwedElsewhere(options: {
  folder: string;
  storeTag: string;
  ownPath: string;
  logger: Pick<Logger, "warn">;
}): OwedReservations[] | undefined {
  let names: string[];
  try {
    names = readdirSync(options.folder);
  } catch {
    return [];
  }
  const byReplica = new Map<string, string[]>();
  for (const name of names) {
    const match = JOURNAL_NAME.exec(name);
    const path = join(options.folder, name);
    if (match?.[1] === undefined || match[2] !== options.storeTag || path === options.ownPath) continue;
    let replicaId: string;
    let size: number;
    try {
      replicaId = decodeURIComponent(match[1]);
      size = statSync(path).size;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
      continue;
    }
    if (size === 0) continue;
    let ids: string[];
    try {
      ids = new ChargeJournal(path).readOwed().map((usage) => usage.id);
    } catch (error) {
      options.logger.warn(
        { err: error, journal: path, replicaId },
        "cannot read another replica's journal of owed charges: its reservations may be released before it is recorded",
      );
      continue;
    }
    // Nothing read from a file that is gone now: it moved between the listing and the read.
    if (ids.length === 0 && !existsSync(path)) return undefined;
    byReplica.set(replicaId, [...(byReplica.get(replicaId) ?? []), ...ids]);
  }
  return [...byReplica].flatMap(([replicaId, reservationIds]) =>
    reservationIds.length === 0 ? [] : [{ replicaId, reservationIds }],
  );
}

/** A journal in the folder of another store's replica that holds charges (see {@link listForeignJournals}). */
export interface ForeignJournal {
  journal: string;
  /** Charges it holds. */
  owed: number;
  /**
   * The name that makes it this store's, under a replica id of its own (`<its replica id>@<its
   * tag>`): a start or a lease sweep then records it here as a gone replica's.
   */
  renameTo: string;
}

/**
 * The journals in `folder` that hold charges owed to another store than the one `storeTag` names
 * (their names carry its tag): those of another deployment sharing the folder, which its own
 * replicas record, or of the database this one was restored from (pg_restore into a new
 * database, whose tag is new), which nothing would ever record: a start warns of them (open-
 * charge-journal.ts). Journals a start or sweep took (`.adopting-`) are left out, as are those
 * that cannot be read.
 */
export function listForeignJournals(options: { folder: string; storeTag: string }): ForeignJournal[] {
  let names: string[];
  try {
    names = readdirSync(options.folder);
  } catch {
    return [];
  }
  return names.flatMap((name) => {
    const match = JOURNAL_NAME.exec(name);
    if (match?.[1] === undefined || match[2] === options.storeTag || match[3] !== undefined) return [];
    const journal = join(options.folder, name);
    try {
      if (statSync(journal).size === 0) return [];
      const owed = new ChargeJournal(journal).readOwed().length;
      if (owed === 0) return [];
      // Under a replica id of its own, which no replica runs with: under its own id it could be a
      // running replica's journal, which that replica deletes once it owes nothing itself.
      const ownId = encodeURIComponent(`${decodeURIComponent(match[1])}@${match[2]}`);
      const renameTo = join(options.folder, `pending-charges-${ownId}.${options.storeTag}.jsonl`);
      return [{ journal, owed, renameTo }];
    } catch {
      return [];
    }
  });
}
