import { type Command, Redis, type RedisOptions } from "ioredis";
import type { RedisOutageLog } from "./redis-outage-log.ts";

/** How long one Redis command may take before it fails (and the failure policy applies). */
export const DEFAULT_REDIS_COMMAND_TIMEOUT_MS = 1000;
/** How long connecting may take: the TCP connect, and again the handshake after it. */
const CONNECT_TIMEOUT_MS = 2000;
/** The longest pause between two reconnection attempts. */
const MAX_RECONNECT_DELAY_MS = 2000;

/** Options of {@link createRedisClient}. */
export interface RedisClientOptions {
  /** `redis://` or `rediss://` URL. */
  url: string;
  /** Where connection failures and recoveries are logged, once per outage. */
  outageLog: RedisOutageLog;
  /** Milliseconds a command may take; default {@link DEFAULT_REDIS_COMMAND_TIMEOUT_MS}. */
  commandTimeoutMs?: number;
  /**
   * A subscriber connection: commands sent while disconnected wait for the connection (only
   * `subscribe` is ever sent on one) and its subscriptions are restored after reconnecting.
   */
  subscriber?: boolean;
  /**
   * A subscriber connection is asked this often (milliseconds) whether it still answers; default
   * {@link SUBSCRIBER_CHECK_MS}.
   */
  subscriberCheckMs?: number;
}

/**
 * A Redis connection that never makes a request hang: commands fail at once while Redis is
 * unreachable (no offline queue, no retries) and after a short timeout when it does not answer,
 * while the connection keeps reconnecting in the background, forever, with a capped backoff.
 * Not connected yet: call {@link connectRedisClient}.
 */
export function createRedisClient(options: RedisClientOptions): Redis {
  const subscriber = options.subscriber === true;
  const redisOptions: RedisOptions = {
    lazyConnect: true,
    enableOfflineQueue: subscriber,
    maxRetriesPerRequest: subscriber ? null : 0,
    connectTimeout: CONNECT_TIMEOUT_MS,
    retryStrategy: (attempt) => Math.min(attempt * 100, MAX_RECONNECT_DELAY_MS),
    // Name the connection in `CLIENT LIST`, for operators.
    connectionName: subscriber ? "tollgate-subscriber" : "tollgate",
  };
  const redis = subscriber
    ? new Redis(options.url, redisOptions)
    : new TimedRedis(options.url, redisOptions, options.commandTimeoutMs ?? DEFAULT_REDIS_COMMAND_TIMEOUT_MS);
  // Without a listener ioredis prints every failed reconnection attempt.
  redis.on("error", (error: unknown) => options.outageLog.failed(error));
  redis.on("ready", () => options.outageLog.recovered());
  dropStalledHandshakes(redis, options.outageLog);
  if (subscriber)
    dropSilentSubscriber(redis, options.outageLog, options.subscriberCheckMs ?? SUBSCRIBER_CHECK_MS);
  return redis;
}

/** How often a subscriber connection is asked whether it still answers (see dropSilentSubscriber). */
const SUBSCRIBER_CHECK_MS = 5000;

/**
 * A subscriber connection sends no commands of its own after subscribing, so nothing would time
 * out on it: one that a network or proxy left silent without closing it heard nothing more, for
 * hours (until TCP keepalive gave up), and the replica missed every key change the others
 * published meanwhile (revocations then reached it through the 1-second key cache only, and a
 * body being sent by a revoked key was not cut). It is asked with a PING every `everyMs`
 * (allowed on a subscribed connection); one that has not answered by the next check is dropped,
 * and ioredis connects anew and subscribes again (whereupon every cached key is dropped, as after
 * any outage: redis-invalidation-bus.ts).
 */
function dropSilentSubscriber(redis: Redis, outageLog: RedisOutageLog, everyMs: number): void {
  /** The ping sent and not answered yet, by its number; `undefined` when none waits. */
  let waiting: number | undefined;
  let sent = 0;
  const drop = () => {
    if (waiting === undefined || redis.status !== "ready") return;
    waiting = undefined;
    outageLog.failed(
      new Error(`Redis did not answer a PING on the listening connection within ${everyMs} ms`),
    );
    // Destroyed: `disconnect()` would wait for a goodbye that a silent connection never sends.
    redis.stream.destroy();
  };
  const timer = setInterval(() => {
    if (redis.status !== "ready") {
      waiting = undefined;
      return;
    }
    // Decided in the check phase, after the loop has read its sockets, as a command's timeout is
    // (TimedRedis): an answer waiting there after the loop was held up wins.
    if (waiting !== undefined) {
      setImmediate(drop);
      return;
    }
    const number = ++sent;
    waiting = number;
    const answered = () => {
      if (waiting === number) waiting = undefined;
    };
    redis.ping().then(answered, answered);
  }, everyMs);
  // A check must not keep a process (the CLI) alive.
  timer.unref();
  redis.on("end", () => clearInterval(timer));
}

