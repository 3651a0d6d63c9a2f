/**
 * A backup's file takes its name only once it is a whole, checked copy: an interrupted
 * `tollgate backup` (Ctrl-C, a kill) left a file cut short under the backup's name, which jobs
 * that rotate or ship the newest backup took for one.
 */
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { openStore } from "../../src/store/open-store.ts";
import { backUpSqliteFile, copySqliteFile } from "../../src/store/sqlite/back-up-sqlite-file.ts";
import { makeAccount } from "./store-fixtures.ts";
import { makeTemporaryDirectory } from "./temporary-directory.ts";

const directory = makeTemporaryDirectory();
const source = path.join(directory, "ledger.db");

beforeAll(async () => {
  const store = await openStore(`sqlite:${source}`);
  await store.insertAccount(makeAccount({ name: "acme" }));
  await store.close();
});

/** The files of `directory` whose names start with `name`. */
function filesNamed(name: string): string[] {
  return readdirSync(directory)
    .filter((file) => file.startsWith(name))
    .sort();
}

describe("a backup's name", () => {
  it("appears only once the copy is whole and checked; meanwhile the copy is a .partial- file", async () => {
    const destination = path.join(directory, "backup-1.db");
    const copying = backUpSqliteFile(source, destination);
    // While the copy runs (an interrupt here left this name behind, cut short).
    expect(existsSync(destination)).toBe(false);
    // The copy's file, and the journal SQLite may already keep beside it.
    const partial = `backup-1.db.partial-${process.pid}`;
    expect(filesNamed("backup-1.db")[0]).toBe(partial);
    for (const file of filesNamed("backup-1.db")) expect([partial, `${partial}-journal`]).toContain(file);
    const { summary } = await copying;
    expect(summary.accounts).toBe(1);
    expect(filesNamed("backup-1.db")).toEqual(["backup-1.db"]);
  });

  it("the copy a restore keeps aside, likewise", async () => {
    const destination = path.join(directory, "aside-1.db");
    const copying = copySqliteFile(source, destination);
    expect(existsSync(destination)).toBe(false);
    await copying;
    expect(filesNamed("aside-1.db")).toEqual(["aside-1.db"]);
  });

  it("never replaces a file that took the name during the copy, and leaves no part behind", async () => {
    const destination = path.join(directory, "backup-2.db");
    const copying = backUpSqliteFile(source, destination);
    writeFileSync(destination, "someone else's file");
    await expect(copying).rejects.toMatchObject({ code: "EEXIST" });
    expect(readFileSync(destination, "utf8")).toBe("someone else's file");
    expect(filesNamed("backup-2.db")).toEqual(["backup-2.db"]);
  });

  it("with a next name, takes that one where another file took the name during the copy (regression: EEXIST)", async () => {
    const destination = path.join(directory, "backup-5.db");
    const next = path.join(directory, "backup-5-2.db");
    const copying = backUpSqliteFile(source, destination, () => next);
    writeFileSync(destination, "another backup of the same second");
    const { file, summary } = await copying;
    expect(file).toBe(next);
    expect(summary.accounts).toBe(1);
    expect(readFileSync(destination, "utf8")).toBe("another backup of the same second");
    expect(filesNamed("backup-5")).toEqual(["backup-5-2.db", "backup-5.db"]);
  });

  it("refuses a name that exists before copying anything", async () => {
    const destination = path.join(directory, "backup-3.db");
    writeFileSync(destination, "old");
    await expect(backUpSqliteFile(source, destination)).rejects.toMatchObject({ code: "EEXIST" });
    expect(filesNamed("backup-3.db")).toEqual(["backup-3.db"]);
  });

  it("removes a copy that fails its check, under either name", async () => {
    const notTollgate = path.join(directory, "other.db");
    const other = await import("node:sqlite").then(({ DatabaseSync }) => new DatabaseSync(notTollgate));
    other.exec("CREATE TABLE t (x)");
    other.close();
    const destination = path.join(directory, "backup-4.db");
    await expect(backUpSqliteFile(notTollgate, destination)).rejects.toThrow();
    expect(filesNamed("backup-4.db")).toEqual([]);
  });
});
