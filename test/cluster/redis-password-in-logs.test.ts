import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { startServer } from "../../src/server.ts";
import { startMockUpstream } from "../engine/openai/mock-upstream.ts";
import { createTestConfig, createUpstreamModelEntry } from "../support/test-server.ts";
import { checkTestRedis, createTestPrefix } from "./redis-test-connection.ts";

/**
 * A Redis URL whose password the server refuses (a rotated or mistyped password): the server logs
 * the outage, and nothing of the password. ioredis puts the failed command, `AUTH` and its
 * arguments, on the error, and the logger wrote every field of it.
 */
const redis = await checkTestRedis();
const PASSWORD = "correct-horse-battery-staple-7d1f";
let folder: string;

beforeAll(() => {
  folder = mkdtempSync(join(tmpdir(), "tollgate-redis-password-"));
});

afterAll(() => {
  rmSync(folder, { recursive: true, force: true });
});

describe.skipIf("skipped" in redis)("a Redis that refuses the URL's password", () => {
  it("logs that Redis is unreachable and the refused command, never the password", async () => {
    const upstream = await startMockUpstream();
    onTestFinished(() => upstream.close());
    const url = new URL("url" in redis ? redis.url : "redis://127.0.0.1:6379");
    url.username = "tollgate-test-nobody";
    url.password = PASSWORD;
    const logs = new PassThrough();
    let logText = "";
    logs.on("data", (chunk: Buffer) => {
      logText += chunk.toString();
    });
    const saved = process.env.TOLLGATE_REDIS_PREFIX;
    process.env.TOLLGATE_REDIS_PREFIX = createTestPrefix("password");
    try {
      const server = await startServer({
        config: createTestConfig({
          database: `sqlite:${join(folder, "tollgate.db")}`,
          redis: url.toString(),
          adminKey: "test-admin-key",
          models: [createUpstreamModelEntry("remote", upstream.baseUrl)],
        }),
        logger: { level: "info", destination: logs },
      });
      onTestFinished(() => server.close());
    } finally {
      if (saved === undefined) delete process.env.TOLLGATE_REDIS_PREFIX;
      else process.env.TOLLGATE_REDIS_PREFIX = saved;
    }

    await expect.poll(() => logText, { timeout: 10_000 }).toMatch(/Redis is unreachable/);
    const outages = logText
      .split("\n")
      .filter((line) => line.includes("Redis is unreachable"))
      .map((line) => JSON.parse(line) as { msg: string; err?: { command?: unknown } });
    expect(outages.length).toBeGreaterThan(0);
    for (const outage of outages) {
      expect(outage.msg).toMatch(/WRONGPASS/);
      expect(outage.msg).not.toMatch(/\.\./);
    }
    expect(outages.some((outage) => JSON.stringify(outage.err?.command) === '{"name":"auth"}')).toBe(true);
    expect(logText).not.toContain(PASSWORD);
  });
});
