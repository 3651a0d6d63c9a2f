import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it, onTestFinished, vi } from "vitest";
import { createAccount } from "../../src/admin/create-account.ts";
import { createKey } from "../../src/admin/create-key.ts";
import type { Config } from "../../src/catalog/catalog.ts";
import { type RunningServer, startServer } from "../../src/server.ts";
import { openStore } from "../../src/store/open-store.ts";
import type { Store } from "../../src/store/store.ts";
import { collectLogLines } from "../support/collect-log-lines.ts";
import { findFreePort } from "../support/free-port.ts";
import { getTestModelPath } from "../support/test-model.ts";
import { createTestConfig, createTinyModelEntry, TINY_MODEL } from "../support/test-server.ts";
import {
  checkTestRedis,
  createTestPrefix,
  deleteTestKeys,
  hasRedisServerBinary,
  startRedisServer,
} from "./redis-test-connection.ts";

/**
 * Two servers in this process on one SQLite file and one Redis prefix: the quick check of the
 * wiring (shared limits, revocation over the bus, the Redis-down policies). The real scale-out
 * test, with processes on PostgreSQL, is `replicas.test.ts`.
 */
const redis = await checkTestRedis();
const prefix = createTestPrefix("servers");
let folder: string;
let modelPath: string;
let store: Store;
const servers: RunningServer[] = [];

function configOf(redisUrl: string | undefined): Config {
  return createTestConfig({
    database: `sqlite:${join(folder, "tollgate.db")}`,
    redis: redisUrl,
    adminKey: "test-admin-key",
    models: [createTinyModelEntry(modelPath)],
  });
}

/** Starts a server on `redisUrl` with `env` set; its JSON log lines go to `logLines` when given. */
async function start(
  redisUrl: string | undefined,
  env: Record<string, string> = {},
  logLines?: Record<string, unknown>[],
): Promise<RunningServer> {
  const saved = Object.fromEntries(Object.keys(env).map((name) => [name, process.env[name]]));
  Object.assign(process.env, env);
  try {
    const server = await startServer({
      config: configOf(redisUrl),
      logger: logLines === undefined ? false : { destination: collectLogLines(logLines).destination },
    });
    servers.push(server);
    return server;
  } finally {
    for (const [name, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  }
}

async function createFundedKey(input: { rpm?: number } = {}): Promise<{ key: string; publicId: string }> {
  const account = await createAccount(store, {
    name: `account-${Math.random().toString(36).slice(2)}`,
    balanceNano: 1_000_000_000n,
  });
  const created = await createKey(store, { role: "user", accountId: account.id, ...input });
  return { key: created.key, publicId: created.record.publicId };
}

function chat(server: RunningServer, key: string): Promise<Response> {
  return fetch(`${server.baseUrl}/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ model: TINY_MODEL, messages: [{ role: "user", content: "Hi" }], max_tokens: 1 }),
  });
}

/**
 * Until its model has loaded, a server's event loop stalls for a second or more (the chat
 * template is resolved synchronously): a Redis command sent then can outlive its timeout and be
 * answered by the fail-open policy, which is not what these tests are about.
 */
async function waitUntilReady(server: RunningServer): Promise<void> {
  const ready = `${server.baseUrl.replace(/\/v1$/, "")}/ready`;
  for (let tries = 0; (await fetch(ready)).status !== 200; tries++) {
    if (tries > 300) throw new Error(`${ready} never answered 200`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

beforeAll(async () => {
  folder = mkdtempSync(join(tmpdir(), "tollgate-redis-servers-"));
  modelPath = await getTestModelPath();
  store = await openStore(`sqlite:${join(folder, "tollgate.db")}`);
});

afterAll(async () => {
  for (const server of servers) await server.close();
  await store?.close();
  if ("url" in redis) await deleteTestKeys(redis.url, prefix);
  rmSync(folder, { recursive: true, force: true });
});

describe.skipIf(!("url" in redis))("two servers sharing Redis", () => {
  const url = "url" in redis ? redis.url : "";
  let first: RunningServer;
  let second: RunningServer;

  beforeAll(async () => {
    first = await start(url, { TOLLGATE_REDIS_PREFIX: prefix });
    second = await start(url, { TOLLGATE_REDIS_PREFIX: prefix });
    for (const server of [first, second]) await waitUntilReady(server);
  });

  it("share one rpm bucket per key", async () => {
    const { key } = await createFundedKey({ rpm: 2 });
    const one = await chat(first, key);
    expect(one.status).toBe(200);
    expect(one.headers.get("x-ratelimit-remaining-requests")).toBe("1");
    const two = await chat(second, key);
    expect(two.status).toBe(200);
    expect(two.headers.get("x-ratelimit-remaining-requests")).toBe("0");
    const third = await chat(first, key);
    expect(third.status).toBe(429);
    expect(((await third.json()) as { error: { code: string } }).error.code).toBe("rate_limit_exceeded");
  });

  it("refuse on the other server a key revoked through one server's admin API, through the bus and not the key cache's expiry", async () => {
    const { key, publicId } = await createFundedKey();
    const listModels = async (server: RunningServer) => {
      const response = await fetch(`${server.baseUrl}/models`, {
        headers: { authorization: `Bearer ${key}` },
      });
      await response.arrayBuffer();
      return response.status;
    };
    // The key cache ages its rows on the steady clock: stopped, no row ever expires, so only the
    // bus can make the other server look the key up again.
    const steadyNow = performance.now();
    const stopped = vi.spyOn(performance, "now").mockReturnValue(steadyNow);
    onTestFinished(() => stopped.mockRestore());
    // The other server has the key in its cache now.
    expect(await listModels(second)).toBe(200);
    const revoked = await fetch(`${first.baseUrl.replace(/\/v1$/, "")}/admin/keys/${publicId}/revoke`, {
      method: "POST",
      headers: { authorization: "Bearer test-admin-key" },
    });
    expect(revoked.status).toBe(200);
    await expect.poll(() => listModels(second), { timeout: 10_000, interval: 10 }).toBe(401);
  });
});

describe("a server whose Redis is down", () => {
  it("fail-open (default): serves rate-limited keys without limits", async () => {
    const server = await start(`redis://127.0.0.1:${await findFreePort()}`, {
      TOLLGATE_REDIS_PREFIX: "tollgate-test:down:",
    });
    const { key } = await createFundedKey({ rpm: 1 });
    for (let index = 0; index < 2; index++) {
      const answered = await chat(server, key);
      expect(answered.status).toBe(200);
      // SPEC §11's trio, telling what the policy does: nothing limits the key meanwhile.
      expect(rateLimitHeaders(answered)).toEqual({
        "x-ratelimit-limit-requests": "1",
        "x-ratelimit-remaining-requests": "1",
        "x-ratelimit-reset-requests": "0s",
      });
    }
  });

  it("fail-closed: refuses rate-limited keys with 503 and a clear message, and serves the others", async () => {
    const logLines: Record<string, unknown>[] = [];
    const server = await start(
      `redis://127.0.0.1:${await findFreePort()}`,
      { TOLLGATE_REDIS_PREFIX: "tollgate-test:down:", TOLLGATE_REDIS_FAILURE_POLICY: "fail-closed" },
      logLines,
    );
    const limited = await createFundedKey({ rpm: 100 });
    const refused = await chat(server, limited.key);
    expect(refused.status).toBe(503);
    // Named as Redis in the log (it said "the store is unavailable", the database working).
    const warnings = logLines.filter((line) => line.level === 40).map((line) => line.msg);
    expect(warnings).toContain("Redis is unavailable: a rate-limited key's request refused (fail-closed)");
    expect(warnings).not.toContain("the store is unavailable");
    expect(refused.headers.get("retry-after")).toBe("5");
    // Nothing admitted until the retry-after, and no later (regression: "1m0s" beside "5").
    expect(rateLimitHeaders(refused)).toEqual({
      "x-ratelimit-limit-requests": "100",
      "x-ratelimit-remaining-requests": "0",
      "x-ratelimit-reset-requests": "5s",
    });
    const body = (await refused.json()) as { error: { message: string; code: string } };
    expect(body.error.message).toMatch(/cannot reach its Redis/);
    expect(body.error.code).toBe("store_unavailable");
    const unlimited = await createFundedKey();
    expect((await chat(server, unlimited.key)).status).toBe(200);
  });

  it("refuses to start with a failure policy it does not know", async () => {
    await expect(
      start(`redis://127.0.0.1:${await findFreePort()}`, { TOLLGATE_REDIS_FAILURE_POLICY: "maybe" }),
    ).rejects.toThrow(/TOLLGATE_REDIS_FAILURE_POLICY must be "fail-open".*"fail-closed"/);
  });
});

