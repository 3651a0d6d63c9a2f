/**
 * A replica shut down while PostgreSQL hangs (its processes stopped, a partition): each settle
 * waited out the 30 s statement timeout, twice (the request's attempt, then the drain's last
 * try), and its charge reached the journal only once an attempt failed: the drain took about 75 s,
 * and a SIGKILL at compose's 30 s left no journal, so the next start released the reservations of
 * streams whose whole answer had been sent, never charged. Now the charges are in the journal
 * as soon as the drain begins, a hung store is waited for a few seconds, and a settle that
 * commits late is not charged twice when the journal is recorded.
 */
import { copyFileSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createAccount } from "../../src/admin/create-account.ts";
import { createKey } from "../../src/admin/create-key.ts";
import { ChargeJournal, recordOwedCharges } from "../../src/billing/charge-journal.ts";
import { startServer } from "../../src/server.ts";
import { isStoreUnavailable } from "../../src/store/is-store-unavailable.ts";
import { openStore } from "../../src/store/open-store.ts";
import type { Store } from "../../src/store/store.ts";
import { startTcpProxy, type TcpProxy } from "../cluster/tcp-proxy.ts";
import {
  type MockUpstream,
  startMockUpstream,
  textEvents,
  writeEvents,
} from "../engine/openai/mock-upstream.ts";
import { createPostgresTestSchema, type PostgresTestSchema } from "../store/postgres-test-database.ts";
import { createTestConfig, createUpstreamModelEntry } from "../support/test-server.ts";
import { until } from "../support/until.ts";

const postgres: PostgresTestSchema | { skipped: string } = await createPostgresTestSchema();
if ("skipped" in postgres) console.warn(`Skipping the drain with a hung database: ${postgres.skipped}.`);

/**
 * A settle attempt and the store's close are waited for this long in these drains (3 s and 2 s
 * in production): the same order of events, a fifth of the time.
 */
const DRAIN_STORE_WAITS = { settleMs: 1_000, storeCloseMs: 300 };

let folder: string;
let proxy: TcpProxy;
let upstream: MockUpstream;
const cleanups: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  if (!("url" in postgres)) return;
  folder = mkdtempSync(join(tmpdir(), "tollgate-drain-hung-"));
  const direct = new URL(postgres.url);
  proxy = await startTcpProxy({
    targetHost: direct.hostname,
    targetPort: Number(direct.port || 5432),
    mode: "forward",
  });
  upstream = await startMockUpstream();
});

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {});
});

afterAll(async () => {
  await upstream?.close();
  await proxy?.close();
  if ("url" in postgres) await postgres.drop();
  if (folder !== undefined) rmSync(folder, { recursive: true, force: true });
});

/**
 * A non-streamed request whose answer completes while the database hangs (its settle waits in
 * the proxy), then a shutdown with `graceMs`: the request must be answered 200 with its usage.
 * Resolves, once the database is back and the usage row written, with a store to read it.
 */
