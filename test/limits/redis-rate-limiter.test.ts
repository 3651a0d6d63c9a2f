import { randomUUID } from "node:crypto";
import { createServer } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { Redis } from "ioredis";
import { afterAll, describe, expect, it, onTestFinished } from "vitest";
import { isAppError } from "../../src/errors/app-error.ts";
import { RedisRateLimiter } from "../../src/limits/redis-rate-limiter.ts";
import {
  checkTestRedis,
  createTestPrefix,
  deleteTestKeys,
  hasRedisServerBinary,
  startRedisServer,
} from "../cluster/redis-test-connection.ts";
import { findFreePort } from "../support/free-port.ts";
import { describeRateLimiterConformance } from "./rate-limiter-conformance.ts";

const redis = await checkTestRedis();
const prefix = createTestPrefix("rate-limiter");

/** Collects log lines as `level: message`. */
function createRecordingLogger() {
  const lines: string[] = [];
  const record = (level: string) => (_object: object, message?: string) => {
    lines.push(`${level}: ${message ?? ""}`);
  };
  return { lines, logger: { info: record("info"), warn: record("warn"), error: record("error") } };
}

const silent = createRecordingLogger().logger;

if ("url" in redis) {
  afterAll(() => deleteTestKeys(redis.url, prefix));

  describeRateLimiterConformance("redis", async () => {
    let offset = 0;
    const limiter = await RedisRateLimiter.connect({
      url: redis.url,
      // Each limiter its own buckets: the suite reuses bucket names across its cases.
      prefix: `${prefix}${randomUUID()}:`,
      logger: silent,
      clockOffsetMs: () => offset,
    });
    return {
      limiter,
      advance: async (milliseconds) => {
        offset += milliseconds;
      },
    };
  });

  describe("redis: an event loop held up past the command timeout", () => {
    it("takes Redis's answer that came meanwhile, under either policy, and logs no outage", async () => {
      for (const failurePolicy of ["fail-open", "fail-closed"] as const) {
        const { lines, logger } = createRecordingLogger();
        const limiter = await RedisRateLimiter.connect({
          url: redis.url,
          prefix: `${prefix}stall:${randomUUID()}:`,
          failurePolicy,
          logger,
          commandTimeoutMs: 100,
        });
        try {
          const take = limiter.take({ bucket: "requests:x", limit: 5, amount: 1 });
          // What a local model's load does to the loop: Redis answers within a millisecond,
          // and the answer waits in the socket until the loop comes back, after the timeout.
          const until = performance.now() + 400;
          while (performance.now() < until) {}
          expect(await take).toMatchObject({ allowed: true, remaining: 4 });
          // The next request asks Redis too (no rest after a failure that was none).
          expect(await limiter.take({ bucket: "requests:x", limit: 5, amount: 1 })).toMatchObject({
            allowed: true,
            remaining: 3,
          });
          expect(lines.filter((line) => line.startsWith("error:"))).toEqual([]);
        } finally {
          await limiter.close();
        }
      }
    });
  });

  describe("redis: the shared bucket", () => {
    it("is one bucket for every limiter on the same prefix, and concurrent takes never overdraw it", async () => {
      const shared = `${prefix}shared:`;
      const limiters = await Promise.all(
        [1, 2, 3].map(() => RedisRateLimiter.connect({ url: redis.url, prefix: shared, logger: silent })),
      );
      const results = await Promise.all(
        Array.from({ length: 90 }, (_, index) =>
          limiters[index % 3]!.take({ bucket: "requests:k", limit: 20, amount: 1 }),
        ),
      );
      // A few more may refill during the test: 20 per minute is one per 3 s.
      const allowed = results.filter((result) => result.allowed).length;
      expect(allowed).toBeGreaterThanOrEqual(20);
      expect(allowed).toBeLessThanOrEqual(21);
      await Promise.all(limiters.map((limiter) => limiter.close()));
    });

    it("deletes a bucket that is full again, and lets the others expire two minutes after they would be", async () => {
      const own = `${prefix}ttl:`;
      const limiter = await RedisRateLimiter.connect({ url: redis.url, prefix: own, logger: silent });
      await limiter.take({ bucket: "tokens:t", limit: 600, amount: 300 });
      const client = new Redis(redis.url);
      try {
        const ttl = await client.pttl(`${own}rate:tokens:t`);
        // 300 missing at 10 per second: full in 30 s, gone 2 minutes later.
        expect(ttl).toBeGreaterThan(149_000);
        expect(ttl).toBeLessThanOrEqual(150_000);
        await limiter.adjust({ bucket: "tokens:t", limit: 600, amount: 300 });
        expect(await client.exists(`${own}rate:tokens:t`)).toBe(0);
      } finally {
        client.disconnect();
        await limiter.close();
      }
    });
  });
}

