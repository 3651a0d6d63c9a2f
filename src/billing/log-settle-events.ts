import type { Logger } from "pino";
import { STORE_OUTAGE_LOG_INTERVAL_MS } from "../api/build-app.ts";
import { throttleLog } from "../api/throttle-log.ts";
import type { BillingAdmissionOptions } from "./billing-admission-options.ts";
import { formatAmount } from "./money.ts";

/** The admission's reports on settling, logged; and the charges a shutdown had to leave. */
export interface SettleEventLog
  extends Required<Pick<BillingAdmissionOptions, "onJournalError" | "onSettleError" | "onSettleRecovered">> {
  /** Charges given up at shutdown and lost (logged with their usage, to be recorded by hand). */
  readonly unrecordedCharges: number;
  /** Charges given up at shutdown and kept in the journal for the next start. */
  readonly keptCharges: number;
  /** Why the shutdown failed for want of charges recorded; `undefined` when none was given up. */
  describeShutdownFailure(): string | undefined;
}

/**
 * The server's lines for what happens to charges the store does not take at once: a store outage
 * fails every running request's settle, so the retries get one line for the run, then one every
 * 10 s (each request still gets its line when its charge goes through, or when it is given up).
 * `addCharge` counts a charge that went through late in the metrics. Each line names its request
 * as the request's own lines do (`reqId`).
 */
export function createSettleEventLog(options: {
  logger: Logger;
  journalPath: string | undefined;
  addCharge: (model: string, chargedNano: bigint) => void;
}): SettleEventLog {
  const { logger, journalPath } = options;
  const logSettleRetry = throttleLog(STORE_OUTAGE_LOG_INTERVAL_MS);
  const counts = { unrecordedCharges: 0, keptCharges: 0 };
  return {
    get unrecordedCharges() {
      return counts.unrecordedCharges;
    },
    get keptCharges() {
      return counts.keptCharges;
    },
    describeShutdownFailure() {
      const { unrecordedCharges, keptCharges } = counts;
      const charges = (count: number) => `${count} ${count === 1 ? "charge" : "charges"}`;
      if (unrecordedCharges > 0) {
        return `${unrecordedCharges === 1 ? "1 charge was" : `${unrecordedCharges} charges were`} not recorded: the store did not take ${unrecordedCharges === 1 ? "it" : "them"} before the shutdown (each logged with its usage as "its charge was not recorded").${keptCharges > 0 ? ` ${charges(keptCharges)} more are kept in ${journalPath} for the next start.` : ""}`;
      }
      if (keptCharges > 0) {
        return `${charges(keptCharges)} could not be recorded before the shutdown: the store did not take ${keptCharges === 1 ? "it" : "them"}. Kept in ${journalPath}: the next start records ${keptCharges === 1 ? "it" : "them"}.`;
      }
      return undefined;
    },
    // A full disk: the charge is lost should the process end before the store takes it (a
    // review's kill -9 after filling the journal's disk lost 8 of 173 answered requests' charges,
    // and `audit` passed), so the line holds everything needed to record it by hand.
    onJournalError: (error, usage) =>
      logger.error(
        {
          err: error,
          reqId: usage.requestId,
          journal: journalPath,
          usage: { ...usage, costNano: String(usage.costNano) },
        },
        "could not keep a charge the store did not take in the journal: it waits in memory only (lost if the process ends before the store takes it; record it by hand from this line's usage then)",
      ),
    onSettleError: (error, requestId, { retrying, usage, journaled }) => {
      if (retrying) {
        logSettleRetry((skipped) =>
          logger.warn(
            { err: error, reqId: requestId, ...(skipped > 0 ? { failedSinceLastLine: skipped } : {}) },
            "settling a request failed; retrying in the background",
          ),
        );
        return;
      }
      // Given up at shutdown: kept in the journal for the next start, or else everything needed
      // to record the charge by hand.
      if (journaled) counts.keptCharges++;
      else counts.unrecordedCharges++;
      logger.error(
        { err: error, reqId: requestId, usage: { ...usage, costNano: String(usage.costNano) } },
        journaled
          ? "settling a request failed; its charge is kept in the journal, and the next start records it"
          : "settling a request failed; its charge was not recorded",
      );
    },
    onSettleRecovered: (requestId, attempts, { model, chargedNano }) => {
      // The request was logged and measured without its charge: both get it now.
      options.addCharge(model, chargedNano);
      logger.warn(
        { reqId: requestId, attempts, model, cost: formatAmount(chargedNano) },
        "settled a request after the store came back",
      );
    },
  };
}
