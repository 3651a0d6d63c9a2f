import { appendFileSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import type { Store, UsageRecord } from "../store/store.ts";

/**
 * A journal's files are readable by their owner only, as the database is (account and key ids,
 * costs): the mode a file is created with. Regression: they were made 0644.
 */
const PRIVATE = { mode: 0o600 } as const;

/**
 * The charges a server owes the store while the store does not take them, kept in a file beside
 * a SQLite database (`<file>.pending-charges.jsonl`) so that a process that dies meanwhile
 * (killed, out of memory, a crash) does not lose them: the next start records them (see
 * {@link recordOwedCharges}). Without it such a charge lived only in the settle's background
 * retry, in memory: a request answered 200 while another process held the file's write lock (a
 * VACUUM, an open `sqlite3` session), followed by a kill, was never charged.
 *
 * Each line is one JSON object: `{"owed": usage}` when a charge starts waiting, `{"paid": id}`
 * when it went through; the file exists only while a charge is owed. A line is appended with one
 * synchronous write before the client hears its answer is complete; the page cache keeps it
 * through a process kill (not through a power loss, as for the WAL under `synchronous = NORMAL`).
 * Each write begins with a line break: a write cut short (a full disk) leaves a line of its own,
 * which reading skips, instead of swallowing the next record into it.
 * Settling is idempotent (a usage row is written once, by the reservation's id), so a charge
 * owed twice, or one the store took just before the process died, is recorded once.
 */
export class ChargeJournal {
  readonly path: string;
  /** The ids of the charges owed now, by this process. */
  readonly #owed = new Set<string>();
  /** The lines the last {@link readOwed} could not read, as they are in the file. */
  unreadable: string[] = [];

  constructor(path: string) {
    this.path = path;
  }

  /**
   * The charges the file holds as owed (a previous run's, when it is read at start). A line
   * that does not parse (the end of a write cut by a power loss, a line edited by hand) is
   * skipped, and kept in {@link unreadable}.
   */
  readOwed(): UsageRecord[] {
    let text: string;
    try {
      text = readFileSync(this.path, "utf8");
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return [];
      // Not skipped: a start that went on would forget the charges it holds.
      throw new Error(
        `Could not read ${this.path}, the charges a previous run owed (${(error as Error).message}). Make it a readable file (or move it away, and record its charges by hand), then start again.`,
        { cause: error },
      );
    }
    const owed = new Map<string, UsageRecord>();
    this.unreadable = [];
    for (const line of text.split("\n")) {
      if (line.trim() === "") continue;
      const entry = parseLine(line);
      if (entry === undefined) {
        this.unreadable.push(line);
        continue;
      }
      if ("owed" in entry) owed.set(entry.owed.id, entry.owed);
      else owed.delete(entry.paid);
    }
    return [...owed.values()];
  }

  /** Notes a charge the store did not take. Throws when the file cannot be written. */
  owe(usage: UsageRecord): void {
    appendFileSync(this.path, `\n${JSON.stringify({ owed: toJsonUsage(usage) })}\n`, PRIVATE);
    this.#owed.add(usage.id);
  }

  /** Notes that a charge went through; the file goes once none is owed. */
  paid(id: string): void {
    if (!this.#owed.delete(id)) return;
    if (this.#owed.size === 0) rmSync(this.path, { force: true });
    else appendFileSync(this.path, `\n${JSON.stringify({ paid: id })}\n`, PRIVATE);
  }

  /**
   * Starts the file over with `usages` as the charges owed (a previous run's that the store did
   * not take at this start: this process now owes them). Throws when the file cannot be written.
   */
  startOver(usages: readonly UsageRecord[]): void {
    if (usages.length === 0) rmSync(this.path, { force: true });
    else {
      // Whole or not at all: a process killed while writing leaves the previous file.
      const next = `${this.path}.next`;
      writeFileSync(
        next,
        usages.map((usage) => `${JSON.stringify({ owed: toJsonUsage(usage) })}\n`).join(""),
        PRIVATE,
      );
      renameSync(next, this.path);
    }
    this.#owed.clear();
    for (const usage of usages) this.#owed.add(usage.id);
  }
}

/**
 * Records the charges a previous run left owed in `journal`, each tried once (stamped `now`, as
 * a retried settle is); answers how many went through, those the store could not take now,
 * which stay owed (see {@link ChargeJournal.startOver}), and those it refused. Run before the start releases the
 * reservations left open: a charge whose reservation row is still there then gives its money
 * back as it is charged, instead of being charged against what the account has left.
 */
export async function recordOwedCharges(options: {
  store: Pick<Store, "settle">;
  journal: ChargeJournal;
  now: Date;
  /** Whether a settle failed for want of the store (kept owed) rather than for good. */
  isUnavailable: (error: unknown) => boolean;
  /**
   * Told of the charges the store refused, before they leave the journal: it must have them
   * written down (logged and flushed) by the time it resolves.
   */
  onRefused?: (refused: readonly { usage: UsageRecord; error: unknown }[]) => Promise<void>;
  /** Told of each charge recorded: its model and what the store charged (the metrics count it). */
  onRecorded?: (model: string, chargedNano: bigint) => void;
}): Promise<{
  recorded: number;
  owed: UsageRecord[];
  refused: { usage: UsageRecord; error: unknown }[];
  /** Lines that could not be read, kept aside before the journal started over (see {@link keepUnreadable}). */
  unreadable: { lines: number; path: string } | undefined;
}> {
  const { store, journal, now, isUnavailable } = options;
  const owed: UsageRecord[] = [];
  const refused: { usage: UsageRecord; error: unknown }[] = [];
  let recorded = 0;
  const usages = journal.readOwed();
  const unreadable = keepUnreadable(journal);
  for (const usage of usages) {
    try {
      const chargedNano = await store.settle({ ...usage, createdAt: now });
      recorded++;
      options.onRecorded?.(usage.model, chargedNano);
    } catch (error) {
      // A store that cannot be written now takes it later. One that refuses it (its account is
      // not in this database: a restore of an older backup) would refuse it at every start: it
      // leaves the journal, for the caller to log with everything needed to record it by hand.
      if (isUnavailable(error)) owed.push(usage);
      else refused.push({ usage, error });
    }
  }
  if (refused.length > 0) await options.onRefused?.(refused);
  journal.startOver(owed);
  return { recorded, owed, refused, unreadable };
}

/**
 * Appends the lines of `journal` its reading skipped to `<journal>.unreadable`, before the journal
 * starts over without them: a charge a later version wrote, or a line edited by hand, left the
 * file silently (its charge lost with no trace). Usually they are the end of a write a power loss
 * cut short, which holds nothing. Throws when they cannot be kept: the journal is then left as is.
 */
function keepUnreadable(journal: ChargeJournal): { lines: number; path: string } | undefined {
  const lines = journal.unreadable;
  if (lines.length === 0) return undefined;
  const path = `${journal.path}.unreadable`;
  try {
    appendFileSync(path, lines.map((line) => `${line}\n`).join(""), PRIVATE);
  } catch (error) {
    throw new Error(
      `Could not keep the ${lines.length === 1 ? "line" : `${lines.length} lines`} of ${journal.path} that cannot be read aside in ${path} (${(error as Error).message}); the journal is left as it was. Make ${path} a file that can be written (or move it away), then start again.`,
      { cause: error },
    );
  }
  return { lines: lines.length, path };
}

/** The warning for lines of a charge journal that could not be read (see {@link keepUnreadable}). */
export const UNREADABLE_JOURNAL_LINES =
  "lines of the charge journal could not be read (a write cut short by a power loss or a full disk, or the file edited): kept aside in the file named; record by hand any charge they hold";

/** A usage record as JSON: the cost as a decimal string, the time as ISO 8601. */
function toJsonUsage(usage: UsageRecord): Record<string, unknown> {
  return { ...usage, costNano: String(usage.costNano), createdAt: usage.createdAt.toISOString() };
}

function parseLine(line: string): { owed: UsageRecord } | { paid: string } | undefined {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return undefined;
  }
  if (typeof value !== "object" || value === null) return undefined;
  const entry = value as { owed?: unknown; paid?: unknown };
  if (typeof entry.paid === "string") return { paid: entry.paid };
  const usage = readUsage(entry.owed);
  return usage === undefined ? undefined : { owed: usage };
}

function readUsage(value: unknown): UsageRecord | undefined {
  if (typeof value !== "object" || value === null) return undefined;
  const row = value as Record<string, unknown>;
  const text = (name: string) => (typeof row[name] === "string" ? (row[name] as string) : undefined);
  const count = (name: string) => (typeof row[name] === "number" ? (row[name] as number) : undefined);
  const id = text("id");
  const requestId = text("requestId");
  const accountId = text("accountId");
  const keyPublicId = text("keyPublicId");
  const model = text("model");
  const promptTokens = count("promptTokens");
  const completionTokens = count("completionTokens");
  const totalMs = count("totalMs");
  const cost = text("costNano");
  const createdAt = new Date(text("createdAt") ?? Number.NaN);
  if (
    id === undefined ||
    requestId === undefined ||
    accountId === undefined ||
    keyPublicId === undefined ||
    model === undefined ||
    promptTokens === undefined ||
    completionTokens === undefined ||
    totalMs === undefined ||
    cost === undefined ||
    !/^\d+$/.test(cost) ||
    Number.isNaN(createdAt.getTime())
  ) {
    return undefined;
  }
  return {
    id,
    requestId,
    accountId,
    keyPublicId,
    model,
    promptTokens,
    completionTokens,
    costNano: BigInt(cost),
    finishReason: text("finishReason"),
    errorCode: text("errorCode"),
    user: text("user"),
    queueMs: count("queueMs"),
    firstTokenMs: count("firstTokenMs"),
    totalMs,
    estimated: row.estimated === true,
    createdAt,
  };
}
