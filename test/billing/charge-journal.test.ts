import { appendFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { afterAll, describe, expect, it } from "vitest";
import { ChargeJournal, recordOwedCharges } from "../../src/billing/charge-journal.ts";
import { openChargeJournal } from "../../src/billing/open-charge-journal.ts";
import type { UsageRecord } from "../../src/store/store.ts";

const folder = mkdtempSync(join(tmpdir(), "tollgate-charge-journal-"));
afterAll(() => rmSync(folder, { recursive: true, force: true }));

let files = 0;
const newPath = () => join(folder, `journal-${++files}.jsonl`);

function usage(id: string, overrides: Partial<UsageRecord> = {}): UsageRecord {
  return {
    id,
    requestId: `request-${id}`,
    accountId: "account-1",
    keyPublicId: "key-1",
    model: "org/model:7b",
    promptTokens: 12,
    completionTokens: 34,
    // Beyond a double's exact integers: the cost must come back to the nano-unit.
    costNano: 9_007_199_254_740_993n,
    finishReason: "stop",
    errorCode: undefined,
    user: "user \u00e9 \n",
    queueMs: 3,
    firstTokenMs: undefined,
    totalMs: 45,
    estimated: true,
    createdAt: new Date("2026-11-27T12:00:00.123Z"),
    ...overrides,
  };
}

describe("the charge journal", () => {
  it("gives back every field of the charges still owed, exactly", () => {
    const path = newPath();
    const journal = new ChargeJournal(path);
    const failed = usage("b", {
      finishReason: undefined,
      errorCode: "upstream_unavailable",
      user: undefined,
    });
    journal.owe(usage("a"));
    journal.owe(failed);
    journal.owe(usage("c"));
    journal.paid("a");

    // As a new process reads it at start.
    expect(new ChargeJournal(path).readOwed()).toEqual([failed, usage("c")]);
  });

  it("exists only while something is owed", () => {
    const path = newPath();
    const journal = new ChargeJournal(path);
    expect(new ChargeJournal(path).readOwed()).toEqual([]);
    journal.owe(usage("a"));
    journal.owe(usage("b"));
    journal.paid("b");
    expect(existsSync(path)).toBe(true);
    journal.paid("a");
    expect(existsSync(path)).toBe(false);
    // A charge it never held changes nothing.
    journal.paid("a");
    expect(existsSync(path)).toBe(false);
  });

  // Regression: made 0644 (account and key ids, costs) beside a database made 0600.
  it("is readable by its owner only, started over too", () => {
    const previous = process.umask(0o022);
    try {
      const path = newPath();
      const journal = new ChargeJournal(path);
      journal.owe(usage("a"));
      expect(statSync(path).mode & 0o777).toBe(0o600);
      const other = newPath();
      new ChargeJournal(other).startOver([usage("b")]);
      expect(statSync(other).mode & 0o777).toBe(0o600);
    } finally {
      process.umask(previous);
    }
  });

  it("skips a line cut short, and lines that are not charges", () => {
    const path = newPath();
    new ChargeJournal(path).owe(usage("a"));
    const line = readFileSync(path, "utf8");
    appendFileSync(path, `${line.slice(0, line.length / 2)}\n{"owed":{"id":"x"}}\n[1]\n\n`);
    appendFileSync(path, line.replace('"costNano":"9007199254740993"', '"costNano":"1.5"'));
    expect(new ChargeJournal(path).readOwed()).toEqual([usage("a")]);
  });

  it("keeps the next charge whole after a write cut short (a full disk)", () => {
    const path = newPath();
    const journal = new ChargeJournal(path);
    journal.owe(usage("a"));
    // What a write that ran out of space leaves: the start of a line, and no line break.
    appendFileSync(path, `\n{"owed":{"id":"cut","requestId":"request-cut","acc`);
    journal.owe(usage("c"));
    expect(new ChargeJournal(path).readOwed()).toEqual([usage("a"), usage("c")]);
  });

  it("refuses to read a journal it cannot read, naming it, rather than forget its charges", () => {
    const path = newPath();
    mkdirSync(path);
    expect(() => new ChargeJournal(path).readOwed()).toThrow(
      new RegExp(`^Could not read ${path}, the charges a previous run owed \\(EISDIR`),
    );
  });

  it("records what a previous run owed at start, keeps what the store cannot take now, and lets go of what it refuses", async () => {
    const path = newPath();
    const previous = new ChargeJournal(path);
    previous.owe(usage("a"));
    previous.owe(usage("b"));
    previous.owe(usage("gone"));
    const settled: UsageRecord[] = [];
    const now = new Date("2026-11-28T00:00:00Z");
    const unavailable = new Error("database is locked");
    const refusal = new Error("FOREIGN KEY constraint failed");
    const store = {
      async settle(record: UsageRecord): Promise<bigint> {
        if (record.id === "b") throw unavailable;
        if (record.id === "gone") throw refusal;
        settled.push(record);
        return record.costNano;
      },
    };

    const next = new ChargeJournal(path);
    const counted: [string, bigint][] = [];
    const result = await recordOwedCharges({
      store,
      journal: next,
      now,
      isUnavailable: (error) => error === unavailable,
      onRecorded: (model, chargedNano) => counted.push([model, chargedNano]),
    });

    expect(result).toEqual({
      recorded: 1,
      owed: [usage("b")],
      refused: [{ usage: usage("gone"), error: refusal }],
    });
    // Stamped with the time it is written, as a retried settle is.
    expect(settled).toEqual([{ ...usage("a"), createdAt: now }]);
    // What the store charged, for the metrics: only the charge it took.
    expect(counted).toEqual([[usage("a").model, usage("a").costNano]]);
    expect(new ChargeJournal(path).readOwed()).toEqual([usage("b")]);
    next.paid("b");
    expect(existsSync(path)).toBe(false);
  });

  // Regression: they left the journal as it started over, with no trace (a charge lost silently).
  it("keeps the lines it could not read aside, and a start says so, before the journal starts over", async () => {
    const database = join(folder, `aside-${++files}.db`);
    const path = `${database}.pending-charges.jsonl`;
    new ChargeJournal(path).owe(usage("a"));
    const { totalMs: _, ...withoutTime } = JSON.parse(
      JSON.stringify({ ...usage("b"), costNano: "5", createdAt: "2026-11-27T12:00:00.123Z" }),
    ) as Record<string, unknown>;
    const unreadable = [JSON.stringify({ owed: withoutTime }), '{"owed":{"id":"cut","requestI'];
    appendFileSync(path, `${unreadable.join("\n")}\n\n`);
    const settled: string[] = [];
    const lines: { level: number; msg: string; lines?: number; keptIn?: string }[] = [];
    const logger = pino(
      { level: "info" },
      { write: (line: string) => void lines.push(JSON.parse(line) as (typeof lines)[number]) },
    );
    const opened = await openChargeJournal({
      databaseUrl: `sqlite:${database}`,
      store: {
        async settle(record: UsageRecord) {
          settled.push(record.id);
          return record.costNano;
        },
      },
      logger,
    });
    expect(opened.stillOwed).toEqual([]);
    expect(settled).toEqual(["a"]);
    expect(existsSync(path)).toBe(false);
    expect(readFileSync(`${path}.unreadable`, "utf8")).toBe(`${unreadable.join("\n")}\n`);
    const warning = lines.find((line) => line.keptIn !== undefined);
    expect(warning).toMatchObject({ level: 40, lines: 2, keptIn: `${path}.unreadable` });
    expect(warning?.msg).toMatch(/could not be read .*record by hand any charge they hold/);
  });

  it("leaves the journal as it was, and says what to do, where the unreadable lines cannot be kept aside", async () => {
    const path = newPath();
    new ChargeJournal(path).owe(usage("a"));
    appendFileSync(path, "garbage\n");
    const before = readFileSync(path, "utf8");
    mkdirSync(`${path}.unreadable`);
    const settled: string[] = [];
    const recording = recordOwedCharges({
      store: {
        async settle(record: UsageRecord) {
          settled.push(record.id);
          return record.costNano;
        },
      },
      journal: new ChargeJournal(path),
      now: new Date(),
      isUnavailable: () => false,
    });
    await expect(recording).rejects.toThrow(
      `Could not keep the line of ${path} that cannot be read aside in ${path}.unreadable (EISDIR`,
    );
    expect(settled).toEqual([]);
    expect(readFileSync(path, "utf8")).toBe(before);
  });

  it("lets the caller write a refused charge down before it leaves the journal", async () => {
    const path = newPath();
    new ChargeJournal(path).owe(usage("gone"));
    const seen: UsageRecord[][] = [];
    await recordOwedCharges({
      store: {
        async settle(): Promise<bigint> {
          throw new Error("FOREIGN KEY constraint failed");
        },
      },
      journal: new ChargeJournal(path),
      now: new Date(),
      isUnavailable: () => false,
      onRefused: async (refused) => {
        // Still in the file while the caller logs it: a kill now loses nothing.
        seen.push(new ChargeJournal(path).readOwed());
        expect(refused.map((entry) => entry.usage)).toEqual([usage("gone")]);
      },
    });
    expect(seen).toEqual([[usage("gone")]]);
    expect(existsSync(path)).toBe(false);
  });
});

/** A PostgreSQL replica's journal opened for `replica`, and the lines its start logged. */
async function openLogged(replica: { id: string; folder: string }) {
  const lines: { level: number; msg: string; chargeJournalDir?: string; err?: { message: string } }[] = [];
  const logger = pino(
    { level: "info" },
    { write: (line: string) => void lines.push(JSON.parse(line) as (typeof lines)[number]) },
  );
  const opened = await openChargeJournal({
    databaseUrl: "postgres://tollgate@db.internal/tollgate",
    store: { settle: async () => 0n },
    logger,
    replica: { ...replica, storeTag: "0123456789ab" },
  });
  return { opened, lines };
}

describe("a PostgreSQL replica's journal", () => {
  it("is named by the replica id and the store's tag in charge_journal_dir, which is made where it is missing", async () => {
    const journalFolder = join(folder, "made", "here");
    const opened = await openChargeJournal({
      databaseUrl: "postgres://tollgate@db.internal/tollgate",
      store: { settle: async () => 0n },
      logger: pino({ level: "silent" }),
      replica: { id: "tollgate-1:8080/a b", storeTag: "0123456789ab", folder: journalFolder },
    });
    expect(opened.path).toBe(
      join(journalFolder, "pending-charges-tollgate-1%3A8080%2Fa%20b.0123456789ab.jsonl"),
    );
    expect(opened.journal).toBeDefined();
    expect(existsSync(journalFolder)).toBe(true);
  });

  it("is none, with a warning that says what is lost, where the folder cannot be made", async () => {
    const blocker = join(folder, "a-file");
    appendFileSync(blocker, "");
    const { opened, lines } = await openLogged({ id: "tollgate-1", folder: join(blocker, "owed") });
    expect(opened).toEqual({ journal: undefined, path: undefined, stillOwed: [] });
    expect(lines).toHaveLength(1);
    expect(lines[0]?.level).toBe(40);
    expect(lines[0]?.chargeJournalDir).toBe(join(blocker, "owed"));
    expect(lines[0]?.msg).toMatch(/retried in memory only, and lost if this process dies/);
  });

  it("is none, with a warning that names the cause, where the replica id is too long for a file name", async () => {
    const { opened, lines } = await openLogged({ id: "r".repeat(300), folder: join(folder, "long-ids") });
    expect(opened.journal).toBeUndefined();
    expect(lines[0]?.err?.message).toMatch(/replica id is too long .*set a shorter TOLLGATE_REPLICA_ID/);
  });
});
