import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { LogLevel } from "../../src/catalog/catalog.ts";
import { startServer } from "../../src/server.ts";
import { collectLogLines } from "../support/collect-log-lines.ts";
import { createTestConfig } from "../support/test-server.ts";

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** Starts a server at `logLevel`, sends it a request its key does not pass, and answers its log lines. */
async function logLinesAt(logLevel: LogLevel | undefined): Promise<{ msg: string; level: number }[]> {
  const folder = mkdtempSync(join(tmpdir(), "tollgate-log-level-"));
  cleanups.push(() => rmSync(folder, { recursive: true, force: true }));
  const { lines, destination } = collectLogLines<{ msg: string; level: number }>();
  const server = await startServer({
    config: createTestConfig({
      database: `sqlite:${join(folder, "tollgate.db")}`,
      models: [],
      adminKey: "test-admin-key",
      ...(logLevel === undefined ? {} : { logLevel }),
    }),
    logger: { destination },
  });
  cleanups.push(() => server.close());
  const response = await fetch(`${server.baseUrl}/models`, { headers: { authorization: "Bearer sk-wrong" } });
  expect(response.status).toBe(401);
  await response.text();
  await server.close();
  return lines;
}

describe("the config's log_level", () => {
  it("logs each request at info by default, and not at warn", async () => {
    const atDefault = await logLinesAt(undefined);
    expect(atDefault.filter((line) => line.msg === "request")).toHaveLength(1);
    expect(atDefault.every((line) => line.level >= 30)).toBe(true);
    const atWarn = await logLinesAt("warn");
    expect(atWarn.filter((line) => line.msg === "request")).toEqual([]);
    expect(atWarn.every((line) => line.level >= 40)).toBe(true);
  });

  it("writes nothing when silent", async () => {
    expect(await logLinesAt("silent")).toEqual([]);
  });
});
