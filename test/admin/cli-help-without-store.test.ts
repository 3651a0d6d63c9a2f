/**
 * `--help` on the commands that use the store answers from the arguments alone: it neither reads
 * the config nor opens (or creates) the store, so it works in an empty folder, beside a broken
 * config and without a reachable database. Regression: `keys --help` created ./data/tollgate.db,
 * and `accounts create --help` beside an invalid tollgate.yaml printed its errors and exited 1.
 */
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { runCli } from "../support/run-cli.ts";

/** The folders a test made (one may run the CLI in several): all removed after it. */
const folders: string[] = [];

afterEach(() => {
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
});

/** Runs the CLI in a fresh empty folder, with `files` written there first. */
function runCliInFolder(
  args: string[],
  options: { files?: Record<string, string>; env?: NodeJS.ProcessEnv } = {},
) {
  const folder = mkdtempSync(join(tmpdir(), "tollgate-cli-help-"));
  folders.push(folder);
  for (const [name, text] of Object.entries(options.files ?? {})) writeFileSync(join(folder, name), text);
  const result = runCli(args, {
    cwd: folder,
    ...(options.env === undefined ? {} : { env: options.env }),
    unset: ["TOLLGATE_CONFIG", "TOLLGATE_DATABASE_URL", "TOLLGATE_REDIS_URL"],
  });
  return { ...result, folder };
}

describe("--help on a store command needs neither the config nor the store", () => {
  it.each([
    [["keys", "--help"], "  tollgate keys create --account NAME|ID"],
    [["keys", "create", "--help"], "Usage: tollgate keys create --account NAME|ID"],
    [["accounts", "help"], "  tollgate accounts create NAME [--balance AMOUNT]"],
    [["accounts", "show", "-h"], "Usage: tollgate accounts show NAME|ID"],
    [["usage", "--help"], "Usage: tollgate usage [--account NAME|ID]"],
    [["audit", "-h"], "Usage: tollgate audit"],
    // Help first, the command after it: the command's usage, not the list of commands.
    [["help", "accounts"], "  tollgate accounts create NAME [--balance AMOUNT]"],
    [["--help", "keys", "create"], "Usage: tollgate keys create --account NAME|ID"],
    [["help", "usage"], "Usage: tollgate usage [--account NAME|ID]"],
    [["accounts", "--help", "credit"], "Usage: tollgate accounts credit NAME|ID AMOUNT"],
    [["accounts", "help", "show"], "Usage: tollgate accounts show NAME|ID"],
  ])("%j in an empty folder prints the usage and creates no database", (args, usage) => {
    const result = runCliInFolder(args);
    expect(result.stderr).toBe("");
    expect(result.stdout).toContain(usage);
    expect(result.code).toBe(0);
    expect(existsSync(join(result.folder, "data"))).toBe(false);
  });

  it("prints the usage beside an invalid tollgate.yaml", () => {
    const result = runCliInFolder(["accounts", "create", "--help"], {
      files: { "tollgate.yaml": "models: 12\nnot_a_setting: true\n" },
    });
    expect(result.stderr).toBe("");
    expect(result.stdout).toContain("Usage: tollgate accounts create NAME [--balance AMOUNT]");
    expect(result.code).toBe(0);
  });

  it("prints the usage when the PostgreSQL database cannot be reached", () => {
    const result = runCliInFolder(["usage", "--help"], {
      env: { TOLLGATE_DATABASE_URL: "postgres://postgres@127.0.0.1:1/test" },
    });
    expect(result.stderr).toBe("");
    expect(result.stdout).toContain("Usage: tollgate usage [--account NAME|ID]");
    expect(result.code).toBe(0);
  });

  it("still refuses an unknown subcommand, without opening the store", () => {
    for (const args of [
      ["keys", "rotate", "--help"],
      ["help", "keys", "rotate"],
    ]) {
      const result = runCliInFolder(args, {
        files: { "tollgate.yaml": "database: sqlite:./store.db\nmodels: []\n" },
      });
      expect(result.stderr).toContain("Unknown subcommand 'keys rotate'.");
      expect(result.code).toBe(1);
      expect(existsSync(join(result.folder, "store.db"))).toBe(false);
    }
  });
});
