/**
 * What `tollgate backup` makes of a target that is not a plain new file name: `backup bk/` with
 * no folder bk wrote a FILE named bk; `backup ""` said "<working folder> exists already". A
 * folder (ending in a slash, or existing) gets a new file named for the database and the time,
 * the folder made when missing; an empty name is refused, naming what to write.
 */
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fileStamp } from "../../src/store/sqlite/file-stamp.ts";
import { runCli } from "../support/run-cli.ts";

let folder: string;

beforeAll(() => {
  folder = realpathSync(mkdtempSync(join(tmpdir(), "tollgate-backup-targets-")));
  // The database the backups copy: made by a command, as an operator's first one would.
  expect(backup(["accounts", "create", "acme"]).code).toBe(0);
});

afterAll(() => {
  rmSync(folder, { recursive: true, force: true });
});

function backup(args: readonly string[]) {
  return runCli(args[0] === "accounts" ? args : ["backup", ...args], {
    cwd: folder,
    env: { TOLLGATE_DATABASE_URL: `sqlite:${join(folder, "ledger.db")}` },
    unset: ["TOLLGATE_CONFIG"],
  });
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

const STAMPED = /^ledger-\d{8}T\d{6}Z\.db$/;

describe("backup targets", () => {
  it("a missing folder written with a slash is made, and the copy goes into it", () => {
    const result = backup(["bk/"]);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    expect(statSync(join(folder, "bk")).isDirectory()).toBe(true);
    const files = readdirSync(join(folder, "bk"));
    expect(files).toHaveLength(1);
    expect(files[0]).toMatch(STAMPED);
    expect(result.stdout).toContain(
      `backed up ${join(folder, "ledger.db")} to ${join(folder, "bk", files[0]!)}`,
    );
    // Key hashes and balances, often shipped elsewhere: readable by its owner only (was 0644).
    expect(statSync(join(folder, "bk", files[0]!)).mode & 0o777).toBe(0o600);
  });

  it("an existing folder, named without a slash, gets a new file in it", () => {
    mkdirSync(join(folder, "existing"));
    const result = backup(["existing"]);
    expect(result.code).toBe(0);
    const files = readdirSync(join(folder, "existing"));
    expect(files).toHaveLength(1);
    expect(files[0]).toMatch(STAMPED);
  });

  it("a folder holding the file named for this second gets the next free name, the other untouched", () => {
    const busy = join(folder, "busy");
    mkdirSync(busy);
    // The names of this second and the next few: the backup runs within them.
    const now = Date.now();
    const taken = Array.from(
      { length: 10 },
      (_, seconds) => `ledger-${fileStamp(new Date(now + seconds * 1000))}.db`,
    );
    for (const name of taken) writeFileSync(join(busy, name), "an earlier backup");
    const result = backup(["busy/"]);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    const added = readdirSync(busy).filter((name) => !taken.includes(name));
    expect(added).toHaveLength(1);
    expect(added[0]).toMatch(/^ledger-\d{8}T\d{6}Z-2\.db$/);
    expect(result.stdout).toContain(`to ${join(busy, added[0]!)}`);
    for (const name of taken) expect(readFileSync(join(busy, name), "utf8")).toBe("an earlier backup");
  });

  it("an empty name is refused, saying what to write, and nothing is written", () => {
    const before = readdirSync(folder).sort();
    const result = backup([""]);
    expect(result.code).toBe(1);
    expect(result.stdout).toBe("");
    expect(result.stderr).toMatch(
      /^tollgate: Name the file to write the backup to: tollgate backup FILE\|FOLDER\/, such as backups\/tollgate-\d{8}T\d{6}Z\.db/,
    );
    expect(result.stderr).not.toContain("exists already");
    expect(readdirSync(folder).sort()).toEqual(before);
  });

  it("a damaged database is said so, with the way to rescue it, and no copy is left (was SQLite's bare words)", () => {
    const damaged = join(folder, "damaged.db");
    const whole = readFileSync(join(folder, "ledger.db"));
    writeFileSync(damaged, whole.subarray(0, Math.floor(whole.length * 0.6)));
    const result = runCli(["backup", join(folder, "damaged-copy.db")], {
      cwd: folder,
      env: { TOLLGATE_DATABASE_URL: `sqlite:${damaged}` },
      unset: ["TOLLGATE_CONFIG"],
    });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(`tollgate: The database ${damaged} is damaged (SQLite says: `);
    expect(result.stderr).toContain(`sqlite3 ${damaged} .recover`);
    expect(readdirSync(folder).filter((name) => name.startsWith("damaged-copy"))).toEqual([]);
  });

  it("a database whose damage only the copy's check finds is said so in a few lines, with the way to rescue it", () => {
    // One page of an index overwritten: SQLite copies it as it is, and its quick_check of the
    // copy reported the damage in one row of many lines, quoted whole, without the way on.
    const damaged = join(folder, "damaged-index.db");
    writeFileSync(damaged, readFileSync(join(folder, "ledger.db")));
    const db = new DatabaseSync(damaged);
    db.exec("PRAGMA journal_mode = DELETE");
    const pageSize = Number(db.prepare("PRAGMA page_size").get()?.page_size);
    const index = db
      .prepare("SELECT name, rootpage FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'usage' LIMIT 1")
      .get();
    db.close();
    const bytes = readFileSync(damaged);
    bytes.fill(0x5a, (Number(index?.rootpage) - 1) * pageSize, Number(index?.rootpage) * pageSize);
    writeFileSync(damaged, bytes);
    const result = runCli(["backup", join(folder, "damaged-index-copy.db")], {
      cwd: folder,
      env: { TOLLGATE_DATABASE_URL: `sqlite:${damaged}` },
      unset: ["TOLLGATE_CONFIG"],
    });
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(
      new RegExp(
        `^tollgate: The database ${escapeRegExp(damaged)} is damaged \\(SQLite's quick_check says: Tree \\d+ page \\d+: [^\\n]+\\)\\. No backup was written\\. Stop what uses it and restore it from a backup, or rescue what it holds with \`sqlite3 ${escapeRegExp(damaged)} \\.recover\`\\.\\n$`,
      ),
    );
    expect(readdirSync(folder).filter((name) => name.startsWith("damaged-index-copy"))).toEqual([]);
  });

  it("an existing file is still never replaced", () => {
    const result = backup(["ledger.db"]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain("exists already; a backup never replaces a file");
  });
});