async function askPlainWhileHung(options: {
  journal: string;
  requestId: string;
  graceMs: number;
  /** Told as the shutdown begins, the settle held. */
  whileHeld?: () => void;
  /** Streamed (with its usage chunk): its events must end with the finish, not the cut's error. */
  stream?: boolean;
}) {
  if (!("url" in postgres)) throw new Error("needs PostgreSQL");
  const proxied = new URL(postgres.url);
  proxied.hostname = "127.0.0.1";
  proxied.port = String(proxy.port);
  const server = await startServer({
    config: createTestConfig({
      database: proxied.toString(),
      chargeJournalDir: join(folder, options.journal),
      models: [createUpstreamModelEntry("upstream-chat", upstream.baseUrl)],
    }),
    logger: false,
    drainStoreWaits: DRAIN_STORE_WAITS,
  });
  const store: Store = await openStore(postgres.url);
  cleanups.push(() => store.close());
  const account = await createAccount(store, { name: options.requestId, balanceNano: 1_000_000_000n });
  const { key } = await createKey(store, { role: "user", accountId: account.id });
  let answer: () => void = () => {};
  const answered = new Promise<void>((resolve) => {
    answer = resolve;
  });
  upstream.handle(async (_request, response) => {
    await answered;
    await writeEvents(response, textEvents(["Hello", " there"], { usage: [10, 4] }));
  });

  const asked = upstream.requests.length;
  const reply = fetch(`${server.baseUrl}/chat/completions`, {
    method: "POST",
    headers: {
      authorization: `Bearer ${key}`,
      "content-type": "application/json",
      "x-request-id": options.requestId,
    },
    body: JSON.stringify({
      model: "upstream-chat",
      messages: [{ role: "user", content: "Hi" }],
      ...(options.stream === true ? { stream: true, stream_options: { include_usage: true } } : {}),
    }),
  }).then(
    async (response) => {
      if (options.stream !== true)
        return { status: response.status, body: (await response.json()) as { usage: unknown } };
      // The events' data, [DONE] aside, as the body: the finish chunk, then the usage chunk.
      const events = (await response.text())
        .split("\n\n")
        .filter((event) => event.startsWith("data: ") && event !== "data: [DONE]")
        .map((event) => JSON.parse(event.slice("data: ".length)) as Record<string, unknown>);
      return { status: response.status, body: { events: events.slice(-2) } };
    },
    (error: unknown) => error as Error,
  );
  // Admitted and running; the database hangs, the answer completes, its settle waits.
  await until(() => upstream.requests.length > asked);
  proxy.setMode("pause");
  answer();
  await until(() => proxy.held > 0);
  const stopped = server.shutdown({ graceMs: options.graceMs }).catch(() => {});
  options.whileHeld?.();
  const usage = { prompt_tokens: 10, completion_tokens: 4, total_tokens: 14 };
  expect(await reply).toMatchObject(
    options.stream === true
      ? {
          status: 200,
          body: { events: [{ choices: [{ finish_reason: "stop" }] }, { choices: [], usage }] },
        }
      : { status: 200, body: { usage } },
  );
  await stopped;
  proxy.setMode("forward");
  await until(async () => (await store.listUsage()).some((row) => row.requestId === options.requestId));
  return store;
}

