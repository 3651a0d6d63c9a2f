/**
 * `TOLLGATE_DATABASE_URL` wins over the config file's `database:` for every CLI command (SPEC §2,
 * §11), and a command says so on stderr, once, naming the database it acts on (without its
 * password); stdout stays what scripts parse. Regression: `TOLLGATE_DATABASE_URL=sqlite:./lite.db
 * tollgate accounts show alice --config pg.yaml` showed the SQLite store's account without a word,
 * where `serve` warns. Also: `usage --help` says that dates alone and `--group-by day` are UTC.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { runCli } from "../support/run-cli.ts";

const folders: string[] = [];

afterEach(() => {
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
});

/** A folder with `config/tollgate.yaml` naming `database`, and `cli` to run commands in it. */
function makeSetUp(database: string) {
  const folder = mkdtempSync(join(tmpdir(), "tollgate-cli-database-override-"));
  folders.push(folder);
  mkdirSync(join(folder, "config"));
  const config = join(folder, "config", "tollgate.yaml");
  writeFileSync(config, `database: ${database}\n`);
  const cli = (args: string[], env: NodeJS.ProcessEnv = {}) =>
    runCli([...args, "--config", config], {
      cwd: folder,
      env,
      unset: ["TOLLGATE_CONFIG", "TOLLGATE_DATABASE_URL", "TOLLGATE_REDIS_URL"],
    });
  return { folder, config, cli };
}

describe("TOLLGATE_DATABASE_URL over the config's database", () => {
  it("acts on the variable's store and says so on stderr, once, leaving stdout clean", () => {
    const { folder, config, cli } = makeSetUp("sqlite:./config.db");
    expect(cli(["accounts", "create", "alice", "--balance", "1"]).code).toBe(0);
    const other = { TOLLGATE_DATABASE_URL: "sqlite:./other.db" };
    expect(cli(["accounts", "create", "alice", "--balance", "7"], other).code).toBe(0);

    const shown = cli(["accounts", "show", "alice", "--format", "json"], other);
    expect(shown.code).toBe(0);
    // The variable's store (balance 7), and stdout is the JSON alone.
    expect(JSON.parse(shown.stdout)).toMatchObject({ name: "alice", balance: "7" });
    const notice = `tollgate: TOLLGATE_DATABASE_URL replaces database in ${config} (the environment wins): acting on sqlite:${join(folder, "other.db")}, not on the config's database. Unset TOLLGATE_DATABASE_URL to use the config's.\n`;
    expect(shown.stderr).toBe(notice);

    // Every store command says it, and a failing one too (before its own error).
    const commands = [
      ["keys", "list"],
      ["usage", "--format", "csv"],
      ["audit"],
      ["accounts", "list"],
      ["backup", join(folder, "copy.db")],
    ];
    for (const args of commands) {
      const result = cli(args, other);
      expect(result.code, args.join(" ")).toBe(0);
      expect(result.stderr, args.join(" ")).toBe(notice);
      expect(result.stdout, args.join(" ")).not.toContain("TOLLGATE_DATABASE_URL");
    }
    const missing = cli(["accounts", "show", "nobody"], other);
    expect(missing.code).toBe(1);
    expect(missing.stderr.startsWith(notice)).toBe(true);
    expect(missing.stderr.split(notice).length).toBe(2);
  });

  it("says nothing when the variable names the config's own database, written otherwise", () => {
    // The file's relative path is its folder's; the variable's, the working folder's.
    const { folder, cli } = makeSetUp("sqlite:./same.db");
    // Made first: a command that creates the database says that (cli-new-database.test.ts).
    expect(cli(["accounts", "list"]).code).toBe(0);
    const result = cli(["accounts", "list"], {
      TOLLGATE_DATABASE_URL: `sqlite:${join(folder, "config", "same.db")}`,
    });
    expect(result.code).toBe(0);
    expect(result.stderr).toBe("");
  });

  it("says so when the same text names another file (relative to another folder)", () => {
    const { folder, cli } = makeSetUp("sqlite:./same.db");
    const result = cli(["accounts", "list"], { TOLLGATE_DATABASE_URL: "sqlite:./same.db" });
    expect(result.code).toBe(0);
    expect(result.stderr).toContain(
      `acting on sqlite:${join(folder, "same.db")}, not on the config's database`,
    );
  });

  it("never shows the password of the variable's PostgreSQL URL", () => {
    const { cli } = makeSetUp("sqlite:./config.db");
    // Nothing listens on port 1: the command fails, after the notice.
    const result = cli(["accounts", "list"], {
      TOLLGATE_DATABASE_URL: "postgres://operator:pa55-w0rd-s3cret@127.0.0.1:1/tollgate?schema=prod",
    });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(
      "acting on postgres://operator@127.0.0.1:1/tollgate?schema=prod, not on the config's database",
    );
    expect(result.stderr).not.toContain("pa55-w0rd-s3cret");
  });
});

// Regression: `usage --format json` wrote its `[` before the store was opened, and a store that
// could not be opened left that on stdout, with nothing to say the output was cut short.
describe("usage on a store that cannot be opened", () => {
  it.each(["json", "csv", "table"])("writes nothing on stdout as %s", (format) => {
    const { cli } = makeSetUp("sqlite:./config.db");
    const result = cli(["usage", "--format", format], {
      TOLLGATE_DATABASE_URL: "postgres://postgres@127.0.0.1:1/test?schema=nowhere",
    });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain("Could not open the PostgreSQL store");
    expect(result.stdout).toBe("");
  });
});

describe("usage --help", () => {
  it("says that dates alone and --group-by day are UTC", () => {
    const result = runCli(["usage", "--help"]);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^Usage: tollgate usage \[--account/);
    expect(result.stdout).toContain("a date alone, which means midnight UTC");
    expect(result.stdout).toContain("--group-by day totals per UTC day");
  });
});
