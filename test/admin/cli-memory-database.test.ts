/**
 * `database: "sqlite::memory:"` gives every process a ledger of its own that ends with it: a
 * store command run on one said "Created account m1", exit 0, and the account was gone at once;
 * a server on one kept a whole ledger that vanished at exit, silently. The store commands refuse
 * it (as backup and restore do), and `serve` keeps working on it but says so at start.
 */
import { once } from "node:events";
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isMemoryDatabase } from "../../src/admin/refuse-memory-database.ts";
import { runCli } from "../support/run-cli.ts";
import { killServeProcesses, startServeProcess } from "../support/serve-process.ts";

let folder: string;
let memoryConfig: string;

beforeAll(() => {
  folder = mkdtempSync(join(tmpdir(), "tollgate-memory-db-"));
  memoryConfig = join(folder, "mem.yaml");
  writeFileSync(
    memoryConfig,
    'server: { host: 127.0.0.1, port: 0 }\ndatabase: "sqlite::memory:"\nmodels: []\n',
  );
});

afterAll(() => {
  killServeProcesses();
  rmSync(folder, { recursive: true, force: true });
});

const UNSET = ["TOLLGATE_CONFIG", "TOLLGATE_DATABASE_URL", "TOLLGATE_ADMIN_KEY"];

describe("an in-memory database", () => {
  it("is refused by every store command, with exit 1 (audit 2: its 1 says the ledger disagrees) and nothing done", () => {
    const commands = [["accounts", "create", "m1"], ["keys", "list"], ["usage"], ["audit"]];
    for (const command of commands) {
      const result = runCli([...command, "--config", memoryConfig], { cwd: folder, unset: UNSET });
      expect(result.code, command.join(" ")).toBe(command[0] === "audit" ? 2 : 1);
      expect(result.stdout, command.join(" ")).toBe("");
      expect(result.stderr).toContain("The database is in memory (sqlite::memory:)");
      expect(result.stderr).toContain(`\`${command[0]}\` would work on an empty ledger of its own`);
      expect(result.stderr).toContain("such as sqlite:./data/tollgate.db");
    }
    // No file was made for it either.
    expect(readdirSync(folder)).toEqual(["mem.yaml"]);
  });

  it("is refused when TOLLGATE_DATABASE_URL names it", () => {
    const result = runCli(["accounts", "create", "m1"], {
      cwd: folder,
      unset: UNSET,
      env: { TOLLGATE_DATABASE_URL: "sqlite://:memory:" },
    });
    expect(result.code).toBe(1);
    expect(result.stdout).not.toContain("Created account");
    expect(result.stderr).toContain("The database is in memory");
  });

  it("still serves, but serve warns at start that the ledger ends with the process", async () => {
    const server = await startServeProcess(memoryConfig, { cwd: folder });
    const exited = once(server.child, "exit");
    server.child.kill("SIGTERM");
    await exited;
    const warning = server
      .output()
      .split("\n")
      .filter((line) => line.startsWith("{"))
      .map((line) => JSON.parse(line) as { level: number; msg: string })
      .find((line) => line.msg.includes("sqlite::memory:"));
    expect(warning?.level).toBe(40);
    expect(warning?.msg).toContain("balances and usage live in this process only and are lost when it exits");
  });

  it("is told from a file database by its URL", () => {
    expect(isMemoryDatabase("sqlite::memory:")).toBe(true);
    expect(isMemoryDatabase("sqlite://:memory:")).toBe(true);
    expect(isMemoryDatabase("sqlite:/data/:memory:")).toBe(false);
    expect(isMemoryDatabase("sqlite:/data/tollgate.db")).toBe(false);
    expect(isMemoryDatabase("postgres://db/:memory:")).toBe(false);
    expect(isMemoryDatabase("sqlite:")).toBe(false);
  });
});
