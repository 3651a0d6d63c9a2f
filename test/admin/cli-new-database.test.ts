/**
 * Regression: a CLI command run from another folder than the server's (no tollgate.yaml there,
 * so the built-in config and its ./data/tollgate.db) created a new, empty database and answered
 * "No keys yet", exit 0, without a word. A command that creates a SQLite database now says so on
 * stderr, naming the file; stdout stays what scripts parse, and a database that exists is opened
 * without it.
 */
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createPostgresTestSchema } from "../store/postgres-test-database.ts";
import { runCli } from "../support/run-cli.ts";

const folders: string[] = [];
afterEach(() => {
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
});

function makeFolder(): string {
  const folder = mkdtempSync(join(tmpdir(), "tollgate-cli-new-database-"));
  folders.push(folder);
  return folder;
}

const unset = ["TOLLGATE_CONFIG", "TOLLGATE_DATABASE_URL", "TOLLGATE_ADMIN_KEY", "TOLLGATE_REDIS_URL"];

describe("a CLI command that creates a new database", () => {
  it("says so on stderr when run where there is no config and no database, and not again", () => {
    const folder = makeFolder();
    const file = join(folder, "data", "tollgate.db");
    const first = runCli(["keys", "list"], { cwd: folder, unset });
    expect(first.code).toBe(0);
    expect(first.stdout).toBe("No keys yet. Create one with `tollgate keys create --account NAME`.\n");
    expect(first.stderr).toBe(
      `tollgate: created a new database at ${file} (no database was there). If you meant the server's database, run the command from the server's folder or pass --config FILE (there is no tollgate.yaml here, so it used the default database).\n`,
    );
    expect(existsSync(file)).toBe(true);

    const second = runCli(["keys", "list"], { cwd: folder, unset });
    expect(second.stderr).toBe("");
    expect(second.stdout).toBe(first.stdout);
  });

  it("is not made by a command whose arguments are refused, which leaves the warning to the next one (regression)", () => {
    const folder = makeFolder();
    const file = join(folder, "data", "tollgate.db");
    for (const args of [
      ["accounts", "crate", "bob"],
      ["accounts", "create"],
      ["accounts", "create", "bob", "--balance", "1,5"],
      ["keys", "revoke"],
      ["usage", "--since", "garbage"],
      ["audit", "--bogus"],
      // Checked against the catalogue and the clock, not the store (regression: made one first).
      ["keys", "create", "--account", "bob", "--models", "no-such-model"],
      ["keys", "create", "--account", "bob", "--expires", "2020-01-01"],
      ["keys", "update", "sk-tg-abc", "--models", "no-such-model"],
    ]) {
      const refused = runCli(args, { cwd: folder, unset });
      // audit's 1 says the ledger disagrees: a check that could not run exits 2.
      expect(refused.code).toBe(args[0] === "audit" ? 2 : 1);
      expect(refused.stderr).not.toContain("created a new database");
      expect(existsSync(file)).toBe(false);
    }
    const created = runCli(["accounts", "create", "bob", "--balance", "100"], { cwd: folder, unset });
    expect(created.code).toBe(0);
    expect(created.stderr).toContain(`tollgate: created a new database at ${file}`);
  });

  it("names the config file, or TOLLGATE_DATABASE_URL, that chose the database", () => {
    const folder = makeFolder();
    const config = join(folder, "tollgate.yaml");
    writeFileSync(config, "database: sqlite:./named.db\nmodels: []\n");
    const fromFile = runCli(["accounts", "list", "--config", config], { cwd: folder, unset });
    expect(fromFile.code).toBe(0);
    expect(fromFile.stderr).toBe(
      `tollgate: created a new database at ${join(folder, "named.db")} (no database was there). If you meant the server's database, check the database setting of ${config}.\n`,
    );
    const fromVariable = runCli(["usage"], {
      cwd: folder,
      unset,
      env: { TOLLGATE_DATABASE_URL: "sqlite:./variable.db" },
    });
    expect(fromVariable.code).toBe(0);
    expect(fromVariable.stderr).toContain(
      `created a new database at ${join(folder, "variable.db")} (no database was there). If you meant the server's database, check TOLLGATE_DATABASE_URL.`,
    );
  });
});

describe("a CLI command that creates a new store on PostgreSQL", () => {
  it("says so on stderr, naming the schema without the password, and not again (regression: a restored dump's schema left out, an empty store without a word)", async () => {
    const postgres = await createPostgresTestSchema();
    if ("skipped" in postgres) {
      console.warn(`Skipping the new PostgreSQL store's warning: ${postgres.skipped}.`);
      return;
    }
    try {
      const folder = makeFolder();
      const env = { TOLLGATE_DATABASE_URL: postgres.url };
      const first = runCli(["accounts", "list"], { cwd: folder, unset, env });
      expect(first.code).toBe(0);
      expect(first.stdout).toBe("No accounts yet. Create one with `tollgate accounts create NAME`.\n");
      const redacted = postgres.url.replace(/^postgres:\/\/([^:@/]*)(:[^@/]*)?@/, "postgres://$1@");
      expect(first.stderr).toContain(
        `tollgate: created a new, empty store in schema ${postgres.schema} of ${redacted} (no Tollgate tables were there). If you meant the server's database, check TOLLGATE_DATABASE_URL: a store's tables are in the schema its URL names with ?schema=NAME, a restored dump's in the one it was dumped from.\n`,
      );
      const second = runCli(["accounts", "list"], { cwd: folder, unset, env });
      expect(second.code).toBe(0);
      expect(second.stderr).not.toContain("created a new");
    } finally {
      await postgres.drop();
    }
  });
});
