import { accessSync, constants, mkdirSync, readdirSync, statSync } from "node:fs";
import { basename, join } from "node:path";
import type { Logger } from "pino";
import { isStoreUnavailable } from "../store/is-store-unavailable.ts";
import { chargeJournalPath, claimReplicaId } from "../store/open-store.ts";
import type { ReplicaClaim } from "../store/postgres/claim-postgres-replica-id.ts";
import { isSqliteUnavailable } from "../store/sqlite/explain-sqlite-error.ts";
import type { Store, UsageRecord } from "../store/store.ts";
import { ChargeJournal, recordOwedCharges } from "./charge-journal.ts";
import { RESERVATION_LEASE_MS } from "./reserve-and-settle.ts";

/**
 * How long another replica's journal must be untouched before a start takes its replica for gone
 * (see `adoptOrphanJournals`): a reservation's lease, after which the running replicas take the
 * gone one's reservations for left-overs too.
 */
const ORPHAN_AFTER_MS = RESERVATION_LEASE_MS;
/** The longest file name most file systems take (ext4, XFS, APFS). */
const MAX_FILE_NAME_BYTES = 255;

/** A server's journal of owed charges, and what a previous run left in it that is still owed. */
export interface OpenedChargeJournal {
  /** `undefined` where the store keeps none (an in-memory SQLite store, PostgreSQL without a folder). */
  journal: ChargeJournal | undefined;
  path: string | undefined;
  /** The previous run's charges the store could not take at this start (retried with the rest). */
  stillOwed: UsageRecord[];
}

/**
 * Opens the journal of charges owed (charge-journal.ts): beside the server's SQLite file, or for
 * PostgreSQL in `folder` under this replica's id (created when missing), and records the charges
 * a previous run left in it, before the start releases leftover reservations (a reservation row
 * of theirs then gives its money back as they are charged). A charge the store refuses for good
 * is logged with its usage (to be recorded by hand) and flushed before it leaves the journal; one
 * it cannot take now stays owed.
 *
 * On PostgreSQL it then records the journals in the folder of replicas that are gone (see
 * `adoptOrphanJournals`).
 *
 * A PostgreSQL replica whose folder cannot be made or written (a read-only file system) starts
 * all the same, with a warning: its owed charges then live in memory only, as they did before
 * there was a journal, and a replica killed during a database outage loses them.
 */
export async function openChargeJournal(options: {
  databaseUrl: string;
  store: Pick<Store, "settle">;
  logger: Logger;
  /** PostgreSQL: this replica's id and the folder of its journal (`charge_journal_dir`). */
  replica?: { id: string; folder: string | undefined };
}): Promise<OpenedChargeJournal> {
  const { logger, databaseUrl, replica } = options;
  const sqlite = databaseUrl.startsWith("sqlite:");
  const folder = replica?.folder;
  const path = chargeJournalPath(
    databaseUrl,
    replica === undefined || folder === undefined ? undefined : { folder, replicaId: replica.id },
  );
  if (path === undefined) return { journal: undefined, path, stillOwed: [] };
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
  const isUnavailable = sqlite ? isSqliteUnavailable : isStoreUnavailable;
  const { recorded, owed } = await recordJournal({ journal, store: options.store, logger, isUnavailable });
  if (recorded + owed.length > 0) {
    logger.warn(
      { recorded, stillOwed: owed.length, journal: path },
      "recorded the charges the previous run owed",
    );
  }
  if (!sqlite && folder !== undefined) {
    await adoptOrphanJournals({ databaseUrl, folder, ownPath: path, store: options.store, logger });
  }
  return { journal, path, stillOwed: owed };
}

/**
 * Records what `journal` owes: each charge tried once; those the store cannot take now stay in
 * it; those it refuses for good are logged with their usage (to be recorded by hand) and flushed
 * before they leave it.
 */
async function recordJournal(options: {
  journal: ChargeJournal;
  store: Pick<Store, "settle">;
  logger: Logger;
  isUnavailable: (error: unknown) => boolean;
}): Promise<{ recorded: number; owed: UsageRecord[] }> {
  const { logger } = options;
  return await recordOwedCharges({
    store: options.store,
    journal: options.journal,
    now: new Date(),
    isUnavailable: options.isUnavailable,
    // Written down before they leave the journal: a kill in between loses neither.
    onRefused: async (refused) => {
      for (const { usage, error } of refused) {
        logger.error(
          { err: error, requestId: usage.requestId, usage: { ...usage, costNano: String(usage.costNano) } },
          "the store refused a charge the previous run owed (its account is not in this database?); it was not recorded and leaves the journal",
        );
      }
      await new Promise<void>((resolve) => logger.flush(() => resolve()));
    },
  });
}

/**
 * Records the journals in `folder` of other replica ids whose replicas are gone: one removed for
 * good from a deployment whose replicas share the folder (a volume), or one whose id changes at
 * each start (port 0; a host name that changes, as a pod's does), whose next start would never
 * read its journal. A journal is taken only while its id can be claimed on the database (no live
 * server has it; the claim is given up at once) and only once untouched for
 * {@link ORPHAN_AFTER_MS}, so that a replica on its way back finds its id free. Charges the store
 * cannot take now stay in their file, for a later start.
 */
async function adoptOrphanJournals(options: {
  databaseUrl: string;
  folder: string;
  ownPath: string;
  store: Pick<Store, "settle">;
  logger: Logger;
}): Promise<void> {
  const { databaseUrl, folder, logger } = options;
  let names: string[];
  try {
    names = readdirSync(folder);
  } catch {
    return;
  }
  for (const name of names) {
    const encoded = /^pending-charges-(.+)\.jsonl$/.exec(name)?.[1];
    const path = join(folder, name);
    if (encoded === undefined || path === options.ownPath) continue;
    let replicaId: string;
    try {
      replicaId = decodeURIComponent(encoded);
      if (Date.now() - statSync(path).mtimeMs < ORPHAN_AFTER_MS) continue;
    } catch {
      continue;
    }
    let claim: ReplicaClaim | undefined;
    try {
      claim = await claimReplicaId(databaseUrl, { replicaId });
    } catch (error) {
      // A live replica has it (and records its journal itself), or the database is gone again.
      if (!(error instanceof Error && error.name === "ReplicaIdInUseError")) {
        logger.warn(
          { err: error, journal: path, replicaId },
          "could not claim a gone replica's id to record its journal; a later start tries again",
        );
      }
      continue;
    }
    try {
      const { recorded, owed } = await recordJournal({
        journal: new ChargeJournal(path),
        store: options.store,
        logger,
        isUnavailable: isStoreUnavailable,
      });
      logger.warn(
        { recorded, stillOwed: owed.length, journal: path, replicaId },
        "recorded the charges another replica owed when it stopped",
      );
    } catch (error) {
      logger.error(
        { err: error, journal: path, replicaId },
        "could not record a gone replica's journal; a later start tries again",
      );
    } finally {
      await claim?.close();
    }
  }
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
    mkdirSync(folder, { recursive: true });
    accessSync(folder, constants.W_OK);
    return undefined;
  } catch (error) {
    return error instanceof Error ? error : new Error(String(error));
  }
}
