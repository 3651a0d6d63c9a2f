/**
 * Regression (README "Use it"): the operator puts the printed admin key in TOLLGATE_ADMIN_KEY,
 * which the server also reads as `admin_key`, then revokes that key with `keys revoke`. The
 * restart from the same shell printed no new admin key and said nothing, and the admin API
 * answered 401 revoked to the only key the operator held. Now `keys revoke` says the variable
 * names the revoked key, and the restart makes a new admin key, prints it and names the variable.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { findFreePort } from "../support/free-port.ts";
import { runCli } from "../support/run-cli.ts";

const cli = join(import.meta.dirname, "../../src/cli.ts");
let folder: string;
let configFile: string;
const children: ChildProcess[] = [];

beforeAll(() => {
  folder = mkdtempSync(join(tmpdir(), "tollgate-admin-key-lockout-"));
  configFile = join(folder, "tollgate.yaml");
  writeFileSync(configFile, "database: sqlite:./tollgate.db\nmodels: []\n");
});

afterAll(() => {
  for (const child of children) child.kill("SIGKILL");
  rmSync(folder, { recursive: true, force: true });
});

/** This process's environment with only the given admin key and no outside database. */
function environment(adminKey: string | undefined): NodeJS.ProcessEnv {
  const { TOLLGATE_ADMIN_KEY: _adminKey, TOLLGATE_DATABASE_URL: _database, ...rest } = process.env;
  return adminKey === undefined ? rest : { ...rest, TOLLGATE_ADMIN_KEY: adminKey };
}

/** Starts `tollgate serve` until it listens: what it printed, and its stop. */
async function serve(adminKey: string | undefined) {
  const port = await findFreePort();
  const child = spawn(process.execPath, [cli, "serve", "--port", String(port), "--config", configFile], {
    stdio: ["ignore", "pipe", "pipe"],
    env: environment(adminKey),
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
    output,
    printedAdminKey: /admin key: +(sk-tg-\S+)/.exec(output)?.[1],
    listAccounts: async (key: string) => {
      const response = await fetch(`http://127.0.0.1:${port}/admin/accounts`, {
        headers: { authorization: `Bearer ${key}` },
      });
      await response.arrayBuffer();
      return response.status;
    },
    stop: async () => {
      child.kill("SIGTERM");
      await exited;
    },
  };
}

describe("revoking the admin key that TOLLGATE_ADMIN_KEY names", () => {
  it("is told by keys revoke, and the next start makes, prints and explains a new admin key", async () => {
    const first = await serve(undefined);
    const firstKey = first.printedAdminKey ?? "";
    await first.stop();
    expect(firstKey).toMatch(/^sk-tg-/);

    const revoked = runCli(["keys", "revoke", firstKey.split("-")[2] ?? "", "--config", configFile], {
      env: { TOLLGATE_ADMIN_KEY: firstKey },
      unset: ["TOLLGATE_DATABASE_URL", "TOLLGATE_CONFIG"],
    });
    expect(revoked.code, revoked.stderr).toBe(0);
    expect(revoked.stdout).toContain("TOLLGATE_ADMIN_KEY names this very key: no admin key works now.");

    const second = await serve(firstKey);
    try {
      const newKey = second.printedAdminKey ?? "";
      expect(newKey, second.output).toMatch(/^sk-tg-/);
      expect(newKey).not.toBe(firstKey);
      expect(second.output).toContain(
        "TOLLGATE_ADMIN_KEY names an admin key that was revoked or has expired: the admin API refuses it. Put the new admin key there, or remove it.",
      );
      expect(await second.listAccounts(newKey)).toBe(200);
      // A revoked key never works again, configured or not.
      expect(await second.listAccounts(firstKey)).toBe(401);
    } finally {
      await second.stop();
    }
  }, 60_000);
});
