/**
 * Regression: while another process held a write lock on the server's SQLite file (an open
 * sqlite3 session, a VACUUM, a CLI command), the whole server froze: each settle waited for the
 * lock on the event loop's thread, `/health` took 10 s and requests waited for the lock instead
 * of getting 503 `store_unavailable`. Now the server answers at once, refuses new requests with
 * 503 and `retry-after` while it cannot record charges, and charges what it served once, after.
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { formatAmount } from "../../src/billing/money.ts";
import { type RunningServer, startServer } from "../../src/server.ts";
import { ChargesNotRecordedError } from "../../src/server-drain.ts";
import { openStore } from "../../src/store/open-store.ts";
import type { Store } from "../../src/store/store.ts";
import { type MockUpstream, startMockUpstream, streamText } from "../engine/openai/mock-upstream.ts";
import { createTestConfig, createUpstreamModelEntry } from "../support/test-server.ts";

const MODEL = "upstream-chat";

let folder: string;
let file: string;
let upstream: MockUpstream;
let server: RunningServer;
let store: Store;
let key: string;
let origin: string;

beforeAll(async () => {
  folder = mkdtempSync(join(tmpdir(), "tollgate-sqlite-lock-"));
  file = join(folder, "tollgate.db");
  upstream = await startMockUpstream(streamText(["Hello", " there"], { usage: [10, 4] }));
  const config = createTestConfig({
    database: `sqlite:${file}`,
    models: [createUpstreamModelEntry(MODEL, upstream.baseUrl)],
  });
  server = await startServer({ config, logger: false });
  key = server.createdKeys.starterKey as string;
  origin = server.baseUrl.replace(/\/v1$/, "");
  store = await openStore(config.database);
});

afterAll(async () => {
  // The last test's first server's shutdown failed on purpose; its second one is open.
  await server?.close().catch(() => {});
  await store?.close();
  await upstream?.close();
  rmSync(folder, { recursive: true, force: true });
});

async function chat(): Promise<Response> {
  return await fetch(`${server.baseUrl}/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "Hi" }], max_tokens: 16 }),
  });
}

/** Polls `/health` until `done` settles; the slowest answer in milliseconds. */
async function slowestHealthUntil(done: Promise<unknown>): Promise<number> {
  let finished = false;
  void done.finally(() => {
    finished = true;
  });
  let slowest = 0;
  while (!finished) {
    const started = performance.now();
    const response = await fetch(`${origin}/health`);
    expect(response.status).toBe(200);
    await response.text();
    slowest = Math.max(slowest, performance.now() - started);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return slowest;
}

describe("a SQLite server whose file another process has locked", () => {
  it("stays responsive, answers 503 store_unavailable while it cannot record charges, and charges once after", async () => {
    expect((await chat()).status).toBe(200);

    // Another process's write lock, as `sqlite3 tollgate.db` with `BEGIN IMMEDIATE` would hold.
    const other = new DatabaseSync(file);
    other.exec("begin immediate");
    let unlocked = false;
    const unlock = () => {
      if (unlocked) return;
      unlocked = true;
      other.exec("rollback");
      other.close();
    };
    try {
      // Served: its reservation is held in memory; its charge waits for the file.
      const served = chat();
      const slowest = await slowestHealthUntil(served);
      expect((await served).status).toBe(200);
      // Generous: it took 10 s.
      expect(slowest).toBeLessThan(2_000);

      const refused = await chat();
      expect(refused.status).toBe(503);
      expect(refused.headers.get("retry-after")).toBe("5");
      expect(((await refused.json()) as { error: { code: string } }).error.code).toBe("store_unavailable");
    } finally {
      unlock();
    }

    expect((await chat()).status).toBe(200);
    // The served request's charge goes through in the background: three requests charged, once.
    await expect
      .poll(async () => (await store.listUsage()).length, { timeout: 10_000, interval: 100 })
      .toBe(3);
    expect(await store.audit()).toEqual([]);
    const usage = await store.listUsage();
    const spent = usage.reduce((total, row) => total + row.costNano, 0n);
    expect(spent).toBeGreaterThan(0n);
    // Charged late, after the request's metrics were taken: /metrics holds the charge all the same.
    const metrics = await (await fetch(`${origin}/metrics`)).text();
    expect(metrics).toContain(`tollgate_cost_total{model="${MODEL}"} ${formatAmount(spent)}\n`);
    const account = await store.getAccountByName("starter");
    expect(await store.getAccountMoney(account?.id as string)).toEqual({
      balanceNano: 10_000_000_000n - spent,
      reservedNano: 0n,
      spentNano: spent,
    });
  });

  it("fails its shutdown when a charge could not be recorded before it (regression: a clean stop, exit code 0), and the next start records it", async () => {
    const journal = `${file}.pending-charges.jsonl`;
    const other = new DatabaseSync(file);
    other.exec("begin immediate");
    let requestId: string | null;
    try {
      const served = await chat();
      expect(served.status).toBe(200);
      requestId = served.headers.get("x-request-id");
      // Owed before the answer was complete: kept beside the file, beyond this process.
      expect(existsSync(journal)).toBe(true);
      const stopping = await server.shutdown({ graceMs: 0 }).then(
        () => undefined,
        (error: unknown) => error,
      );
      // Said in full by its message: `serve` logs it without a stack, as no fault of the code.
      expect(stopping).toBeInstanceOf(ChargesNotRecordedError);
      expect((stopping as Error).message).toBe(
        `1 charge could not be recorded before the shutdown: the store did not take it. Kept in ${journal}: the next start records it.`,
      );
    } finally {
      other.exec("rollback");
      other.close();
    }

    const before = (await store.listUsage()).length;
    server = await startServer({
      config: createTestConfig({ database: `sqlite:${file}`, models: [] }),
      logger: false,
    });
    const rows = await store.listUsage();
    expect(rows).toHaveLength(before + 1);
    const recorded = rows.find((row) => row.requestId === requestId);
    expect(recorded?.costNano).toBeGreaterThan(0n);
    expect(existsSync(journal)).toBe(false);
    expect(await store.audit()).toEqual([]);
  });
});