describe("redis rate limiter when Redis is down", () => {
  it("fail-open (default): admits at once, reports full buckets, and logs the outage once", async () => {
    const { lines, logger } = createRecordingLogger();
    const limiter = await RedisRateLimiter.connect({
      url: `redis://127.0.0.1:${await findFreePort()}`,
      prefix: "tollgate-test:down:",
      logger,
    });
    const started = Date.now();
    for (let index = 0; index < 50; index++) {
      const result = await limiter.take({ bucket: "requests:x", limit: 2, amount: 1 });
      expect(result).toMatchObject({ allowed: true, limit: 2 });
      await limiter.adjust({ bucket: "tokens:x", limit: 100, amount: -5 });
    }
    expect(await limiter.peek({ bucket: "requests:x", limit: 2 })).toEqual({
      limit: 2,
      remaining: 2,
      resetMs: 0,
    });
    expect(Date.now() - started).toBeLessThan(1000);
    await limiter.close();
    const errors = lines.filter((line) => line.startsWith("error:"));
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatch(/Redis is unreachable \(rate limits\).*admitted without per-key rate limits/);
  });

  it("fail-closed: refuses with 503 and a clear message, without waiting", async () => {
    const { lines, logger } = createRecordingLogger();
    const limiter = await RedisRateLimiter.connect({
      url: `redis://127.0.0.1:${await findFreePort()}`,
      prefix: "tollgate-test:down:",
      failurePolicy: "fail-closed",
      logger,
    });
    const started = Date.now();
    for (let index = 0; index < 20; index++) {
      const error = await limiter
        .take({ bucket: "requests:x", limit: 2, amount: 1 })
        .catch((caught) => caught);
      expect(isAppError(error)).toBe(true);
      if (!isAppError(error)) return;
      expect(error.status).toBe(503);
      expect(error.code).toBe("store_unavailable");
      expect(error.retryAfterSeconds).toBeGreaterThan(0);
      expect(error.message).toMatch(/cannot reach its Redis.*until Redis is back/);
    }
    await expect(limiter.adjust({ bucket: "tokens:x", limit: 100, amount: 5 })).resolves.toBeUndefined();
    expect((await limiter.peek({ bucket: "requests:x", limit: 2 })).remaining).toBe(0);
    expect(Date.now() - started).toBeLessThan(1000);
    await limiter.close();
    expect(lines.filter((line) => line.startsWith("error:"))).toHaveLength(1);
  });
});

