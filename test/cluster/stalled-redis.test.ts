import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { setTimeout as sleep } from "node:timers/promises";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { createAccount } from "../../src/admin/create-account.ts";
import { createKey } from "../../src/admin/create-key.ts";
import type { InvalidationEvent } from "../../src/cluster/invalidation-bus.ts";
import { connectRedisInvalidationBus } from "../../src/cluster/redis-invalidation-bus.ts";
import { REDIS_REST_MS, RedisRateLimiter } from "../../src/limits/redis-rate-limiter.ts";
import { type RunningServer, startServer } from "../../src/server.ts";
import { openStore } from "../../src/store/open-store.ts";
import { startMockUpstream } from "../engine/openai/mock-upstream.ts";
import { createTestConfig, createUpstreamModelEntry } from "../support/test-server.ts";
import { checkTestRedis, createTestPrefix, deleteTestKeys } from "./redis-test-connection.ts";
import { startTcpProxy, type TcpProxy, type TcpProxyMode } from "./tcp-proxy.ts";

/**
 * A Redis that accepts connections and never answers (a paused process): the TCP connect
 * succeeds, so only the handshake can notice. The server must start and serve anyway.
 */
const redis = await checkTestRedis();
let folder: string;

beforeAll(() => {
  folder = mkdtempSync(join(tmpdir(), "tollgate-stalled-redis-"));
});

afterAll(() => {
  rmSync(folder, { recursive: true, force: true });
});

