/**
 * Regression: a request answered 200 while another process held the SQLite file's write lock has
 * its charge retried in the background; a server killed meanwhile (kill -9, out of memory) lost
 * it, and the request was never charged (found by killing servers under load). The charge is now
 * kept in `<file>.pending-charges.jsonl` before the answer completes, and the next start records it.
 */
import { once } from "node:events";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ChargeJournal } from "../../src/billing/charge-journal.ts";
import { startServer } from "../../src/server.ts";
import { openStore } from "../../src/store/open-store.ts";
import { type MockUpstream, startMockUpstream, streamText } from "../engine/openai/mock-upstream.ts";
import { makeUsage } from "../store/store-fixtures.ts";
import { collectLogLines } from "../support/collect-log-lines.ts";
import { findFreePort } from "../support/free-port.ts";
import { killServeProcesses, startServeProcess, writeServeConfig } from "../support/serve-process.ts";
import { createTestConfig } from "../support/test-server.ts";

let folder: string;
let configFile: string;
let port: number;
let upstream: MockUpstream;

beforeAll(async () => {
  folder = mkdtempSync(join(tmpdir(), "tollgate-owed-charge-"));
  port = await findFreePort();
  upstream = await startMockUpstream(streamText(["Hello", " there"], { usage: [10, 4] }));
  configFile = writeServeConfig(folder, { port, upstreamBaseUrl: upstream.baseUrl });
});

afterAll(async () => {
  killServeProcesses();
  await upstream?.close();
  rmSync(folder, { recursive: true, force: true });
});

describe("a server killed while it owes a charge the store did not take", () => {
  it("keeps the charge beside the file, and the next start records it", async () => {
    const first = await startServeProcess(configFile, { cwd: folder });
    const key = /starter key: (sk-tg-\S+)/.exec(first.output())?.[1];
    expect(key).toBeDefined();
    const file = join(folder, "tollgate.db");
    const journal = `${file}.pending-charges.jsonl`;

    // Another process's write lock, as `sqlite3 tollgate.db` with `BEGIN IMMEDIATE` would hold.
    const other = new DatabaseSync(file);
    other.exec("begin immediate");
    let locked = true;
    try {
      const response = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${key}`,
          "content-type": "application/json",
          "x-request-id": "owed-then-killed",
        },
        body: JSON.stringify({ model: "upstream-chat", messages: [{ role: "user", content: "Hi" }] }),
      });
      expect(response.status).toBe(200);
      expect(((await response.json()) as { usage: { total_tokens: number } }).usage.total_tokens).toBe(14);
      expect(existsSync(journal)).toBe(true);

      const exited = once(first.child, "exit");
      first.child.kill("SIGKILL");
      await exited;
      other.exec("rollback");
      other.close();
      locked = false;
    } finally {
      if (locked) {
        other.exec("rollback");
        other.close();
      }
    }

    const second = await startServeProcess(configFile, { cwd: folder });
    expect(second.output()).toContain('"msg":"recorded the charges the previous run owed"');
    const store = await openStore(`sqlite:${file}`);
    try {
      const rows = (await store.listUsage()).filter((row) => row.requestId === "owed-then-killed");
      expect(rows).toHaveLength(1);
      // 10 prompt tokens at 1 and 4 completion tokens at 2 per million.
      expect(rows[0]?.costNano).toBe(18_000n);
      expect(rows[0]?.promptTokens).toBe(10);
      expect(existsSync(journal)).toBe(false);
      expect(await store.audit()).toEqual([]);
      // Counted in the metrics as the ledger sums it (regression: no tollgate_cost_total at all,
      // the killed run having never counted it either).
      const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      expect(metrics).toContain('tollgate_cost_total{model="upstream-chat"} 0.000018\n');
    } finally {
      await store.close();
      const exited = once(second.child, "exit");
      second.child.kill("SIGTERM");
      await exited;
    }
  });
});

describe("a charge the previous run owed that the store refuses", () => {
  it("is logged with its usage to be recorded by hand, and leaves the journal (no retry at every start)", async () => {
    const file = join(folder, "refused.db");
    const journalPath = `${file}.pending-charges.jsonl`;
    // Owed for an account this database does not have (a restore of an older backup).
    new ChargeJournal(journalPath).owe(
      makeUsage({
        id: "reservation-of-another-database",
        requestId: "owed-elsewhere",
        accountId: "no-such-account",
        keyPublicId: "no-such-key",
        model: "upstream-chat",
        completionTokens: 4,
        costNano: 18_000n,
        createdAt: new Date(),
      }),
    );
    const lines: { level: number; msg: string; reqId?: string; usage?: { costNano: string } }[] = [];
    const { destination } = collectLogLines(lines);
    const server = await startServer({
      config: createTestConfig({ database: `sqlite:${file}`, models: [] }),
      logger: { destination },
    });
    try {
      const refused = lines.find((line) => line.reqId === "owed-elsewhere");
      expect(refused?.level).toBe(50);
      expect(refused?.msg).toMatch(/^the store refused a charge the previous run owed/);
      expect(refused?.usage?.costNano).toBe("18000");
      expect(existsSync(journalPath)).toBe(false);
    } finally {
      await server.close();
    }
  });
});
