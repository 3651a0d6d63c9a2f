import { accessSync, constants } from "node:fs";
import { basename } from "node:path";
import type { Logger } from "pino";
import { makeFolderSync } from "../files/make-folder.ts";
import { isStoreUnavailable } from "../store/is-store-unavailable.ts";
import { chargeJournalPath } from "../store/open-store.ts";
import { isSqliteUnavailable } from "../store/sqlite/explain-sqlite-error.ts";
import type { Store, UsageRecord } from "../store/store.ts";
import { adoptOrphanJournals, listForeignJournals, listOwedElsewhere } from "./adopt-orphan-journals.ts";
import { ChargeJournal, recordOwedCharges, UNREADABLE_JOURNAL_LINES } from "./charge-journal.ts";
import type { OwedReservations } from "./keep-leases.ts";

/** The longest file name most file systems take (ext4, XFS, APFS). */
const MAX_FILE_NAME_BYTES = 255;

/** A server's journal of owed charges, and what a previous run left in it that is still owed. */
export interface OpenedChargeJournal {
  /** `undefined` where the store keeps none (an in-memory SQLite store, PostgreSQL without a folder). */
  journal: ChargeJournal | undefined;
  path: string | undefined;
  /** The previous run's charges the store could not take at this start (retried with the rest). */
  stillOwed: UsageRecord[];
  /**
   * PostgreSQL: records the journals gone replicas left in the folder since (adopt-orphan-
   * journals.ts): those that hold charges at each call, the others (left empty) at most every
   * {@link ORPHAN_RESCAN_MS}; for the lease keeper's sweeps, after each release.
   */
  adoptOrphans?: () => Promise<void>;
  /**
   * PostgreSQL: the reservations whose charges other replicas' journals in the folder hold, for
   * the lease keeper to keep before each release (`listOwedElsewhere`).
   */
  owedElsewhere?: () => Promise<OwedReservations[]>;
}

/**
 * How often a running replica looks for all the journals of replicas gone since it started, those
 * left empty too (those that hold charges it records at every sweep): one whose id changes at
 * each start (port 0, a pod's name) would otherwise leave its file until the next start of any
 * replica.
 */
export const ORPHAN_RESCAN_MS = 5 * 60_000;

/**
 * Opens the journal of charges owed (charge-journal.ts): beside the server's SQLite file, or for
 * PostgreSQL in `folder` under this replica's id and its store's tag (the folder made when
 * missing), and records the charges a previous run left in it, before the start releases
 * leftover reservations (a reservation row of theirs then gives its money back as they are
 * charged). A charge the store refuses for good is logged with its usage (to be recorded by hand)
 * and flushed before it leaves the journal; one it cannot take now stays owed.
 *
 * On PostgreSQL it then records the journals in the folder of replicas that are gone
 * (adopt-orphan-journals.ts).
 *
 * A PostgreSQL replica whose folder cannot be made or written (a read-only file system) starts
 * all the same, with a warning: the charges it comes to owe live in memory only, as they did
 * before there was a journal, and a replica killed during a database outage loses them (those a
 * previous run left in the file wait there for a start that can write it).
 */