describe.skipIf(!("url" in postgres))("a shutdown while PostgreSQL hangs", () => {
  it("journals the charge being settled as the drain begins, ends without waiting out the database, and the charge is recorded once", async () => {
    if (!("url" in postgres)) return;
    const proxied = new URL(postgres.url);
    proxied.hostname = "127.0.0.1";
    proxied.port = String(proxy.port);
    const journalDir = join(folder, "owed");
    const server = await startServer({
      config: createTestConfig({
        database: proxied.toString(),
        chargeJournalDir: journalDir,
        models: [createUpstreamModelEntry("upstream-chat", upstream.baseUrl)],
      }),
      logger: false,
      drainStoreWaits: DRAIN_STORE_WAITS,
    });
    const store: Store = await openStore(postgres.url);
    cleanups.push(() => store.close());
    const account = await createAccount(store, { name: "hung", balanceNano: 1_000_000_000n });
    const { key } = await createKey(store, { role: "user", accountId: account.id });

    let answer: () => void = () => {};
    const answered = new Promise<void>((resolve) => {
      answer = resolve;
    });
    // The answer begins, and ends when the test says.
    const events = textEvents(["Hello", " there"], { usage: [10, 4] });
    upstream.handle(async (_request, response) => {
      await writeEvents(response, events.slice(0, 2), { done: false, end: false });
      await answered;
      await writeEvents(response, events.slice(2));
    });
    const response = await fetch(`${server.baseUrl}/chat/completions`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${key}`,
        "content-type": "application/json",
        "x-request-id": "settled-while-hung",
      },
      body: JSON.stringify({
        model: "upstream-chat",
        stream: true,
        messages: [{ role: "user", content: "Hi" }],
      }),
    });
    expect(response.status).toBe(200);
    const body = response.text();

    // The database hangs; the answer ends, and its settle waits in the proxy.
    proxy.setMode("pause");
    answer();
    await until(() => proxy.held > 0);

    const stopped = server.shutdown({ graceMs: 10_000 }).then(
      () => undefined,
      (error: unknown) => error as Error,
    );
    // A SIGKILL from here on loses nothing: the charge is in the journal already.
    const journals = readdirSync(journalDir);
    expect(journals).toHaveLength(1);
    const journalPath = join(journalDir, journals[0] ?? "");
    expect(
      new ChargeJournal(journalPath).readOwed().map((usage) => [usage.requestId, usage.costNano]),
    ).toEqual([["settled-while-hung", 18_000n]]);

    // The drain ends without the database (well within the 30 s of its statement timeout),
    // the client having had its whole answer, and says the charge is kept for the next start.
    expect(await body).toContain("data: [DONE]");
    const failure = await stopped;
    expect(failure?.message).toContain("the next start records it");
    // What the next start would find, had the process been killed now.
    const left = join(folder, "left-by-the-stopped-replica.jsonl");
    copyFileSync(journalPath, left);
    expect(await store.listUsage()).toEqual([]);

    // The database resumes: the settle held all along commits, and the journal lets it go.
    proxy.setMode("forward");
    await until(async () => (await store.listUsage()).length > 0);
    await until(() => !existsSync(journalPath));

    // A next start recording the journal the process left: the settle that committed late is
    // not charged again.
    const replay = await recordOwedCharges({
      store,
      journal: new ChargeJournal(left),
      now: new Date(),
      isUnavailable: isStoreUnavailable,
    });
    expect(replay.owed).toEqual([]);
    const rows = (await store.listUsage()).filter((row) => row.requestId === "settled-while-hung");
    expect(rows.map((row) => row.costNano)).toEqual([18_000n]);
    expect(await store.getAccountMoney(account.id)).toMatchObject({
      balanceNano: 1_000_000_000n - 18_000n,
      reservedNano: 0n,
    });
    expect(await store.listReservations()).toEqual([]);
    expect(await store.audit()).toEqual([]);
  }, 20_000);

  it("answers a non-streamed request whose settle waits on the database within the grace, instead of cutting it charged and unanswered", async () => {
    // Its settle is given up on within the grace (kept in the journal): it is answered, not cut.
    await askPlainWhileHung({ journal: "owed-2", requestId: "plain-while-hung", graceMs: 10_000 });
  }, 20_000);

  it("keeps a whole answer's charge out of the journal while its settle waits on the database (regression: a SIGKILL then charged an answer never sent)", async () => {
    const journalDir = join(folder, "owed-4");
    const requestId = "plain-not-journaled";
    const store = await askPlainWhileHung({
      journal: "owed-4",
      requestId,
      graceMs: 10_000,
      // The shutdown began and the charge is being recorded: the answer is not sent yet, so a
      // SIGKILL now must leave the next start nothing to charge for it.
      whileHeld: () => {
        const owed = readdirSync(journalDir).flatMap((file) =>
          new ChargeJournal(join(journalDir, file)).readOwed(),
        );
        expect(owed.map((usage) => usage.requestId)).toEqual([]);
      },
    });
    // Once its settle was given up on, kept in the journal before the answer went out; the settle
    // held all along committed later: charged once.
    const rows = (await store.listUsage()).filter((row) => row.requestId === requestId);
    expect(rows.map((row) => row.costNano)).toEqual([18_000n]);
  }, 20_000);

  it("answers a whole answer whose charge was being recorded when the grace ran out, as charged (regression: 503, charged in full)", async () => {
    // The grace runs out while the whole answer's charge waits on the database: the request is
    // cut then, but its settlement charged it (the journal holds the charge): it is answered.
    const store = await askPlainWhileHung({
      journal: "owed-3",
      requestId: "charged-as-grace-ran-out",
      graceMs: 200,
    });
    const rows = (await store.listUsage()).filter((row) => row.requestId === "charged-as-grace-ran-out");
    expect(rows).toHaveLength(1);
    expect(rows[0]?.costNano).toBeGreaterThan(0n);
  }, 20_000);

  it('ends a stream whose charge was being recorded when the grace ran out with its finish, as charged (regression: the cut\'s error event, "Retry it", charged in full)', async () => {
    const store = await askPlainWhileHung({
      journal: "owed-4",
      requestId: "streamed-as-grace-ran-out",
      graceMs: 200,
      stream: true,
    });
    const rows = (await store.listUsage()).filter((row) => row.requestId === "streamed-as-grace-ran-out");
    expect(rows.map((row) => ({ finishReason: row.finishReason, errorCode: row.errorCode }))).toEqual([
      { finishReason: "stop", errorCode: undefined },
    ]);
    expect(rows[0]?.costNano).toBeGreaterThan(0n);
  }, 20_000);
});
