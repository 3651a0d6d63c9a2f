/**
 * A new SQLite database, and the -wal and -shm files SQLite keeps beside it, are readable by their
 * owner only, as backups of it are. Regression: they were made readable by every user of the
 * machine (umask 022: key hashes, balances, users), while `tollgate backup` wrote its copies 0600.
 */
import { chmodSync, existsSync, statSync, writeFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { openStore } from "../../src/store/open-store.ts";
import { makeAccount } from "./store-fixtures.ts";
import { makeTemporaryDirectory, newDatabaseUrl } from "./temporary-directory.ts";

const directory = makeTemporaryDirectory();

function modeOf(file: string): number {
  return statSync(file).mode & 0o777;
}

describe("the files of a SQLite store", () => {
  it("are made readable by their owner only", async () => {
    const previous = process.umask(0o022);
    try {
      const url = newDatabaseUrl(directory);
      const file = url.slice("sqlite:".length);
      const store = await openStore(url);
      expect(await store.insertAccount(makeAccount({ name: "acme" }))).toBe("created");
      for (const side of ["", "-wal", "-shm"]) {
        expect(existsSync(`${file}${side}`), side).toBe(true);
        expect(modeOf(`${file}${side}`), side).toBe(0o600);
      }
      await store.close();
    } finally {
      process.umask(previous);
    }
  });

  it("keep the mode of a database that exists", async () => {
    const url = newDatabaseUrl(directory);
    const file = url.slice("sqlite:".length);
    writeFileSync(file, "");
    chmodSync(file, 0o640);
    await (await openStore(url)).close();
    expect(modeOf(file)).toBe(0o640);
  });
});
