import { randomUUID } from "node:crypto";
import type { ClusterLogger } from "./cluster-logger.ts";
import { closeRedisClient, connectRedisClient, createRedisClient } from "./create-redis-client.ts";
import {
  type InvalidationBus,
  type InvalidationEvent,
  type InvalidationListener,
  parseInvalidationEvent,
} from "./invalidation-bus.ts";
import { RedisOutageLog } from "./redis-outage-log.ts";

/** Options of {@link connectRedisInvalidationBus}. */
export interface RedisInvalidationBusOptions {
  /** `redis://` or `rediss://` URL. */
  url: string;
  /** The channel is `<prefix>invalidate`: replicas with the same Redis and prefix hear each other. */
  prefix: string;
  /** Outages are logged once; malformed messages at warn. */
  logger: ClusterLogger;
  /**
   * Called when the subscription is (re-)established after an outage: events published in
   * between were lost, so drop every cached row.
   */
  onResubscribed?: () => void;
  /** How often the listening connection is asked whether it still answers (tests); default 5 s. */
  subscriberCheckMs?: number;
}

/** How long the start waits for the subscription before it goes on without it. */
const SUBSCRIBE_WAIT_MS = 2000;

/**
 * The invalidation bus over Redis pub/sub: one connection publishes, one listens. Messages are
 * JSON `{origin, event}`; `origin` (random per bus) lets a replica skip its own events.
 */
export async function connectRedisInvalidationBus(
  options: RedisInvalidationBusOptions,
): Promise<InvalidationBus> {
  const channel = `${options.prefix}invalidate`;
  const origin = randomUUID();
  const listeners: InvalidationListener[] = [];
  const consequence = "revocations reach the other replicas through the 1-second key cache only";
  const publisher = createRedisClient({
    url: options.url,
    outageLog: new RedisOutageLog({ logger: options.logger, role: "invalidation, publishing", consequence }),
  });
  const subscriber = createRedisClient({
    url: options.url,
    subscriber: true,
    ...(options.subscriberCheckMs === undefined ? {} : { subscriberCheckMs: options.subscriberCheckMs }),
    outageLog: new RedisOutageLog({ logger: options.logger, role: "invalidation, listening", consequence }),
  });
  subscriber.on("message", (receivedChannel: string, message: string) => {
    if (receivedChannel !== channel) return;
    const event = readMessage(message, origin);
    if (event === "own") return;
    if (event === undefined) {
      options.logger.warn({ channel }, "ignored a malformed invalidation message");
      return;
    }
    for (const listener of listeners) listener(event);
  });
  let subscribedOnce = false;
  // ioredis subscribes again after every reconnection and then emits `ready`.
  subscriber.on("ready", () => {
    if (subscribedOnce) options.onResubscribed?.();
  });
  await Promise.all([connectRedisClient(publisher), connectRedisClient(subscriber)]);
  const subscribed = subscriber.subscribe(channel).then(
    () => {
      subscribedOnce = true;
    },
    () => {},
  );
  // Connected: wait for the subscription, so the replica hears every event once it serves.
  if (subscriber.status === "ready") {
    await Promise.race([
      subscribed,
      new Promise((resolve) => setTimeout(resolve, SUBSCRIBE_WAIT_MS).unref()),
    ]);
  }

  return {
    publish(event: InvalidationEvent): void {
      publisher.publish(channel, JSON.stringify({ origin, event })).catch(() => {
        // Logged once per outage by the connection; the cache TTL covers the lost message.
      });
    },
    subscribe(listener: InvalidationListener): void {
      listeners.push(listener);
    },
    async close(): Promise<void> {
      listeners.length = 0;
      await Promise.all([closeRedisClient(publisher), closeRedisClient(subscriber)]);
    },
  };
}

function readMessage(message: string, ownOrigin: string): InvalidationEvent | "own" | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(message);
  } catch {
    return undefined;
  }
  if (typeof parsed !== "object" || parsed === null) return undefined;
  const { origin, event } = parsed as { origin?: unknown; event?: unknown };
  if (origin === ownOrigin) return "own";
  return parseInvalidationEvent(event);
}
