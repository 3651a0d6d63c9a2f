import { spawn, spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { Redis } from "ioredis";

/** The Redis the scale-out tests use: `TOLLGATE_TEST_REDIS_URL`, else the local one. */
export const REDIS_TEST_URL = process.env.TOLLGATE_TEST_REDIS_URL ?? "redis://127.0.0.1:6379";

/**
 * Whether the test Redis answers. Unreachable: a reason to print and skip, except on CI
 * (`CI=true`), where Redis is provisioned and its absence must fail the run.
 */
export async function checkTestRedis(): Promise<{ url: string } | { skipped: string }> {
  const redis = new Redis(REDIS_TEST_URL, {
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    connectTimeout: 1000,
    retryStrategy: () => null,
  });
  // The connection's own error (ECONNREFUSED, ...) says more than the rejected connect().
  let connectionError: Error | undefined;
  redis.on("error", (error: Error) => {
    connectionError ??= error;
  });
  try {
    await redis.connect();
    await redis.ping();
    return { url: REDIS_TEST_URL };
  } catch (error) {
    const cause = connectionError ?? error;
    const reason = `Redis is unreachable at ${REDIS_TEST_URL} (${cause instanceof Error ? cause.message : String(cause)})`;
    if (process.env.CI === "true") throw new Error(`${reason}; CI must provide it`);
    console.warn(`skipping Redis tests: ${reason}`);
    return { skipped: reason };
  } finally {
    redis.disconnect();
  }
}

/** A key prefix no other test run uses. */
export function createTestPrefix(name: string): string {
  return `tollgate-test:${name}:${randomUUID()}:`;
}

/** Deletes every key under `prefix`. */
export async function deleteTestKeys(url: string, prefix: string): Promise<void> {
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0 });
  redis.on("error", () => {});
  try {
    await redis.connect();
    let cursor = "0";
    do {
      const [next, keys] = await redis.scan(cursor, "MATCH", `${prefix}*`, "COUNT", 1000);
      if (keys.length > 0) await redis.del(...keys);
      cursor = next;
    } while (cursor !== "0");
  } finally {
    redis.disconnect();
  }
}

/**
 * True when a `redis-server` binary is on PATH (for tests that start and kill their own). Without
 * one, importing this module prints the reason those tests skip, except on CI (`CI=true`), where
 * the binary is provisioned (`.ci/run` starts Redis with it) and its absence fails the run.
 */
export const hasRedisServerBinary = checkRedisServerBinary();

function checkRedisServerBinary(): boolean {
  const probe = spawnSync("redis-server", ["--version"], { encoding: "utf8" });
  if (probe.status === 0) return true;
  const cause = probe.error?.message ?? `exit status ${probe.status}: ${probe.stderr.trim()}`;
  const reason = `no runnable redis-server on PATH (${cause})`;
  if (process.env.CI === "true") throw new Error(`${reason}; CI must provide it`);
  console.warn(`skipping the tests that start their own Redis: ${reason}`);
  return false;
}

/** A `redis-server` of a test's own, on 127.0.0.1:`port`, without persistence. */
export async function startRedisServer(port: number): Promise<{ stop(): Promise<void> }> {
  const child = spawn(
    "redis-server",
    ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
    { stdio: "ignore" },
  );
  const exited = new Promise((resolve) => child.once("exit", resolve));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    await exited;
  };
  const probe = new Redis(port, "127.0.0.1", {
    lazyConnect: true,
    retryStrategy: () => null,
    maxRetriesPerRequest: 0,
  });
  probe.on("error", () => {});
  try {
    for (let attempt = 0; attempt < 100; attempt++) {
      try {
        await probe.connect();
        await probe.ping();
        return { stop };
      } catch {
        await sleep(50);
      }
    }
  } finally {
    probe.disconnect();
  }
  await stop();
  throw new Error(`redis-server did not start on port ${port}`);
}
