/**
 * A reload that replaces a model's engine while a request on it waits between the engine's steps
 * (here for its rate limit, in a Redis that is paused; on PostgreSQL it is the reservation's round
 * trip): the request keeps the engine it started on and is answered, and the replaced engine
 * closes once the request has ended. The engine's own load counts a request only while the engine
 * has it, so the replaced engine used to be closed at once and the request failed with a 503.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAccount } from "../../src/admin/create-account.ts";
import { createKey } from "../../src/admin/create-key.ts";
import type { CatalogModel } from "../../src/catalog/catalog.ts";
import { type RunningServer, startServer } from "../../src/server.ts";
import { openStore } from "../../src/store/open-store.ts";
import { hasRedisServerBinary, startRedisServer } from "../cluster/redis-test-connection.ts";
import { upstreamModel } from "../engine/openai/engine-helpers.ts";
import { type MockUpstream, startMockUpstream, streamText } from "../engine/openai/mock-upstream.ts";
import { findFreePort } from "../support/free-port.ts";
import { createTestConfig } from "../support/test-server.ts";

let folder: string;
let redisServer: { stop(): Promise<void> } | undefined;
let redisPort: number;
let upstream: MockUpstream;
let server: RunningServer | undefined;

beforeAll(async () => {
  if (!hasRedisServerBinary) return;
  folder = mkdtempSync(join(tmpdir(), "tollgate-reload-admission-"));
  redisPort = await findFreePort();
  redisServer = await startRedisServer(redisPort);
  upstream = await startMockUpstream(streamText(["Hello", " world"]));
});

afterAll(async () => {
  await server?.close();
  await upstream?.close();
  await redisServer?.stop();
  if (folder !== undefined) rmSync(folder, { recursive: true, force: true });
});

/** Clients whose command waits in Redis (a pause holds them). */
async function blockedClients(redis: Redis): Promise<number> {
  return Number(/^blocked_clients:(\d+)/m.exec(await redis.info("clients"))?.[1] ?? 0);
}

describe.skipIf(!hasRedisServerBinary)("a reload while a request waits for its rate limit", () => {
  it("keeps the replaced engine until the request has ended", async () => {
    const model: CatalogModel = upstreamModel([upstream.baseUrl]);
    const config = createTestConfig({
      database: `sqlite:${join(folder, "tollgate.db")}`,
      redis: `redis://127.0.0.1:${redisPort}`,
      models: [model],
    });
    server = await startServer({ config, logger: false });
    const store = await openStore(config.database);
    const account = await createAccount(store, { name: "reloaded", balanceNano: 1_000_000_000n });
    const { key } = await createKey(store, { role: "user", accountId: account.id, rpm: 1000 });
    await store.close();

    const control = new Redis(redisPort, "127.0.0.1", { maxRetriesPerRequest: 1 });
    try {
      // Writes wait (the limiter's script is one) while reads such as INFO go on; the request's
      // own command times out after a second and the fail-open policy lets it through.
      await control.call("CLIENT", "PAUSE", "3000", "WRITE");
      const answer = fetch(`${server.baseUrl}/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ model: model.id, messages: [{ role: "user", content: "Hi" }], max_tokens: 8 }),
      });
      for (let tries = 0; (await blockedClients(control)) === 0; tries++) {
        if (tries > 200) throw new Error("the request never reached Redis");
        await sleep(10);
      }
      // The engine block changes: the model gets a new engine, the old one is retired.
      const changed: CatalogModel = upstreamModel([upstream.baseUrl], {
        apiKey: "sk-upstream-rotated-654321",
      });
      await server.reload({ ...config, models: [changed] });

      const response = await answer;
      const body = (await response.json()) as { choices?: { message: { content: string } }[] };
      expect(response.status).toBe(200);
      expect(body.choices?.[0]?.message.content).toBe("Hello world");
      // It ran on the engine it started on: the endpoint's key before the rotation.
      expect(upstream.requests.at(-1)?.headers.authorization).toBe("Bearer sk-upstream-secret-123456");
    } finally {
      await control.call("CLIENT", "UNPAUSE").catch(() => {});
      control.disconnect();
    }
  }, 30_000);
});