/**
 * Counted on a Redis of the test's own: `INFO commandstats` counts the whole server's commands,
 * and any other client running a script meanwhile (another test file's replica shutting down, a
 * shared Redis) made the count wrong.
 */
describe.skipIf(!hasRedisServerBinary)("a server with a Redis of its own", () => {
  it("spends one Redis call per bucket on a chat request, and still reports the buckets a refusal never reached", async () => {
    const port = await findFreePort();
    const redisServer = await startRedisServer(port);
    onTestFinished(() => redisServer.stop());
    const url = `redis://127.0.0.1:${port}`;
    const server = await start(url, { TOLLGATE_REDIS_PREFIX: prefix });
    // Closed before its Redis stops (onTestFinished runs the last registered first).
    onTestFinished(() => server.close());
    await waitUntilReady(server);
    // A new Redis has no script loaded yet: the first take loads it (a refused EVALSHA, then an
    // EVAL). Counted from the second key's request, as on a Redis that has served before.
    expect((await chat(server, (await createFundedKey({ rpm: 100 })).key)).status).toBe(200);
    const { key } = await createFundedKey({ rpm: 100 });
    const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
    await client.connect();
    try {
      /** Lua script runs so far (the limiter's only commands). */
      const scriptCalls = async () => {
        const stats = await client.info("commandstats");
        return [...stats.matchAll(/^cmdstat_(?:evalsha|eval):calls=(\d+)/gm)].reduce(
          (sum, match) => sum + Number(match[1]),
          0,
        );
      };
      const before = await scriptCalls();
      const answered = await chat(server, key);
      expect(answered.status).toBe(200);
      expect(answered.headers.get("x-ratelimit-remaining-requests")).toBe("99");
      // The take of the rpm bucket, nothing else (it used to be peeked first).
      expect((await scriptCalls()) - before).toBe(1);

      const refused = await fetch(`${server.baseUrl}/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ model: "no-such-model", messages: [{ role: "user", content: "Hi" }] }),
      });
      expect(refused.status).toBe(404);
      expect(refused.headers.get("x-ratelimit-limit-requests")).toBe("100");
      expect(refused.headers.get("x-ratelimit-remaining-requests")).toBe("99");
    } finally {
      client.disconnect();
    }
  });
});

/** The response's `x-ratelimit-*` headers, by name. */
function rateLimitHeaders(response: Response): Record<string, string> {
  return Object.fromEntries([...response.headers].filter(([name]) => name.startsWith("x-ratelimit-")));
}
