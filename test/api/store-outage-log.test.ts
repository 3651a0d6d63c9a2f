import { afterEach, describe, expect, it } from "vitest";
import { createAccount } from "../../src/admin/create-account.ts";
import { createKey } from "../../src/admin/create-key.ts";
import { throttleLog } from "../../src/api/throttle-log.ts";
import { startServer } from "../../src/server.ts";
import { openStore } from "../../src/store/open-store.ts";
import { startTcpProxy } from "../cluster/tcp-proxy.ts";
import {
  type MockUpstream,
  startMockUpstream,
  textEvents,
  writeEvents,
} from "../engine/openai/mock-upstream.ts";
import { createPostgresTestSchema } from "../store/postgres-test-database.ts";
import { collectLogLines } from "../support/collect-log-lines.ts";
import { createTestConfig, createUpstreamModelEntry } from "../support/test-server.ts";

const postgres = await createPostgresTestSchema();
if ("skipped" in postgres) console.warn(`Skipping the store outage log test: ${postgres.skipped}.`);

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A JSON log line of the server, with the fields these tests read. */
interface LogLine {
  msg: string;
  level: number;
  status?: number;
  refusedSinceLastLine?: number;
  failedSinceLastLine?: number;
  reqId?: string;
}

/**
 * A server on the PostgreSQL schema at `schemaUrl` through a TCP proxy the test can cut, serving
 * `remote` from `upstream`, with its log lines collected; a funded account's key, and a store of
 * the test's own on the schema (not through the proxy).
 */
async function startServerBehindProxy(schemaUrl: string, upstream: MockUpstream) {
  const direct = new URL(schemaUrl);
  const proxy = await startTcpProxy({ targetPort: Number(direct.port || 5432), mode: "forward" });
  cleanups.push(() => proxy.close());
  const proxied = new URL(schemaUrl);
  proxied.hostname = "127.0.0.1";
  proxied.port = String(proxy.port);
  const { lines: logged, destination } = collectLogLines<LogLine>();
  const server = await startServer({
    config: createTestConfig({
      database: proxied.toString(),
      models: [createUpstreamModelEntry("remote", upstream.baseUrl)],
    }),
    logger: { level: "info", destination },
  });
  cleanups.push(() => server.close().catch(() => {}));
  const store = await openStore(schemaUrl);
  cleanups.push(() => store.close());
  const account = await createAccount(store, { name: "acme", balanceNano: 10n ** 12n });
  const key = (await createKey(store, { role: "user", accountId: account.id })).key;
  return { proxy, server, logged, store, account, key };
}

describe("throttleLog", () => {
  it("logs the first event at once, then one line an interval with the count it stands for", () => {
    let clock = 0;
    const throttled = throttleLog(10_000, () => clock);
    const lines: number[] = [];
    const event = () => throttled((skipped) => lines.push(skipped));
    event();
    for (let index = 0; index < 5; index++) {
      clock += 1_000;
      event();
    }
    expect(lines).toEqual([0]);
    clock += 5_000;
    event();
    expect(lines).toEqual([0, 5]);
    clock += 60_000;
    event();
    expect(lines).toEqual([0, 5, 0]);
  });
});

describe.skipIf("skipped" in postgres)("a server whose store is down", () => {
  it("logs the outage once, not a warning with its stack for every request it refuses", async () => {
    if ("skipped" in postgres) return;
    cleanups.push(() => postgres.drop());
    const upstream = await startMockUpstream();
    cleanups.push(() => upstream.close());
    const { proxy, server, logged, key } = await startServerBehindProxy(postgres.url, upstream);

    proxy.setMode("cut");
    for (let index = 0; index < 20; index++) {
      const response = await fetch(`${server.baseUrl}/models`, {
        headers: { authorization: `Bearer ${key}` },
      });
      expect(response.status).toBe(503);
      await response.text();
    }
    const refusals = logged.filter((line) => line.msg === "request" && line.status === 503);
    expect(refusals).toHaveLength(20);
    expect(logged.filter((line) => line.msg === "the store is unavailable")).toHaveLength(1);
  });
});

describe.skipIf("skipped" in postgres)("a server whose store goes down while requests run", () => {
  it("logs one line for the run of settles that fail, then one line per charge recorded after", async () => {
    if ("skipped" in postgres) return;
    const schema = await createPostgresTestSchema();
    if ("skipped" in schema) return;
    cleanups.push(() => schema.drop());
    // Each request waits upstream until the store is cut, then answers.
    const cut = Promise.withResolvers<void>();
    const upstream = await startMockUpstream(async (_request, response) => {
      await cut.promise;
      await writeEvents(response, textEvents(["Hi"], { usage: [3, 1] }));
    });
    cleanups.push(() => upstream.close());
    const { proxy, server, logged, store, account, key } = await startServerBehindProxy(schema.url, upstream);

    const requests = 6;
    const answers = Array.from({ length: requests }, () =>
      fetch(`${server.baseUrl}/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ model: "remote", messages: [{ role: "user", content: "Hi" }], stream: true }),
      }).then(async (response) => ({ status: response.status, body: await response.text() })),
    );
    await expect.poll(() => upstream.requests.length, { timeout: 10_000 }).toBe(requests);
    proxy.setMode("cut");
    cut.resolve();
    for (const answer of await Promise.all(answers)) {
      expect(answer.status).toBe(200);
      expect(answer.body).toContain("data: [DONE]");
    }
    const failed = logged.filter(
      (line) => line.msg === "settling a request failed; retrying in the background",
    );
    expect(failed).toHaveLength(1);

    proxy.setMode("forward");
    const recovered = () =>
      logged.filter((line) => line.msg === "settled a request after the store came back");
    await expect.poll(() => recovered().length, { timeout: 20_000 }).toBe(requests);
    expect(new Set(recovered().map((line) => line.reqId)).size).toBe(requests);
    expect(await store.listUsage({ accountId: account.id })).toHaveLength(requests);
  });
});
