import type { Logger } from "pino";
import { chargeJournalPath } from "../store/open-store.ts";
import { isSqliteUnavailable } from "../store/sqlite/explain-sqlite-error.ts";
import type { Store, UsageRecord } from "../store/store.ts";
import { ChargeJournal, recordOwedCharges } from "./charge-journal.ts";

/** A server's journal of owed charges, and what a previous run left in it that is still owed. */
export interface OpenedChargeJournal {
  /** `undefined` where the store keeps none (PostgreSQL, an in-memory SQLite store). */
  journal: ChargeJournal | undefined;
  path: string | undefined;
  /** The previous run's charges the store could not take at this start (retried with the rest). */
  stillOwed: UsageRecord[];
}

/**
 * Opens the journal of charges owed beside the server's SQLite file (charge-journal.ts) and
 * records the charges a previous run left in it, before the start releases leftover reservations
 * (a reservation row of theirs then gives its money back as they are charged). A charge the store
 * refuses for good is logged with its usage (to be recorded by hand) and flushed before it leaves
 * the journal; one it cannot take now stays owed.
 */
export async function openChargeJournal(options: {
  databaseUrl: string;
  store: Pick<Store, "settle">;
  logger: Logger;
}): Promise<OpenedChargeJournal> {
  const { logger } = options;
  const path = chargeJournalPath(options.databaseUrl);
  if (path === undefined) return { journal: undefined, path, stillOwed: [] };
  const journal = new ChargeJournal(path);
  const { recorded, owed } = await recordOwedCharges({
    store: options.store,
    journal,
    now: new Date(),
    isUnavailable: isSqliteUnavailable,
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
  if (recorded + owed.length > 0) {
    logger.warn(
      { recorded, stillOwed: owed.length, journal: path },
      "recorded the charges the previous run owed",
    );
  }
  return { journal, path, stillOwed: owed };
}
