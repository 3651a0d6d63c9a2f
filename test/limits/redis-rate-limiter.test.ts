import { randomUUID } from "node:crypto";
import { createServer } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { Redis } from "ioredis";
import { afterAll, describe, expect, it, onTestFinished } from "vitest";
import { runRedisScript } from "../../src/cluster/run-redis-script.ts";
import { isAppError } from "../../src/errors/app-error.ts";
import { REDIS_REST_MS, RedisRateLimiter } from "../../src/limits/redis-rate-limiter.ts";
import { TAKE_SCRIPT, TAKE_TOO_LATE } from "../../src/limits/token-bucket-scripts.ts";
import {
  checkTestRedis,
  createTestPrefix,
  deleteTestKeys,
  hasRedisServerBinary,
  startRedisServer,
} from "../cluster/redis-test-connection.ts";
import { startTcpProxy } from "../cluster/tcp-proxy.ts";
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
          // The first take reads Redis's clock first: done here, so the take below is one command.
          await limiter.take({ bucket: "requests:first", limit: 5, amount: 1 });
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

  describe("redis: a slow first reading of Redis's clock", () => {
    it("puts the first take's deadline early: refused as too late, it is sent again and takes", async () => {
      const { lines, logger } = createRecordingLogger();
      const limiter = await RedisRateLimiter.connect({
        url: redis.url,
        prefix: `${prefix}slow-reading:${randomUUID()}:`,
        failurePolicy: "fail-closed",
        logger,
        commandTimeoutMs: 200,
      });
      onTestFinished(() => limiter.close());
      // The first take reads Redis's clock (TIME), and the answer is read 400 ms late: Redis's
      // clock could be 400 ms behind, as far as the limiter can tell, so the take's deadline has
      // passed before it is sent.
      const take = limiter.take({ bucket: "requests:x", limit: 5, amount: 1 });
      const until = performance.now() + 400;
      while (performance.now() < until) {}
      expect(await take).toMatchObject({ allowed: true, remaining: 4 });
      expect(lines.filter((line) => line.startsWith("error:"))).toEqual([]);
    });
  });

  describe("redis: the shared bucket", () => {
    it("is one bucket for every limiter on the same prefix, and concurrent takes never overdraw it", async () => {
      const shared = `${prefix}shared:`;
      const limiters = await Promise.all(
        [1, 2, 3].map(() => RedisRateLimiter.connect({ url: redis.url, prefix: shared, logger: silent })),
      );
      const started = performance.now();
      const results = await Promise.all(
        Array.from({ length: 90 }, (_, index) =>
          limiters[index % 3]!.take({ bucket: "requests:k", limit: 20, amount: 1 }),
        ),
      );
      // The full bucket, plus what refilled while the takes ran: 20 per minute is one per 3 s.
      const refilled = Math.ceil((performance.now() - started) / 3_000);
      const allowed = results.filter((result) => result.allowed).length;
      expect(allowed).toBeGreaterThanOrEqual(20);
      expect(allowed).toBeLessThanOrEqual(20 + refilled);
      await Promise.all(limiters.map((limiter) => limiter.close()));
    });

    it("deletes a bucket that is full again, and lets the others expire two minutes after they would be", async () => {
      const own = `${prefix}ttl:`;
      const limiter = await RedisRateLimiter.connect({ url: redis.url, prefix: own, logger: silent });
      const client = new Redis(redis.url);
      try {
        const started = performance.now();
        await limiter.take({ bucket: "tokens:t", limit: 600, amount: 300 });
        const ttl = await client.pttl(`${own}rate:tokens:t`);
        // 300 missing at 10 per second: full in 30 s, gone 2 minutes later, less the time since.
        expect(ttl).toBeGreaterThanOrEqual(150_000 - Math.ceil(performance.now() - started) - 1);
        expect(ttl).toBeLessThanOrEqual(150_000);
        await limiter.adjust({ bucket: "tokens:t", limit: 600, amount: 300 });
        expect(await client.exists(`${own}rate:tokens:t`)).toBe(0);
      } finally {
        client.disconnect();
        await limiter.close();
      }
    });
  });

  describe("redis: the take script's deadline", () => {
    /** Runs the take script as the limiter does: limit 5, amount 1, then the deadline if any. */
    async function runTake(client: Redis, key: string, deadline: number[]): Promise<number[]> {
      return (await runRedisScript(client, TAKE_SCRIPT, [key], [5, 0, 1, ...deadline])) as number[];
    }

    /** Redis's clock in whole milliseconds. */
    async function readRedisClock(client: Redis): Promise<number> {
      const [seconds, microseconds] = await client.time();
      return Number(seconds) * 1000 + Math.floor(Number(microseconds) / 1000);
    }

    it("takes nothing after the deadline, and says so", async () => {
      const client = new Redis(redis.url);
      onTestFinished(() => client.disconnect());
      const key = `${prefix}deadline:${randomUUID()}`;
      const before = await readRedisClock(client);
      const reply = await runTake(client, key, [before - 1]);
      expect(reply.slice(0, 4)).toEqual([TAKE_TOO_LATE, 0, 0, 0]);
      // The reply ends with Redis's clock when it ran.
      expect(reply[4]).toBeGreaterThanOrEqual(before);
      expect(reply[4]).toBeLessThanOrEqual(await readRedisClock(client));
      // The bucket is as it was: none (a full one).
      expect(await client.exists(key)).toBe(0);
    });

    it("takes before the deadline, and without one (arguments of a limiter that sends none)", async () => {
      const client = new Redis(redis.url);
      onTestFinished(() => client.disconnect());
      const key = `${prefix}deadline:${randomUUID()}`;
      const inTime = await runTake(client, key, [(await readRedisClock(client)) + 60_000]);
      expect(inTime.slice(0, 4)).toEqual([1, 4, 12_000, 0]);
      const withoutDeadline = await runTake(client, key, []);
      expect(withoutDeadline.slice(0, 2)).toEqual([1, 3]);
      expect(withoutDeadline).toHaveLength(5);
    });
  });
}

