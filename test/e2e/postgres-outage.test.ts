import { afterEach, describe, expect, it } from "vitest";
import { createAccount } from "../../src/admin/create-account.ts";
import { createKey } from "../../src/admin/create-key.ts";
import type { Config } from "../../src/catalog/catalog.ts";
import { startServer } from "../../src/server.ts";
import { openStore } from "../../src/store/open-store.ts";
import { startMockUpstream, streamText, textEvents, writeEvents } from "../engine/openai/mock-upstream.ts";
import {
  countBackendsWaitingForLocks,
  lockAccounts,
  terminateBackends,
  terminateBackendsWaitingForLocks,
  withApplicationName,
} from "../store/postgres-backends.ts";
import { createPostgresTestSchema } from "../store/postgres-test-database.ts";
import { collectLogLines } from "../support/collect-log-lines.ts";
import { createTestConfig, createUpstreamModelEntry } from "../support/test-server.ts";

/**
 * A server on PostgreSQL whose database connections are terminated while it serves (a database
 * restart, a failover): it must stay up, answer the requests the database was serving with 503
 * `store_unavailable`, and serve the next ones on new connections. In a schema of its own; only
 * the server's own backends (found by their application name) are terminated.
 */
const probe = await createPostgresTestSchema();
if ("skipped" in probe) console.warn(`Skipping the PostgreSQL outage test: ${probe.skipped}.`);

const cleanups: (() => Promise<unknown>)[] = [];

/** A server on `database` with one upstream model, `remote`. */
function serverConfig(database: string, upstreamBaseUrl: string): Config {
  return createTestConfig({
    database,
    models: [createUpstreamModelEntry("remote", upstreamBaseUrl)],
  });
}

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