export async function openChargeJournal(options: {
  databaseUrl: string;
  store: Pick<Store, "settle">;
  logger: Logger;
  /** PostgreSQL: this replica's id, its store's tag (`ReplicaClaim.storeTag`) and its journal's folder. */
  replica?: { id: string; storeTag: string | undefined; folder: string | undefined };
  /**
   * Told of each charge recorded from a journal, this start's or a gone replica's: the process
   * that owed it never counted it in its metrics.
   */
  onRecorded?: (model: string, chargedNano: bigint) => void;
}): Promise<OpenedChargeJournal> {
  const { logger, databaseUrl, replica } = options;
  const sqlite = databaseUrl.startsWith("sqlite:");
  const folder = replica?.folder;
  const storeTag = replica?.storeTag;
  const path = chargeJournalPath(
    databaseUrl,
    replica === undefined || folder === undefined || storeTag === undefined
      ? undefined
      : { folder, replicaId: replica.id, storeTag },
  );
  if (path === undefined) return { journal: undefined, path, stillOwed: [] };
  const isUnavailable = sqlite ? isSqliteUnavailable : isStoreUnavailable;
  if (!sqlite && folder !== undefined) {
    const problem = prepareFolder(folder, path);
    if (problem !== undefined) {
      logger.warn(
        { chargeJournalDir: folder, err: problem },
        "cannot keep owed charges in charge_journal_dir (err says why): charges PostgreSQL does not take at once are retried in memory only, and lost if this process dies first; make the folder writable, or set charge_journal_dir (TOLLGATE_CHARGE_JOURNAL_DIR) to one that is",
      );
      return { journal: undefined, path: undefined, stillOwed: [] };
    }
  }
  const journal = new ChargeJournal(path);
  const { recorded, owed, unreadable } = await recordOwedCharges({
    store: options.store,
    journal,
    now: new Date(),
    isUnavailable,
    onRefused: (refused) => logRefused(logger, refused),
    onRecorded: options.onRecorded,
  });
  if (unreadable !== undefined)
    logger.warn({ lines: unreadable.lines, keptIn: unreadable.path }, UNREADABLE_JOURNAL_LINES);
  if (recorded + owed.length > 0) {
    logger.warn(
      { recorded, stillOwed: owed.length, journal: path },
      "recorded the charges the previous run owed",
    );
  }
  if (sqlite || folder === undefined || storeTag === undefined) return { journal, path, stillOwed: owed };
  const adopt = (owingOnly: boolean) =>
    adoptOrphanJournals({
      databaseUrl,
      folder,
      storeTag,
      ownPath: path,
      store: options.store,
      logger,
      onRefused: (refused) => logRefused(logger, refused),
      onRecorded: options.onRecorded,
      owingOnly,
    });
  await adopt(false);
  warnOfForeignJournals(logger, folder, storeTag);
  let lastRun = performance.now();
  const adoptOrphans = async () => {
    // The charges of a replica gone since: their reservations are kept until these are recorded.
    await adopt(true);
    if (performance.now() - lastRun < ORPHAN_RESCAN_MS) return;
    lastRun = performance.now();
    await adopt(false);
  };
  const owedElsewhere = () => listOwedElsewhere({ folder, storeTag, ownPath: path, logger });
  return { journal, path, stillOwed: owed, adoptOrphans, owedElsewhere };
}

/**
 * Warns of the journals in the folder that hold charges owed to another database or schema.
 * Regression: after the documented PostgreSQL restore (pg_restore into a new database, whose tag
 * differs), the charges a killed replica had journaled for the old database were never recorded
 * and nothing said so; `audit` passed without them.
 */
function warnOfForeignJournals(logger: Logger, folder: string, storeTag: string): void {
  const foreign = listForeignJournals({ folder, storeTag });
  if (foreign.length === 0) return;
  logger.warn(
    { journals: foreign, storeTag },
    `${foreign.length} ${foreign.length === 1 ? "journal" : "journals"} in charge_journal_dir ${foreign.length === 1 ? "holds" : "hold"} charges owed to another database or schema (the tag in the name is not this one's, ${storeTag}): that database's replicas record them when they start. If this database was restored from that one (pg_restore into a new database), rename each journal as renameTo says (mv -n: a name of its own, which no replica writes to): a running replica's lease sweep, within a minute, or the next start records its charges here (a charge this database holds already is not charged again)`,
  );
}

/**
 * Logs each charge the store refused for good with its usage (to be recorded by hand), and
 * flushes the log before the charges leave their journal: a kill in between loses neither.
 */
async function logRefused(
  logger: Logger,
  refused: readonly { usage: UsageRecord; error: unknown }[],
): Promise<void> {
  for (const { usage, error } of refused) {
    logger.error(
      { err: error, reqId: usage.requestId, usage: { ...usage, costNano: String(usage.costNano) } },
      "the store refused a charge the previous run owed (its account is not in this database?); it was not recorded and leaves the journal",
    );
  }
  await new Promise<void>((resolve) => logger.flush(() => resolve()));
}

/** Makes `folder` where it is missing; answers why it cannot hold the journal at `path`, if it cannot. */
function prepareFolder(folder: string, path: string): Error | undefined {
  const nameBytes = Buffer.byteLength(basename(path));
  if (nameBytes > MAX_FILE_NAME_BYTES) {
    return new Error(
      `the replica id is too long to name its journal (${nameBytes} bytes, at most ${MAX_FILE_NAME_BYTES} in a file name); set a shorter TOLLGATE_REPLICA_ID`,
    );
  }
  try {
    makeFolderSync(folder);
    accessSync(folder, constants.W_OK);
    return undefined;
  } catch (error) {
    return error instanceof Error ? error : new Error(String(error));
  }
}