describe("redis rate limiter when Redis is down", () => {
  /** A command timeout far longer than these tests run: a take that waited for one would show. */
  const LONG_COMMAND_TIMEOUT_MS = 30_000;

  it("fail-open (default): admits at once, reports full buckets, and logs the outage once", async () => {
    const { lines, logger } = createRecordingLogger();
    const limiter = await RedisRateLimiter.connect({
      url: `redis://127.0.0.1:${await findFreePort()}`,
      prefix: "tollgate-test:down:",
      logger,
      commandTimeoutMs: LONG_COMMAND_TIMEOUT_MS,
    });
    const started = performance.now();
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
    // Fifty takes, fifty adjusts and a peek: none of them waited out a command timeout.
    expect(performance.now() - started).toBeLessThan(LONG_COMMAND_TIMEOUT_MS);
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
      commandTimeoutMs: LONG_COMMAND_TIMEOUT_MS,
    });
    const started = performance.now();
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
    // Empty until the 503's retry-after, not a minute.
    expect(await limiter.peek({ bucket: "requests:x", limit: 2 })).toEqual({
      limit: 2,
      remaining: 0,
      resetMs: 5_000,
    });
    expect(performance.now() - started).toBeLessThan(LONG_COMMAND_TIMEOUT_MS);
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
    await limiter.close();
    silentServer.close();
    // The command timeout gave up, not the connection's handshake watchdog (2 s).
    expect(lines.filter((line) => line.startsWith("error:"))).toEqual([
      expect.stringMatching(/Redis is unreachable \(rate limits\): Command timed out/),
    ]);
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
        // The limiter reads Redis's clock (TIME) before its first take, answered here (as a
        // Redis that stalled later would have), then runs scripts, never answered.
        for (const _time of text.matchAll(/\r\nTIME\r\n/gi)) {
          const [seconds, micros] = [
            String(Math.floor(Date.now() / 1000)),
            String((Date.now() % 1000) * 1000),
          ];
          socket.write(`*2\r\n$${seconds.length}\r\n${seconds}\r\n$${micros.length}\r\n${micros}\r\n`);
        }
        commands += (text.match(/\r\n(EVALSHA|EVAL|TIME)\r\n/gi) ?? []).length;
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
    // After the rest, one request asks again; those that come while it waits do not ask.
    await sleep(REDIS_REST_MS + 50);
    const results = await Promise.all(Array.from({ length: 10 }, take));
    expect(results.every((result) => result.allowed)).toBe(true);
    expect(commands).toBe(asked + 1);
    await limiter.close();
    silentServer.close();
  });
});