describe("redis rate limiter when Redis does not answer", () => {
  it("gives up on a command after the command timeout", async () => {
    // Accepts connections and never answers: a stalled or overloaded Redis.
    const silentServer = createServer((socket) => socket.on("data", () => {}));
    await new Promise<void>((resolve) => silentServer.listen(0, "127.0.0.1", resolve));
    const address = silentServer.address();
    if (typeof address !== "object" || address === null) throw new Error("no port");
    const { lines, logger } = createRecordingLogger();
    const started = Date.now();
    const limiter = await RedisRateLimiter.connect({
      url: `redis://127.0.0.1:${address.port}`,
      prefix: "tollgate-test:silent:",
      logger,
      commandTimeoutMs: 200,
    });
    const results = await Promise.all(
      Array.from({ length: 10 }, () => limiter.take({ bucket: "requests:x", limit: 2, amount: 1 })),
    );
    expect(results.every((result) => result.allowed)).toBe(true);
    expect(Date.now() - started).toBeLessThan(4000);
    await limiter.close();
    silentServer.close();
    expect(lines.filter((line) => line.startsWith("error:"))).toHaveLength(1);
  });

  it("leaves a Redis that did not answer alone for a while: the next requests do not wait for it", async () => {
    // Answers the client's name and ready check, then nothing: a Redis that stopped answering.
    let commands = 0;
    const info = "# Server\r\nredis_version:7.0.0\r\nloading:0\r\n";
    const silentServer = createServer((socket) =>
      socket.on("data", (data: Buffer) => {
        const text = data.toString();
        // One reply per command of the handshake, in order: CLIENT SETNAME/SETINFO, then INFO.
        for (const [, name] of text.matchAll(/\$\d+\r\n(setname|setinfo|info)\r\n/gi)) {
          socket.write(
            name?.toLowerCase() === "info" ? `$${Buffer.byteLength(info)}\r\n${info}\r\n` : "+OK\r\n",
          );
        }
        commands += (text.match(/EVAL/gi) ?? []).length;
      }),
    );
    await new Promise<void>((resolve) => silentServer.listen(0, "127.0.0.1", resolve));
    const address = silentServer.address();
    if (typeof address !== "object" || address === null) throw new Error("no port");
    const { logger } = createRecordingLogger();
    const limiter = await RedisRateLimiter.connect({
      url: `redis://127.0.0.1:${address.port}`,
      prefix: "tollgate-test:resting:",
      logger,
      commandTimeoutMs: 200,
    });
    const take = () => limiter.take({ bucket: "requests:x", limit: 2, amount: 1 });
    expect((await take()).allowed).toBe(true);
    const asked = commands;
    expect(asked).toBeGreaterThan(0);
    // Within the rest that follows, no request asks Redis (each would wait out the timeout).
    for (let index = 0; index < 10; index++) expect((await take()).allowed).toBe(true);
    expect(commands).toBe(asked);
    await limiter.close();
    silentServer.close();
  });
});

if (!hasRedisServerBinary) console.warn("skipping the Redis restart test: no redis-server binary on PATH");

describe.skipIf(!hasRedisServerBinary)("redis rate limiter across a Redis restart", () => {
  it("logs one line when Redis goes away and one when it is back, and limits again after", async () => {
    const port = await findFreePort();
    let server = await startRedisServer(port);
    onTestFinished(() => server.stop());
    const { lines, logger } = createRecordingLogger();
    const limiter = await RedisRateLimiter.connect({
      url: `redis://127.0.0.1:${port}`,
      prefix: "tollgate-test:restart:",
      failurePolicy: "fail-closed",
      logger,
    });
    const bucket = { bucket: "requests:r", limit: 1, amount: 1 };
    expect((await limiter.take(bucket)).allowed).toBe(true);
    expect((await limiter.take(bucket)).allowed).toBe(false);

    await server.stop();
    for (let index = 0; index < 10; index++) {
      await expect(limiter.take(bucket)).rejects.toMatchObject({ status: 503 });
    }
    await sleep(300);

    // A fresh Redis has lost the buckets: they start full again.
    server = await startRedisServer(port);
    let result: Awaited<ReturnType<typeof limiter.take>> | undefined;
    for (let attempt = 0; attempt < 60 && result === undefined; attempt++) {
      result = await limiter.take(bucket).catch(() => undefined);
      if (result === undefined) await sleep(100);
    }
    expect(result?.allowed).toBe(true);
    expect((await limiter.take(bucket)).allowed).toBe(false);
    await limiter.close();
    expect(lines.filter((line) => line.startsWith("error:"))).toHaveLength(1);
    expect(lines.filter((line) => /reachable again/.test(line))).toHaveLength(1);
  });
});
