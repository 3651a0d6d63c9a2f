import { createServer } from "node:net";
import { Redis } from "ioredis";
import { describe, expect, it, onTestFinished } from "vitest";
import {
  createLocalInvalidationBus,
  type InvalidationEvent,
  parseInvalidationEvent,
} from "../../src/cluster/invalidation-bus.ts";
import { notifyReplicas } from "../../src/cluster/notify-replicas.ts";
import { connectRedisInvalidationBus } from "../../src/cluster/redis-invalidation-bus.ts";
import {
  checkTestRedis,
  createTestPrefix,
  hasRedisServerBinary,
  startRedisServer,
} from "./redis-test-connection.ts";

const redis = await checkTestRedis();

function createRecordingLogger() {
  const lines: string[] = [];
  const record = (level: string) => (_object: object, message?: string) => {
    lines.push(`${level}: ${message ?? ""}`);
  };
  return { lines, logger: { info: record("info"), warn: record("warn"), error: record("error") } };
}

/** How long a poll for an event may wait before the test fails: a guard against a hang, not a bound. */
const EVENT_WAIT = { timeout: 10_000, interval: 5 };

describe.skipIf(!("url" in redis))("redis invalidation bus", () => {
  const url = "url" in redis ? redis.url : "";

  it("carries events to the other replicas on the same prefix, not to itself", async () => {
    const prefix = createTestPrefix("bus");
    const otherPrefix = createTestPrefix("bus");
    const { logger } = createRecordingLogger();
    const buses = await Promise.all(
      [1, 2, 3].map(() => connectRedisInvalidationBus({ url, prefix, logger })),
    );
    const other = await connectRedisInvalidationBus({ url, prefix: otherPrefix, logger });
    const received = buses.map(() => [] as InvalidationEvent[]);
    const otherReceived: InvalidationEvent[] = [];
    for (const [index, bus] of buses.entries()) {
      bus.subscribe((event) => {
        received[index]!.push(event);
      });
    }
    other.subscribe((event) => {
      otherReceived.push(event);
    });

    buses[0]!.publish({ type: "key-changed", publicId: "abc123" });
    buses[1]!.publish({ type: "account-credited", accountId: "acct-1" });
    await expect.poll(() => received[2]!.length, EVENT_WAIT).toBe(2);
    await expect.poll(() => received[0]!.length, EVENT_WAIT).toBe(1);
    await expect.poll(() => received[1]!.length, EVENT_WAIT).toBe(1);
    expect(received[2]).toEqual(
      expect.arrayContaining([
        { type: "key-changed", publicId: "abc123" },
        { type: "account-credited", accountId: "acct-1" },
      ]),
    );
    expect(received[0]).toEqual([{ type: "account-credited", accountId: "acct-1" }]);
    expect(received[1]).toEqual([{ type: "key-changed", publicId: "abc123" }]);
    // Redis delivers to a connection in the order it ran the publishes: once a marker published
    // after them has reached the other prefix's bus, nothing of the first prefix is still coming.
    const client = new Redis(url);
    onTestFinished(() => client.disconnect());
    const marker: InvalidationEvent = { type: "key-changed", publicId: "marker" };
    await client.publish(`${otherPrefix}invalidate`, JSON.stringify({ origin: "test", event: marker }));
    await expect.poll(() => otherReceived.length, EVENT_WAIT).toBeGreaterThan(0);
    expect(otherReceived).toEqual([marker]);
    await Promise.all([...buses, other].map((bus) => bus.close()));
  });

  it("ignores malformed messages, and hears a one-shot notification from the CLI", async () => {
    const prefix = createTestPrefix("bus");
    const { lines, logger } = createRecordingLogger();
    const bus = await connectRedisInvalidationBus({ url, prefix, logger });
    const received: InvalidationEvent[] = [];
    bus.subscribe((event) => received.push(event));
    const client = new Redis(url);
    await client.publish(`${prefix}invalidate`, "not json");
    await client.publish(`${prefix}invalidate`, JSON.stringify({ origin: "x", event: { type: "nope" } }));
    client.disconnect();
    await notifyReplicas({ url, prefix, logger, event: { type: "key-changed", publicId: "cli" } });
    await expect.poll(() => received.length, EVENT_WAIT).toBeGreaterThan(0);
    expect(received).toEqual([{ type: "key-changed", publicId: "cli" }]);
    expect(lines.filter((line) => line.startsWith("warn:"))).toHaveLength(2);
    await bus.close();
  });
});

