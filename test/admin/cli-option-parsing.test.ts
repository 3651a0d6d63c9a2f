/**
 * How the CLI reads its options. Regressions: a repeated option was taken silently, the last one
 * winning (`accounts create dupbal --balance 100 --balance 1` made the account with 1, `keys
 * create --account acme --account globex` made the key on globex, `--config a.yaml --config b.yaml`
 * acted on b's store); `-h` or `--help` as an option's value turned the command into help, exit
 * 0, so `accounts credit acme 1 --note -h` credited nothing (`--help` now does ask for help, and
 * no word starting with "--" is a value written apart: `--note --balance 5` took "--balance" as
 * the note and credited 5); `--config ""` was taken for no
 * `--config` and made a new default database; `--help=yes` was an "unknown option", `--seed -1`
 * and `--port -1` "needed a value", and `backup` without its argument did not name it.
 */
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { runAccountsCommand } from "../../src/admin/accounts-command.ts";
import { runBackupCommand } from "../../src/admin/backup-command.ts";
import { CliError } from "../../src/admin/cli-error.ts";
import { writeSubcommandHelp } from "../../src/admin/dispatch-subcommand.ts";
import { runKeysCommand } from "../../src/admin/keys-command.ts";
import { isHelpRequested, parseCommandArguments } from "../../src/admin/parse-command-arguments.ts";
import { openStore } from "../../src/store/open-store.ts";
import type { Store } from "../../src/store/store.ts";
import { makeTemporaryDirectory, newDatabaseUrl } from "../store/temporary-directory.ts";
import { runCli } from "../support/run-cli.ts";
import { collectOutput } from "./cli-output.ts";

const directory = makeTemporaryDirectory();
let store: Store;

beforeEach(async () => {
  store = await openStore(newDatabaseUrl(directory));
  await runAccountsCommand(store, ["create", "acme"], collectOutput());
  await runAccountsCommand(store, ["create", "globex"], collectOutput());
});

afterEach(async () => {
  await store.close();
});

async function accounts(...argv: string[]): Promise<string[]> {
  const out = collectOutput();
  await runAccountsCommand(store, argv, out);
  return out.lines;
}

async function keys(...argv: string[]): Promise<string[]> {
  const out = collectOutput();
  await runKeysCommand(store, argv, out);
  return out.lines;
}

const serveLike = {
  options: { port: { type: "string" }, "all-models": { type: "boolean" }, account: { type: "string" } },
  positionals: 0,
  usage: "tollgate example [--port N] [--all-models] [--account NAME|ID]",
} as const;

describe("an option given twice", () => {
  it("is refused, and the account is not created (regression: the last --balance won)", async () => {
    await expect(accounts("create", "dupbal", "--balance", "100", "--balance", "1")).rejects.toThrow(
      new CliError(
        "--balance is given twice; give it once.\nUsage: tollgate accounts create NAME [--balance AMOUNT]",
      ),
    );
    expect(await store.getAccountByName("dupbal")).toBeUndefined();
  });

  it("is refused, and no key is made (regression: the key was made on the last --account)", async () => {
    await expect(keys("create", "--account", "acme", "--account", "globex")).rejects.toThrow(
      /^--account is given twice; give it once\.\nUsage: tollgate keys create/,
    );
    expect(await keys("list")).toEqual([
      "No keys yet. Create one with `tollgate keys create --account NAME`.",
    ]);
  });

  it("is refused whether written --option VALUE or --option=VALUE, and counted past two", () => {
    expect(() => parseCommandArguments(["--port", "1", "--port=2"], serveLike)).toThrow(
      /^--port is given twice/,
    );
    expect(() => parseCommandArguments(["--all-models", "--all-models", "--all-models"], serveLike)).toThrow(
      /^--all-models is given 3 times; give it once\./,
    );
  });

  it("is not an option after --", () => {
    expect(parseCommandArguments(["--port", "1", "--", "--port"], { ...serveLike, positionals: 1 })).toEqual({
      values: { port: "1" },
      positionals: ["--port"],
    });
  });
});

