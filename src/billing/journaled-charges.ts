import type { UsageRecord } from "../store/store.ts";
import type { ChargeJournal } from "./charge-journal.ts";

/**
 * Which of a `BillingAdmission`'s charges are in its charge journal (see charge-journal.ts), so
 * that a charge is written there once however many paths owe it (a shutdown, a failed settle),
 * and a settle that goes through takes it out again. Without a journal nothing is kept: the
 * charge waits in memory only.
 */
export class JournaledCharges {
  readonly #journal: ChargeJournal | undefined;
  readonly #onJournalError: (error: unknown, usage: UsageRecord) => void;
  /** Ids of the charges written to the journal and not yet taken by the store. */
  readonly #journaled = new Set<string>();

  constructor(
    journal: ChargeJournal | undefined,
    onJournalError: (error: unknown, usage: UsageRecord) => void,
  ) {
    this.#journal = journal;
    this.#onJournalError = onJournalError;
  }

  /** Whether the charge is in the journal: the next start records it. */
  has(id: string): boolean {
    return this.#journaled.has(id);
  }

  /** Notes a charge the journal holds already (a previous run's, see `recordOwedCharges`). */
  noteOwed(id: string): void {
    this.#journaled.add(id);
  }

  /** Keeps a charge the store did not take in the journal, when there is one. */
  owe(usage: UsageRecord): void {
    if (this.#journal === undefined || this.#journaled.has(usage.id)) return;
    try {
      this.#journal.owe(usage);
      this.#journaled.add(usage.id);
    } catch (error) {
      this.#onJournalError(error, usage);
    }
  }

  /** The store took a charge: it is owed no more. */
  paid(id: string): void {
    if (!this.#journaled.delete(id)) return;
    try {
      this.#journal?.paid(id);
    } catch {
      // The line that says so is lost: the next start settles the charge again, which the
      // store answers with the charge already recorded (a usage row is written once).
    }
  }
}
