import { afterEach, describe, expect, it } from "vitest";
import { createAccount } from "../../src/admin/create-account.ts";
import { createKey } from "../../src/admin/create-key.ts";
import type { Config } from "../../src/catalog/catalog.ts";
import { startServer } from "../../src/server.ts";
import { openStore } from "../../src/store/open-store.ts";
import { startMockUpstream, streamText } from "../engine/openai/mock-upstream.ts";
import {
  countBackendsWaitingForLocks,
  lockAccounts,
  terminateBackends,
  withApplicationName,
} from "../store/postgres-backends.ts";
import { createPostgresTestSchema } from "../store/postgres-test-database.ts";
import { createUpstreamModelEntry } from "../support/test-server.ts";

/**
 * A server on PostgreSQL whose database connections are terminated while it serves (a database
 * restart, a failover): it must stay up, answer the requests the database was serving with 503
 * `store_unavailable`, and serve the next ones on new connections. In a schema of its own; only
 * the server's own backends (found by their application name) are terminated.
 */
const probe = await createPostgresTestSchema();
if ("skipped" in probe) console.warn(`Skipping the PostgreSQL outage test: ${probe.skipped}.`);

const cleanups: (() => Promise<unknown>)[] = [];

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
    const config: Config = {
      server: { host: "127.0.0.1", port: 0, bodyLimitBytes: 1024 * 1024 },
      database: withApplicationName(probe.url, applicationName),
      redis: undefined,
      adminKey: undefined,
      metricsKey: undefined,
      logPrompts: false,
      source: undefined,
      models: [createUpstreamModelEntry("remote", upstream.baseUrl)],
    };
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