describe("-h and --help after an option that takes a value", () => {
  it("-h is that value: the credit is written with the note (regression: usage printed, exit 0)", async () => {
    await accounts("credit", "acme", "1", "--note", "-h");
    const account = await store.getAccountByName("acme");
    expect(account?.balanceNano).toBe(1_000_000_000n);
    const notes = (await store.listCredits(account?.id ?? "")).map((credit) => credit.note);
    expect(notes).toEqual(["-h"]);
  });

  it("-h is that value for a key's name, which the name rules then judge", async () => {
    const lines = await keys("create", "--account", "acme", "--name", "-h");
    expect(lines).toContain("name:      -h");
  });

  it("--help asks for help and changes nothing (regression: the key was renamed to --help)", async () => {
    const created = await keys("create", "--account", "acme", "--name", "ci");
    const id = /^public id: (\S+)$/m.exec(created.join("\n"))?.[1] ?? "";
    expect(id).not.toBe("");
    expect(await keys("update", id, "--name", "--help")).toEqual([
      expect.stringMatching(/^Usage: tollgate keys update /),
    ]);
    expect(await accounts("credit", "acme", "5", "--note", "--help")).toEqual([
      expect.stringMatching(/^Usage: tollgate accounts credit /),
    ]);
    expect((await store.getAccountByName("acme"))?.balanceNano).toBe(0n);
    expect(await keys("list")).toContainEqual(expect.stringMatching(/\bci\b/));
    expect(await keys("list")).not.toContainEqual(expect.stringContaining("--help"));
  });

  it("another long option is no value: the value is missing (regression: credited with note '--balance')", async () => {
    await expect(accounts("credit", "acme", "--note", "--balance", "5")).rejects.toThrow(
      /^Option '--note' needs a value \(write --option=VALUE for a value that starts with "-"\)\./,
    );
    expect(() => parseCommandArguments(["--account", "--bogus"], serveLike)).toThrow(
      /^Option '--account' needs a value/,
    );
    expect(parseCommandArguments(["--account=--bogus"], serveLike).values).toEqual({ account: "--bogus" });
    expect((await store.getAccountByName("acme"))?.balanceNano).toBe(0n);
    expect(await store.listCredits((await store.getAccountByName("acme"))?.id ?? "")).toEqual([]);
  });

  it("still ask for help where an option may stand, after a value or a flag", () => {
    const usage = {
      create: "tollgate keys create --account NAME|ID [--name N]",
      update: "tollgate keys update ID [--all-models]",
    };
    for (const argv of [
      ["create", "--account", "acme", "--help"],
      ["create", "--account=acme", "-h"],
      ["create", "--name", "x", "--account", "acme", "-h"],
      ["update", "x", "--all-models", "-h"],
    ]) {
      const out = collectOutput();
      expect(writeSubcommandHelp({ group: "keys", usage, argv, out })).toBe(true);
      expect(out.lines).toHaveLength(1);
    }
    expect(
      writeSubcommandHelp({ group: "keys", usage, argv: ["create", "--name", "-h"], out: collectOutput() }),
    ).toBe(false);
  });

  it("-h is a value whatever follows, and an option of the command is no value", () => {
    expect(isHelpRequested(["--account", "-h"], serveLike.usage)).toBe(false);
    expect(isHelpRequested(["--account", "--help"], serveLike.usage)).toBe(true);
    expect(isHelpRequested(["--account", "--all-models", "-h"], serveLike.usage)).toBe(true);
    expect(() => parseCommandArguments(["--account", "--port", "1"], serveLike)).toThrow(
      /^Option '--account' needs a value/,
    );
  });
});

describe("messages about an option's value", () => {
  it("a negative number is the option's value, for the command to judge (regression: 'needs a value')", () => {
    expect(parseCommandArguments(["--port", "-1"], serveLike).values).toEqual({ port: "-1" });
  });

  it("--help=yes: --help takes no value (regression: 'Unknown option')", async () => {
    await expect(accounts("create", "x", "--help=yes")).rejects.toThrow(
      /^--help takes no value: write --help alone for the usage\./,
    );
    expect(() => parseCommandArguments(["--help=yes"], serveLike)).toThrow(/^--help takes no value/);
  });

  it("a flag given a value takes no value (it 'needed a value')", () => {
    expect(() => parseCommandArguments(["--all-models=yes"], serveLike)).toThrow(
      /^Option '--all-models' takes no value\./,
    );
  });

  it("backup without its argument names it", async () => {
    await expect(runBackupCommand([], undefined, collectOutput())).rejects.toThrow(
      new CliError("Missing argument FILE|FOLDER/.\nUsage: tollgate backup FILE|FOLDER/"),
    );
  });
});