describe.skipIf("skipped" in probe)("a server on PostgreSQL when its connections are terminated", () => {
  it("answers 503 store_unavailable for what the database was serving, stays up, and serves the next requests", async () => {
    if ("skipped" in probe) return;
    cleanups.push(() => probe.drop());
    const upstream = await startMockUpstream(streamText(["Hello"], { usage: [5, 1] }));
    cleanups.push(() => upstream.close());
    const applicationName = `${probe.schema}_server`;
    const config = serverConfig(withApplicationName(probe.url, applicationName), upstream.baseUrl);
    const server = await startServer({ config, logger: false });
    cleanups.push(() => server.close());
    const store = await openStore(probe.url);
    cleanups.push(() => store.close());
    const held = await createAccount(store, { name: "held", balanceNano: 10n ** 12n });
    const heldKey = (await createKey(store, { role: "user", accountId: held.id })).key;
    const busy = await createAccount(store, { name: "busy", balanceNano: 10n ** 15n });
    const busyKey = (await createKey(store, { role: "user", accountId: busy.id })).key;

    const chat = async (key: string) => {
      const response = await fetch(`${server.baseUrl}/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ model: "remote", messages: [{ role: "user", content: "Hi" }], max_tokens: 5 }),
      });
      const body = (await response.json()) as { error?: { code: string } };
      return {
        status: response.status,
        code: body.error?.code,
        retryAfter: response.headers.get("retry-after") ?? undefined,
      };
    };
    expect(await chat(heldKey)).toEqual({ status: 200, code: undefined, retryAfter: undefined });

    // Requests on another account keep coming while the connections go.
    let loading = true;
    cleanups.push(async () => {
      loading = false;
    });
    const loadAnswers = new Set<string>();
    const load = Array.from({ length: 3 }, async () => {
      while (loading) {
        const answer = await chat(busyKey);
        loadAnswers.add(`${answer.status} ${answer.code ?? ""}`.trim());
      }
    });

    // A request whose reservation waits, its connection checked out, for the account's row.
    const release = await lockAccounts(probe, [held.id]);
    cleanups.push(release);
    const waiting = chat(heldKey);
    await expect.poll(() => countBackendsWaitingForLocks(applicationName), { timeout: 10_000 }).toBe(1);
    expect(await terminateBackends(applicationName)).toBeGreaterThanOrEqual(1);
    expect(await waiting).toEqual({ status: 503, code: "store_unavailable", retryAfter: "5" });
    await release();

    loading = false;
    await Promise.all(load);
    expect(
      [...loadAnswers].filter((answer) => answer !== "200" && answer !== "503 store_unavailable"),
    ).toEqual([]);
    expect(await chat(heldKey)).toEqual({ status: 200, code: undefined, retryAfter: undefined });
    expect((await fetch(`${server.baseUrl.replace(/\/v1$/, "")}/ready`)).status).toBe(200);

    await server.close();
    // Every charge was recorded once: balances, spent amounts and reservations agree.
    expect((await store.audit()).filter((problem) => problem.kind !== "open_reservation")).toEqual([]);
  });
});

describe.skipIf("skipped" in probe)("a server on PostgreSQL shutting down while a settlement waits", () => {
  it("closes the store only after the settlements of the requests whose connections it closed", async () => {
    if ("skipped" in probe) return;
    const schema = await createPostgresTestSchema();
    if ("skipped" in schema) return;
    cleanups.push(() => schema.drop());
    // Ten words 50 ms apart: the request is still streaming when the account's row is locked.
    const upstream = await startMockUpstream((_request, response) =>
      writeEvents(
        response,
        textEvents(
          Array.from({ length: 10 }, () => "word "),
          { usage: [5, 10] },
        ),
        {
          delayMs: 50,
        },
      ),
    );
    cleanups.push(() => upstream.close());
    const applicationName = `${schema.schema}_server`;
    const config = serverConfig(withApplicationName(schema.url, applicationName), upstream.baseUrl);
    const logged: { msg: string; usage?: { costNano: string }; route?: string }[] = [];
    const { destination } = collectLogLines(logged);
    const server = await startServer({ config, logger: { level: "info", destination } });
    // Its shutdown fails where it gave a charge up (checked below).
    cleanups.push(() => server.close().catch(() => {}));
    const store = await openStore(schema.url);
    cleanups.push(() => store.close());
    const account = await createAccount(store, { name: "acme", balanceNano: 10n ** 12n });
    const key = (await createKey(store, { role: "user", accountId: account.id })).key;

    const response = await fetch(`${server.baseUrl}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "remote", messages: [{ role: "user", content: "Hi" }], stream: true }),
    });
    const reader = response.body?.getReader();
    await reader?.read();
    // Reserved and streaming: the settle at its end waits for the row while the shutdown cuts it.
    const release = await lockAccounts(schema, [account.id]);
    cleanups.push(release);
    // Its failure (a charge given up) is read below; caught at once, it is no unhandled rejection.
    const stopped = server.shutdown({ graceMs: 0 }).then(
      () => undefined,
      (error: unknown) => error,
    );
    const drained = (async () => {
      while (reader !== undefined && !(await reader.read().catch(() => ({ done: true }))).done) {}
    })();
    // Past the moment the shutdown has closed the connection (about 1 s), the settle waiting for
    // the row fails (its backend terminated) and is retried, and then the row is free: the store
    // must still be open for that retry.
    await expect.poll(() => countBackendsWaitingForLocks(applicationName), { timeout: 10_000 }).toBe(1);
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(await terminateBackendsWaitingForLocks(applicationName)).toBe(1);
    await new Promise((resolve) => setTimeout(resolve, 300));
    await release();
    const [stopping] = await Promise.all([stopped, drained]);

    // Its log line says what was sent (a 200 and the shutdown's error event), not that the client
    // left (499): the server closed its connection while it was settling.
    expect(logged.find((line) => line.route === "/v1/chat/completions")).toMatchObject({
      status: 200,
      error: "model_unavailable",
    });
    // Either the last try went through, or the shutdown gave it up and logged the usage to record
    // by hand (README): never a retry that the exit drops without a word.
    const rows = await store.listUsage({ accountId: account.id });
    const givenUp = logged.filter((line) => line.msg.includes("its charge was not recorded"));
    expect(rows.length + givenUp.length).toBe(1);
    if (rows.length === 1) {
      expect(rows[0]?.costNano).toBeGreaterThan(0n);
      expect(await store.audit()).toEqual([]);
      expect(stopping).toBeUndefined();
    } else {
      expect(BigInt(givenUp[0]?.usage?.costNano ?? "0")).toBeGreaterThan(0n);
      // The shutdown says so: the process exits 1, not 0.
      expect((stopping as Error).message).toMatch(/^1 charge was not recorded/);
    }
  });
});