/**
 * A connection whose commands fail after a timeout, as with ioredis's `commandTimeout`, except
 * when the event loop was held up: ioredis's timer fires as soon as the loop comes back, before
 * the sockets are read (timers run first in each turn), so a command that Redis answered in a
 * millisecond failed when the loop had been blocked past the timeout (a local model loading holds
 * it for a second or more), and the limiter applied its failure policy to every request for the
 * next couple of seconds: no limits under fail-open, 503s under fail-closed. Here a lapsed
 * timeout is decided in the next check phase (`setImmediate`), which comes after the loop has
 * read its sockets: an answer already waiting there wins.
 */
class TimedRedis extends Redis {
  readonly #timeoutMs: number;
  /** When the first of the commands that timed out since the connection last answered did. */
  #silentSince: number | undefined;

  constructor(url: string, options: RedisOptions, timeoutMs: number) {
    super(url, options);
    this.#timeoutMs = timeoutMs;
    this.on("close", () => {
      this.#silentSince = undefined;
    });
  }

  override sendCommand(command: Command, stream?: Parameters<Redis["sendCommand"]>[1]): unknown {
    const sent = super.sendCommand(command, stream);
    const timer = setTimeout(() => {
      setImmediate(() => {
        if (command.isResolved) return;
        command.reject(new Error("Command timed out"));
        this.#timedOut();
      });
    }, this.#timeoutMs);
    // Answered, failed or refused at once (no connection): the timer goes.
    const stop = () => clearTimeout(timer);
    const answered = () => {
      stop();
      this.#silentSince = undefined;
    };
    command.promise.then(answered, stop);
    return sent;
  }

  /**
   * A connection whose commands have timed out for {@link SILENT_CONNECTION_DROP_MS} without one
   * answer between them is dropped, and the retry strategy connects anew. Regression: a
   * connection a network or proxy left silent without closing it (its bytes black-holed) was kept
   * for good, every command on it timing out, while a new connection would have worked: the
   * failure policy applied until TCP gave up, some 15 minutes (PostgreSQL's such connections were
   * closed already).
   */
  #timedOut(): void {
    const now = performance.now();
    this.#silentSince ??= now;
    if (now - this.#silentSince < SILENT_CONNECTION_DROP_MS || this.status !== "ready") return;
    this.#silentSince = undefined;
    // Destroyed: `disconnect()` would wait for a goodbye that a silent connection never sends.
    this.stream.destroy();
  }
}

/** How long a connection's commands may all time out before it is dropped (see TimedRedis). */
const SILENT_CONNECTION_DROP_MS = 5000;

/**
 * ioredis's `connectTimeout` covers only the TCP connect. A Redis that accepts the connection
 * and then does not answer (a paused process, a black-holed port) would keep the handshake
 * (`CLIENT SETNAME`, the `INFO` ready check) waiting forever on a connection without a command
 * timeout, the subscriber's, and with it `connect()` and the start of the server. A connection
 * that is not ready within the connect timeout after the TCP connect is dropped instead: that is
 * an outage like any other, and the retry strategy reconnects.
 */
function dropStalledHandshakes(redis: Redis, outageLog: RedisOutageLog): void {
  let timer: NodeJS.Timeout | undefined;
  const stop = () => clearTimeout(timer);
  redis.on("connect", () => {
    stop();
    timer = setTimeout(() => {
      if (redis.status !== "connect") return;
      outageLog.failed(
        new Error(`Redis accepted the connection but did not answer within ${CONNECT_TIMEOUT_MS} ms`),
      );
      // Destroyed, as ioredis does on its own connect timeout: `disconnect()` would wait for a
      // goodbye that a stalled Redis never sends.
      redis.stream.destroy();
    }, CONNECT_TIMEOUT_MS);
    // A pending check must not keep a process (the CLI) alive.
    timer.unref();
  });
  redis.on("ready", stop);
  redis.on("close", stop);
  redis.on("end", stop);
}

/**
 * Connects, waiting at most the connect timeout. An unreachable Redis is not an error here: it
 * has been logged, and the client keeps trying in the background.
 */
export async function connectRedisClient(redis: Redis): Promise<void> {
  if (redis.status !== "wait") return;
  await redis.connect().catch(() => {});
}

/**
 * Closes a client, politely when it is connected, at once otherwise, or when Redis does not answer
 * the goodbye within the command timeout. Regression: a subscriber's `QUIT` has no timeout of its
 * own, and one sent on a connection a network had left silent kept a shutdown waiting for good.
 */
export async function closeRedisClient(redis: Redis): Promise<void> {
  if (redis.status === "ready") {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<"late">((resolve) => {
      timer = setTimeout(() => resolve("late"), DEFAULT_REDIS_COMMAND_TIMEOUT_MS);
    });
    try {
      if ((await Promise.race([redis.quit(), late])) !== "late") return;
    } catch {
      // Fall through: drop the connection.
    } finally {
      clearTimeout(timer);
    }
  }
  redis.disconnect();
}