describe("tollgate --config", () => {
  const folders: string[] = [];
  afterEach(() => {
    for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
  });

  /** Runs `args` in a new folder holding a.yaml, b.yaml and `files` (name to text). */
  function runInFolder(args: string[], files: Record<string, string> = {}) {
    const folder = mkdtempSync(join(tmpdir(), "tollgate-cli-options-"));
    folders.push(folder);
    writeFileSync(join(folder, "a.yaml"), "database: sqlite:./a.db\nmodels: []\n");
    writeFileSync(join(folder, "b.yaml"), "database: sqlite:./b.db\nmodels: []\n");
    for (const [name, text] of Object.entries(files)) writeFileSync(join(folder, name), text);
    const result = runCli(args, {
      cwd: folder,
      unset: ["TOLLGATE_CONFIG", "TOLLGATE_DATABASE_URL", "TOLLGATE_REDIS_URL"],
    });
    return { ...result, files: readdirSync(folder).sort() };
  }

  it.each([
    ["an empty path", ["--config", "", "accounts", "list"]],
    ["--config= with nothing after it", ["--config=", "accounts", "list"]],
  ])("refuses %s rather than make the default database (regression)", (_case, args) => {
    const result = runInFolder(args);
    expect(result).toMatchObject({ code: 1, stdout: "", stderr: "tollgate: --config needs a file path\n" });
    expect(result.files).toEqual(["a.yaml", "b.yaml"]);
  });

  // Regression: the word after --config was its path whatever it was: `--config --help` read a
  // file named --help, and `--config --format json`, with such a file there, made ./data/tollgate.db.
  it("takes no word starting with -- for the config's path", () => {
    const refused = runInFolder(["accounts", "list", "--config", "--format", "json"], {
      "--format": "database: sqlite:./format.db\nmodels: []\n",
    });
    expect(refused).toMatchObject({
      code: 1,
      stdout: "",
      stderr: 'tollgate: --config needs a file path (write --config=FILE for one that starts with "--")\n',
    });
    expect(refused.files).toEqual(["--format", "a.yaml", "b.yaml"]);
    const help = runInFolder(["accounts", "list", "--config", "--help"]);
    expect(help).toMatchObject({ code: 0, stderr: "" });
    expect(help.stdout).toMatch(/^Usage: tollgate accounts/);
    expect(help.files).toEqual(["a.yaml", "b.yaml"]);
  });

  it("refuses --config given twice, and opens neither store (regression: b's was used)", () => {
    const result = runInFolder(["--config", "a.yaml", "accounts", "list", "--config=b.yaml"]);
    expect(result).toMatchObject({
      code: 1,
      stdout: "",
      stderr: "tollgate: --config is given twice; give it once\n",
    });
    expect(result.files).toEqual(["a.yaml", "b.yaml"]);
  });

  it("usage and serve read -h after a value-taking option as that value, not as help", () => {
    // `usage --account -h`: the account named "-h", which does not exist.
    const usage = runInFolder(["--config", "a.yaml", "usage", "--account", "-h"]);
    expect(usage).toMatchObject({ code: 1, stdout: "" });
    expect(usage.stderr).toMatch(/No account has the name or id "-h"/);
    expect(runInFolder(["--config", "a.yaml", "usage", "-h"]).stdout).toMatch(/^Usage: tollgate usage/);
    expect(runInFolder(["serve", "--host", "x", "--help"]).stdout).toMatch(/^Usage: tollgate serve/);
  });

  it("help before a command prints its usage and runs nothing, whatever follows (regression: it credited)", () => {
    for (const help of ["help", "-h"]) {
      const result = runInFolder(["--config", "a.yaml", help, "accounts", "credit", "acme", "5", "--note"]);
      expect(result).toMatchObject({ code: 0, stderr: "" });
      expect(result.stdout).toMatch(/^Usage: tollgate accounts credit /);
      expect(result.files).toEqual(["a.yaml", "b.yaml"]);
    }
  });

  it("the main help shows backup's FOLDER/", () => {
    expect(runInFolder(["help"]).stdout).toContain("  backup FILE|FOLDER/ ");
  });
});
