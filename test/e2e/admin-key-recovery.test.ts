/**
 * Regression: revoking the only admin key of a store with no `admin_key` in its config locked
 * the admin API out for good, silently. Now `keys revoke` says it was the last one, and the next
 * `tollgate serve` makes a new admin key and prints it.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { findFreePort } from "../support/free-port.ts";

const cli = join(import.meta.dirname, "../../src/cli.ts");

let folder: string;
let configFile: string;
const children: ChildProcess[] = [];

beforeAll(() => {
  folder = mkdtempSync(join(tmpdir(), "tollgate-admin-key-recovery-"));
  configFile = join(folder, "tollgate.yaml");
  writeFileSync(configFile, "database: sqlite:./tollgate.db\nmodels: []\n");
});

afterAll(() => {
  for (const child of children) child.kill("SIGKILL");
  rmSync(folder, { recursive: true, force: true });
});

/** The test's environment without an admin key or database from outside: the config decides. */
function environment(): NodeJS.ProcessEnv {
  const { TOLLGATE_ADMIN_KEY: _adminKey, TOLLGATE_DATABASE_URL: _database, ...rest } = process.env;
  return rest;
}

/** Runs the CLI to its end: its exit code and everything it wrote. */
function runCommand(...argv: string[]): Promise<{ code: number | null; output: string }> {
  const child = spawn(process.execPath, [cli, ...argv, "--config", configFile], {
    stdio: ["ignore", "pipe", "pipe"],
    env: environment(),
  });
  children.push(child);
  let output = "";
  child.stdout?.on("data", (data: Buffer) => {
    output += data.toString();
  });
  child.stderr?.on("data", (data: Buffer) => {
    output += data.toString();
  });
  return new Promise((resolve) => child.on("close", (code) => resolve({ code, output })));
}

/** Starts `tollgate serve` until it listens; returns the admin key it printed, if any. */
async function serve(): Promise<{
  origin: string;
  adminKey: string | undefined;
  output: string;
  stop: () => Promise<void>;
}> {
  const port = await findFreePort();
  const child = spawn(process.execPath, [cli, "serve", "--port", String(port), "--config", configFile], {
    stdio: ["ignore", "pipe", "pipe"],
    env: environment(),
  });
  children.push(child);
  let output = "";
  const exited = new Promise((resolve) => child.on("exit", resolve));
  await new Promise<void>((resolve, reject) => {
    const read = (data: Buffer) => {
      output += data.toString();
      if (output.includes("Tollgate listening")) resolve();
    };
    child.stdout?.on("data", read);
    child.stderr?.on("data", read);
    child.on("exit", () => reject(new Error(`serve ended before listening:\n${output}`)));
  });
  return {
    origin: `http://127.0.0.1:${port}`,
    adminKey: /admin key: +(sk-tg-\S+)/.exec(output)?.[1],
    output,
    stop: async () => {
      child.kill("SIGTERM");
      await exited;
    },
  };
}

async function listAccounts(origin: string, key: string): Promise<number> {
  const response = await fetch(`${origin}/admin/accounts`, { headers: { authorization: `Bearer ${key}` } });
  await response.arrayBuffer();
  return response.status;
}

describe("revoking the only admin key", () => {
  it("is announced by keys revoke, and the next serve makes and prints a new admin key", async () => {
    const first = await serve();
    const firstKey = first.adminKey ?? "";
    expect(firstKey).toMatch(/^sk-tg-/);
    expect(await listAccounts(first.origin, firstKey)).toBe(200);
    await first.stop();

    const revoked = await runCommand("keys", "revoke", firstKey.split("-")[2] ?? "");
    expect(revoked.code, revoked.output).toBe(0);
    expect(revoked.output).toContain("That was the last admin key in the store");
    expect(revoked.output).toContain("`tollgate serve` makes a new admin key and prints it once");

    const second = await serve();
    try {
      const secondKey = second.adminKey ?? "";
      expect(secondKey).toMatch(/^sk-tg-/);
      expect(secondKey).not.toBe(firstKey);
      expect(second.output).toContain("Created an admin key (the store had none that works).");
      expect(await listAccounts(second.origin, secondKey)).toBe(200);
      expect(await listAccounts(second.origin, firstKey)).toBe(401);
    } finally {
      await second.stop();
    }

    // A third start has an admin key that works: it makes none.
    const third = await serve();
    await third.stop();
    expect(third.adminKey).toBeUndefined();
  }, 60_000);
});