describe("a Redis that accepts connections but never answers", () => {
  it("does not keep the server from starting, and the server serves (fail-open)", async () => {
    const blackHole = await startTcpProxy({ targetPort: 0, mode: "hold" });
    onTestFinished(() => blackHole.close());
    const upstream = await startMockUpstream();
    onTestFinished(() => upstream.close());
    const database = `sqlite:${join(folder, "tollgate.db")}`;
    const logs = new PassThrough();
    let logText = "";
    logs.on("data", (chunk: Buffer) => {
      logText += chunk.toString();
    });
    const saved = process.env.TOLLGATE_REDIS_PREFIX;
    process.env.TOLLGATE_REDIS_PREFIX = createTestPrefix("stalled");
    let server: RunningServer;
    try {
      server = await startServer({
        config: createTestConfig({
          database,
          redis: `redis://127.0.0.1:${blackHole.port}`,
          adminKey: "test-admin-key",
          models: [createUpstreamModelEntry("remote", upstream.baseUrl)],
        }),
        logger: { level: "info", destination: logs },
      });
    } finally {
      if (saved === undefined) delete process.env.TOLLGATE_REDIS_PREFIX;
      else process.env.TOLLGATE_REDIS_PREFIX = saved;
    }
    onTestFinished(() => server.close());

    const origin = server.baseUrl.replace(/\/v1$/, "");
    expect((await fetch(`${origin}/health`)).status).toBe(200);
    // The listening connection has no command timeout: only the handshake check frees it.
    expect(logText).toMatch(
      /Redis is unreachable \(invalidation, listening\): Redis accepted the connection but did not answer/,
    );

    const store = await openStore(database);
    onTestFinished(() => store.close());
    const account = await createAccount(store, { name: "stalled", balanceNano: 1_000_000_000n });
    const { key } = await createKey(store, { role: "user", accountId: account.id, rpm: 1 });
    for (let attempt = 0; attempt < 2; attempt++) {
      const response = await fetch(`${server.baseUrl}/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({
          model: "remote",
          messages: [{ role: "user", content: "Hi" }],
          max_tokens: 1,
        }),
      });
      expect(response.status).toBe(200);
      await response.arrayBuffer();
    }
    // A hang, not slowness, is the failure: without the handshake check the start never ends.
  }, 20_000);

  it.skipIf(!("url" in redis))(
    "leaves the invalidation bus listening once Redis answers again",
    async () => {
      const target = new URL("url" in redis ? redis.url : "redis://127.0.0.1:6379");
      const { proxy, url: proxiedUrl } = await startRedisProxy("hold");
      const prefix = createTestPrefix("stalled-bus");
      const lines: string[] = [];
      const record = (_object: object, message?: string) => {
        lines.push(message ?? "");
      };
      const bus = await connectRedisInvalidationBus({
        url: proxiedUrl,
        prefix,
        logger: { info: record, warn: record, error: record },
      });
      onTestFinished(() => bus.close());
      const received: InvalidationEvent[] = [];
      bus.subscribe((event) => {
        received.push(event);
      });

      // Redis answers again; the connections held so far stay held, as a paused Redis's would.
      proxy.setMode("forward");
      const publisher = new Redis(target.href);
      onTestFinished(() => publisher.disconnect());
      const event: InvalidationEvent = { type: "key-changed", publicId: "after-the-stall" };
      const deadline = Date.now() + 8000;
      while (received.length === 0 && Date.now() < deadline) {
        await publisher.publish(`${prefix}invalidate`, JSON.stringify({ origin: "another-replica", event }));
        await sleep(50);
      }
      expect(received[0]).toEqual(event);
      expect(
        lines.some((line) => line.startsWith("Redis is reachable again (invalidation, listening)")),
      ).toBe(true);
    },
    20_000,
  );
});

/**
 * A rate limiter on `target` through a TCP proxy of the test's (commands time out after 200 ms),
 * both closed when the test ends.
 */
/** A proxy in front of the test Redis, and the URL that reaches Redis through it. */
async function startRedisProxy(mode: TcpProxyMode): Promise<{ proxy: TcpProxy; url: string }> {
  const target = new URL("url" in redis ? redis.url : "redis://127.0.0.1:6379");
  const proxy = await startTcpProxy({
    targetPort: Number(target.port || 6379),
    targetHost: target.hostname,
    mode,
  });
  onTestFinished(() => proxy.close());
  const proxied = new URL(target);
  proxied.hostname = "127.0.0.1";
  proxied.port = String(proxy.port);
  return { proxy, url: proxied.href };
}

async function connectThroughProxy(
  prefix: string,
  failurePolicy: "fail-open" | "fail-closed",
): Promise<{ proxy: TcpProxy; limiter: RedisRateLimiter }> {
  const { proxy, url } = await startRedisProxy("forward");
  const limiter = await RedisRateLimiter.connect({
    url,
    prefix,
    failurePolicy,
    logger: { info: () => {}, warn: () => {}, error: () => {} },
    commandTimeoutMs: 200,
  });
  onTestFinished(() => limiter.close());
  return { proxy, limiter };
}

describe("takes that a stalled Redis runs after the limiter gave up on them", () => {
  it.skipIf(!("url" in redis))(
    "leave the bucket as it was, under either policy (refused requests cost nothing)",
    async () => {
      const target = new URL("url" in redis ? redis.url : "redis://127.0.0.1:6379");
      const prefix = createTestPrefix("stalled-takes");
      onTestFinished(() => deleteTestKeys(target.href, prefix));
      for (const failurePolicy of ["fail-closed", "fail-open"] as const) {
        const { proxy, limiter } = await connectThroughProxy(`${prefix}${failurePolicy}:`, failurePolicy);
        // 10 per minute: one comes back every 6 s, none during the test.
        const bucket = { bucket: "requests:k", limit: 10, amount: 1 };
        expect(await limiter.take(bucket)).toMatchObject({ allowed: true, remaining: 9 });

        proxy.setMode("pause");
        const stalled = await Promise.all(
          Array.from({ length: 5 }, () => limiter.take(bucket).catch((error: unknown) => error)),
        );
        for (const result of stalled) {
          if (failurePolicy === "fail-closed")
            expect(result).toMatchObject({ status: 503, code: "store_unavailable" });
          else expect(result).toMatchObject({ allowed: true });
        }
        // Redis reads the takes and runs them the moment the limiter has given up on them (a
        // stall just longer than the command timeout, the likeliest kind).
        proxy.setMode("forward");

        // After its rest the limiter asks Redis again, on the connection that carried the late
        // takes: Redis has run them by then.
        await sleep(REDIS_REST_MS + 100);
        expect(await limiter.peek(bucket)).toMatchObject({ remaining: 9 });
        expect(await limiter.take(bucket)).toMatchObject({ allowed: true, remaining: 8 });
      }
    },
    20_000,
  );
});

describe("a Redis connection that a network leaves silent without closing it", () => {
  // Regression: every command on it timed out, and it was kept for good while a new connection
  // would have worked: the failure policy applied until TCP gave up (some 15 minutes).
  it.skipIf(!("url" in redis))(
    "is dropped after a few seconds of timeouts, and the limiter works again on a new one",
    async () => {
      const target = new URL("url" in redis ? redis.url : "redis://127.0.0.1:6379");
      const prefix = createTestPrefix("silent");
      onTestFinished(() => deleteTestKeys(target.href, prefix));
      const { proxy, limiter } = await connectThroughProxy(prefix, "fail-closed");
      const bucket = { bucket: "requests:k", limit: 10, amount: 1 };
      expect(await limiter.take(bucket)).toMatchObject({ allowed: true, remaining: 9 });
      const connections = proxy.accepted;

      proxy.blackHoleOpen();
      // Refused (fail-closed) while the silent connection is kept; then a new one answers.
      await expect(limiter.take(bucket)).rejects.toMatchObject({ code: "store_unavailable" });
      await expect
        .poll(
          () =>
            limiter.take(bucket).then(
              (result) => result.allowed,
              () => false,
            ),
          {
            timeout: 15_000,
            interval: 500,
          },
        )
        .toBe(true);
      expect(proxy.accepted).toBeGreaterThan(connections);
    },
    30_000,
  );

  // Regression: a subscriber sends nothing after subscribing, so nothing timed out on it: a
  // silent one heard no other replica's key changes for hours (until TCP keepalive gave up).
  it.skipIf(!("url" in redis))(
    "is dropped when it is the listening one, which subscribes again and hears the other replicas",
    async () => {
      const target = new URL("url" in redis ? redis.url : "redis://127.0.0.1:6379");
      const { proxy, url: proxiedUrl } = await startRedisProxy("forward");
      const prefix = createTestPrefix("silent-bus");
      const lines: string[] = [];
      const record = (_object: object, message?: string) => {
        lines.push(message ?? "");
      };
      let resubscribed = 0;
      const bus = await connectRedisInvalidationBus({
        url: proxiedUrl,
        prefix,
        logger: { info: record, warn: record, error: record },
        onResubscribed: () => resubscribed++,
        subscriberCheckMs: 200,
      });
      onTestFinished(() => bus.close());
      const received: InvalidationEvent[] = [];
      bus.subscribe((event) => {
        received.push(event);
      });
      const publisher = new Redis(target.href);
      onTestFinished(() => publisher.disconnect());
      const publishUntilHeard = async (event: InvalidationEvent & { type: "key-changed" }) => {
        const deadline = Date.now() + 8000;
        while (!received.some((heard) => heard.type === "key-changed" && heard.publicId === event.publicId)) {
          if (Date.now() > deadline) return false;
          await publisher.publish(
            `${prefix}invalidate`,
            JSON.stringify({ origin: "another-replica", event }),
          );
          await sleep(50);
        }
        return true;
      };
      expect(await publishUntilHeard({ type: "key-changed", publicId: "before" })).toBe(true);
      // Some checks pass while the connection answers: a healthy one is kept.
      await sleep(1000);
      expect(resubscribed).toBe(0);
      const connections = proxy.accepted;

      proxy.blackHoleOpen();
      expect(await publishUntilHeard({ type: "key-changed", publicId: "after" })).toBe(true);
      expect(proxy.accepted).toBeGreaterThan(connections);
      // Events published while it was silent were lost: every cached key is dropped.
      expect(resubscribed).toBeGreaterThan(0);
      expect(lines).toContain(
        "Redis is unreachable (invalidation, listening): Redis did not answer a PING on the listening connection within 200 ms. Until it is back, revocations reach the other replicas through the 1-second key cache only. Check that Redis runs and that TOLLGATE_REDIS_URL / redis: points at it.",
      );
      expect(lines).toContain("Redis is reachable again (invalidation, listening).");
    },
    30_000,
  );

  // Regression: the listening connection's goodbye (QUIT) had no timeout, and a shutdown waited
  // for its answer for good.
  it.skipIf(!("url" in redis))(
    "does not keep the bus from closing",
    async () => {
      const { proxy, url: proxiedUrl } = await startRedisProxy("forward");
      const bus = await connectRedisInvalidationBus({
        url: proxiedUrl,
        prefix: createTestPrefix("silent-close"),
        logger: { info() {}, warn() {}, error() {} },
        // No check comes to drop it first.
        subscriberCheckMs: 600_000,
      });
      proxy.blackHoleOpen();
      const closed = await Promise.race([bus.close().then(() => "closed"), sleep(15_000, "still closing")]);
      expect(closed).toBe("closed");
    },
    30_000,
  );
});
