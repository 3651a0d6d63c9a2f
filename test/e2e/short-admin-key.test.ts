/**
 * A config's `admin_key` short enough to guess is warned of at start (found by a security review:
 * `admin_key: x` was taken silently, and failed guesses are not slowed down).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { MIN_ADMIN_KEY_LENGTH } from "../../src/auth/warn-of-short-admin-key.ts";
import { startServer } from "../../src/server.ts";
import { collectLogLines } from "../support/collect-log-lines.ts";
import { createTestConfig } from "../support/test-server.ts";

const folders: string[] = [];

afterEach(() => {
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
});

/** The warnings a server started with `adminKey` logs, once it has started and closed. */
async function startupWarnings(adminKey: string): Promise<{ msg: string; length?: number }[]> {
  const folder = mkdtempSync(join(tmpdir(), "tollgate-admin-key-"));
  folders.push(folder);
  const lines: { level: number; msg: string; length?: number }[] = [];
  const { destination } = collectLogLines(lines);
  const server = await startServer({
    config: {
      ...createTestConfig({ database: `sqlite:${join(folder, "tollgate.db")}`, models: [] }),
      adminKey,
    },
    logger: { level: "info", destination },
  });
  await server.close();
  return lines.filter((line) => line.level === 40);
}

describe("a short admin_key", () => {
  it("is warned of at start, with its length and the way to make a long one", async () => {
    const warnings = await startupWarnings("changeme");
    const warning = warnings.find((line) => line.msg.startsWith("admin_key is only 8 characters"));
    expect(warning).toMatchObject({ length: 8 });
    expect(warning?.msg).toContain("openssl rand -hex 32");
    // The key itself is never logged.
    expect(JSON.stringify(warnings)).not.toContain("changeme");
  });

  it("is not warned of when long enough", async () => {
    const warnings = await startupWarnings("k".repeat(MIN_ADMIN_KEY_LENGTH));
    expect(warnings.filter((line) => line.msg.startsWith("admin_key"))).toEqual([]);
  });
});
