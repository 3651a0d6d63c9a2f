import { randomUUID } from "node:crypto";
import type { ClusterLogger } from "./cluster-logger.ts";
import { closeRedisClient, connectRedisClient, createRedisClient } from "./create-redis-client.ts";
import type { InvalidationEvent } from "./invalidation-bus.ts";
import { RedisOutageLog } from "./redis-outage-log.ts";

/**
 * Publishes one invalidation from a process that is not a server (the CLI after `keys revoke`),
 * on the channel the servers' buses listen to. Never throws and waits at most a few seconds; an
 * unreachable Redis is logged, and the servers' 1-second key cache still applies the change.
 */
export async function notifyReplicas(options: {
  url: string;
  prefix: string;
  event: InvalidationEvent;
  logger: ClusterLogger;
}): Promise<void> {
  const redis = createRedisClient({
    url: options.url,
    outageLog: new RedisOutageLog({
      logger: options.logger,
      role: "invalidation, publishing",
      consequence: "servers see the change through their 1-second key cache only",
    }),
  });
  try {
    await connectRedisClient(redis);
    await redis
      .publish(`${options.prefix}invalidate`, JSON.stringify({ origin: randomUUID(), event: options.event }))
      .catch(() => {});
  } finally {
    await closeRedisClient(redis);
  }
}