describe("invalidation bus without Redis", () => {
  it("is a no-op on a single server", async () => {
    const bus = createLocalInvalidationBus();
    const received: InvalidationEvent[] = [];
    bus.subscribe((event) => received.push(event));
    bus.publish({ type: "key-changed", publicId: "abc" });
    expect(received).toEqual([]);
    await bus.close();
  });

  it("starts, publishes and closes without hanging or throwing when Redis is unreachable", async () => {
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
    const address = probe.address();
    await new Promise((resolve) => probe.close(resolve));
    if (typeof address !== "object" || address === null) throw new Error("no port");
    const { lines, logger } = createRecordingLogger();
    const url = `redis://127.0.0.1:${address.port}`;
    const bus = await connectRedisInvalidationBus({ url, prefix: "tollgate-test:down:", logger });
    for (let index = 0; index < 20; index++) bus.publish({ type: "key-changed", publicId: "abc" });
    await notifyReplicas({
      url,
      prefix: "tollgate-test:down:",
      logger,
      event: { type: "key-changed", publicId: "x" },
    });
    await bus.close();
    // One line per connection (publishing, listening, and the CLI's), however many messages.
    expect(lines.filter((line) => line.startsWith("error:")).length).toBeLessThanOrEqual(3);
    expect(lines.some((line) => /Redis is unreachable \(invalidation/.test(line))).toBe(true);
  });

  it("reads only well-formed events", () => {
    expect(parseInvalidationEvent({ type: "key-changed", publicId: "a" })).toEqual({
      type: "key-changed",
      publicId: "a",
    });
    expect(parseInvalidationEvent({ type: "key-changed" })).toBeUndefined();
    expect(parseInvalidationEvent("key-changed")).toBeUndefined();
  });
});

describe.skipIf(!hasRedisServerBinary)("redis invalidation bus across a Redis restart", () => {
  it("subscribes again, tells the server to drop its whole cache, and carries events again", async () => {
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
    const address = probe.address();
    await new Promise((resolve) => probe.close(resolve));
    if (typeof address !== "object" || address === null) throw new Error("no port");
    const url = `redis://127.0.0.1:${address.port}`;
    let server = await startRedisServer(address.port);
    onTestFinished(() => server.stop());
    const { logger } = createRecordingLogger();
    let resubscribed = 0;
    const listening = await connectRedisInvalidationBus({
      url,
      prefix: "p:",
      logger,
      onResubscribed: () => {
        resubscribed++;
      },
    });
    const publishing = await connectRedisInvalidationBus({ url, prefix: "p:", logger });
    const received: InvalidationEvent[] = [];
    listening.subscribe((event) => {
      received.push(event);
    });

    await server.stop();
    publishing.publish({ type: "key-changed", publicId: "lost" });
    server = await startRedisServer(address.port);
    await expect.poll(() => resubscribed, EVENT_WAIT).toBeGreaterThan(0);
    expect(resubscribed).toBe(1);
    // The publishing side may still be reconnecting: send until one arrives.
    await expect
      .poll(
        () => {
          publishing.publish({ type: "key-changed", publicId: "after" });
          return received.length;
        },
        { ...EVENT_WAIT, interval: 50 },
      )
      .toBeGreaterThan(0);
    expect(received[0]).toEqual({ type: "key-changed", publicId: "after" });
    await Promise.all([listening.close(), publishing.close()]);
  });
});