describe.skipIf(!("url" in redis))("redis rate limiter when its connection drops", () => {
  it("limits again as soon as it has reconnected, not after the rest a failure began (regression)", async () => {
    if (!("url" in redis)) return;
    const target = new URL(redis.url);
    const proxy = await startTcpProxy({
      targetHost: target.hostname,
      targetPort: Number(target.port || 6379),
      mode: "forward",
    });
    onTestFinished(() => proxy.close());
    const limiter = await RedisRateLimiter.connect({
      url: `redis://127.0.0.1:${proxy.port}`,
      prefix: `${prefix}${randomUUID()}:`,
      failurePolicy: "fail-closed",
      logger: silent,
    });
    onTestFinished(() => limiter.close());
    const bucket = { bucket: "requests:dropped", limit: 1000, amount: 1 };
    expect((await limiter.take(bucket)).allowed).toBe(true);
    // The connection drops (Redis itself stays up: a proxy, a load balancer, CLIENT KILL).
    proxy.setMode("cut");
    proxy.setMode("forward");
    await sleep(20);
    await expect(limiter.take(bucket)).rejects.toMatchObject({ status: 503 });
    // Reconnected (ioredis comes back after 100 ms), well within the 2 s rest.
    for (let waited = 0; proxy.accepted < 2 && waited < 1500; waited += 20) await sleep(20);
    expect(proxy.accepted).toBe(2);
    await sleep(200);
    expect((await limiter.take(bucket)).allowed).toBe(true);
  });
});

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

describe.skipIf(!hasRedisServerBinary)("redis rate limiter when Redis runs a take after its deadline", () => {
  it("counts it as timed out, though its answer came before the limiter gave up, and it took nothing", async () => {
    const port = await findFreePort();
    const server = await startRedisServer(port);
    onTestFinished(() => server.stop());
    const url = `redis://127.0.0.1:${port}`;
    const own = "tollgate-test:late-take:";
    const { lines, logger } = createRecordingLogger();
    const limiter = await RedisRateLimiter.connect({
      url,
      prefix: own,
      failurePolicy: "fail-closed",
      logger,
      commandTimeoutMs: 200,
    });
    onTestFinished(() => limiter.close());
    const bucket = { bucket: "requests:late", limit: 10, amount: 1 };
    expect(await limiter.take(bucket)).toMatchObject({ allowed: true, remaining: 9 });

    // Redis stalls: a script that runs for 700 ms, while nothing else runs.
    const staller = new Redis(url);
    onTestFinished(() => staller.disconnect());
    const stall = staller.eval(
      "local t = redis.call('TIME') local start = t[1] * 1000 + t[2] / 1000 local now = start " +
        "while now - start < tonumber(ARGV[1]) do t = redis.call('TIME') now = t[1] * 1000 + t[2] / 1000 end return 1",
      0,
      700,
    );
    await sleep(50);
    const take = limiter.take(bucket).catch((error: unknown) => error);
    await sleep(20);
    // This process is held up past Redis's stall too: Redis runs the take after its deadline,
    // and the answer waits in the socket, where it wins over the command's timer.
    const until = performance.now() + 1000;
    while (performance.now() < until) {}
    expect(await take).toMatchObject({ status: 503, code: "store_unavailable" });
    await stall;
    expect(lines.filter((line) => line.startsWith("error:"))).toEqual([
      expect.stringMatching(/Redis ran it after its deadline/),
    ]);

    // The bucket is as the first take left it; after the rest, the limiter asks Redis again.
    await sleep(REDIS_REST_MS + 100);
    expect(await limiter.take(bucket)).toMatchObject({ allowed: true, remaining: 8 });
  }, 15_000);
});
