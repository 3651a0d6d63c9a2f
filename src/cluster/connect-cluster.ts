import { MemoryRateLimiter } from "../limits/memory-rate-limiter.ts";
import type { RateLimiter } from "../limits/rate-limiter.ts";
import type { ClusterLogger } from "./cluster-logger.ts";
import type { ClusterSettings } from "./cluster-settings.ts";
import { createLocalInvalidationBus, type InvalidationBus } from "./invalidation-bus.ts";

/** What a server shares with the other replicas: rate limits and cache invalidation. */
export interface Cluster {
  limiter: RateLimiter;
  bus: InvalidationBus;
  /** True when both go through Redis. */
  shared: boolean;
  /** Closes the Redis connections; call it after the last request has settled. */
  close(): Promise<void>;
}

/**
 * Without Redis (a single server): in-process token buckets and a bus with nobody to tell.
 * With Redis: buckets in Redis and invalidation over its pub/sub, for every replica that uses
 * the same Redis and prefix. An unreachable Redis does not stop the start (see
 * `RedisRateLimiter` for what limits do meanwhile).
 *
 * The Redis side (ioredis with it) is imported only when a Redis URL is configured: a single
 * server never loads it.
 */
export async function connectCluster(options: {
  redisUrl: string | undefined;
  settings: ClusterSettings;
  logger: ClusterLogger;
  /** Called when the invalidation subscription comes back after an outage. */
  onResubscribed?: () => void;
}): Promise<Cluster> {
  const { redisUrl, settings, logger } = options;
  if (redisUrl === undefined) {
    const limiter = new MemoryRateLimiter();
    const bus = createLocalInvalidationBus();
    return { limiter, bus, shared: false, close: () => limiter.close() };
  }
  const [{ RedisRateLimiter }, { connectRedisInvalidationBus }] = await Promise.all([
    import("../limits/redis-rate-limiter.ts"),
    import("./redis-invalidation-bus.ts"),
  ]);
  const [limiter, bus] = await Promise.all([
    RedisRateLimiter.connect({
      url: redisUrl,
      prefix: settings.prefix,
      failurePolicy: settings.failurePolicy,
      logger,
    }),
    connectRedisInvalidationBus({
      url: redisUrl,
      prefix: settings.prefix,
      logger,
      ...(options.onResubscribed === undefined ? {} : { onResubscribed: options.onResubscribed }),
    }),
  ]);
  return {
    limiter,
    bus,
    shared: true,
    async close() {
      await Promise.all([limiter.close(), bus.close()]);
    },
  };
}
