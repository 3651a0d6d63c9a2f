/**
 * A SQLite file that another process holds (a CLI command's write, a VACUUM, an open sqlite3
 * session), or that is no database at all: the server's store fails fast instead of blocking the
 * event loop, loses no charge, and every error names the file and the way out.
 */
import { spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { DatabaseSync } from "node:sqlite";
import { afterEach, describe, expect, it } from "vitest";
import { openStore } from "../../src/store/open-store.ts";
import { isSqliteBusy } from "../../src/store/sqlite/explain-sqlite-error.ts";
import {
  DEFAULT_BUSY_TIMEOUT_MS,
  openNodeSqliteDatabase,
} from "../../src/store/sqlite/node-sqlite-database.ts";
import { OWNER_BUSY_TIMEOUT_MS } from "../../src/store/sqlite/open-sqlite-store.ts";
import { HOLD_MS } from "../../src/store/sqlite/sqlite-held-reservations.ts";
import type { Store } from "../../src/store/store.ts";
import { rejection } from "../support/rejection.ts";
import { makeAccount, makeReservation, makeSettlement } from "./store-fixtures.ts";
import { makeTemporaryDirectory, newDatabaseUrl } from "./temporary-directory.ts";

const directory = makeTemporaryDirectory();

/** Another process's write lock on the file: a connection of its own with a transaction open. */
function lockFile(url: string): { release(): void } {
  const other = new DatabaseSync(url.slice("sqlite:".length));
  other.exec("begin immediate");
  return {
    release() {
      other.exec("rollback");
      other.close();
    },
  };
}

/** What the file says, read over a connection of its own. */
function countRows(url: string, table: "reservations" | "usage"): number {
  const file = new DatabaseSync(url.slice("sqlite:".length), { readOnly: true });
  try {
    return Number((file.prepare(`select count(*) as n from ${table}`).get() as { n: number }).n);
  } finally {
    file.close();
  }
}

describe("the server's SQLite store while another process holds the file", () => {
  const opened: Store[] = [];
  const locks: { release(): void }[] = [];
  afterEach(async () => {
    for (const lock of locks.splice(0)) lock.release();
    for (const store of opened.splice(0)) await store.close();
  });

  async function openOwner(url: string): Promise<Store> {
    const store = await openStore(url, { owner: true });
    opened.push(store);
    return store;
  }

  it("fails a settle at once, then refuses reservations until the file is free, losing no charge (regression: 5 s event-loop stalls)", async () => {
    const url = newDatabaseUrl(directory);
    const owner = await openOwner(url);
    const account = makeAccount({ name: "acme", balanceNano: 1_000n });
    await owner.insertAccount(account);
    const served = makeReservation({ accountId: account.id, amountNano: 100n });
    expect(await owner.reserve(served)).toBe("reserved");

    const lock = lockFile(url);
    locks.push(lock);
    const started = performance.now();
    const settleError = await rejection(owner.settle(makeSettlement(served, 30n)));
    expect(isSqliteBusy(settleError)).toBe(true);
    // The server's connection waits its own short busy timeout, once: not the command's 5 s, which
    // blocks the event loop (node:sqlite is synchronous).
    expect(OWNER_BUSY_TIMEOUT_MS).toBeLessThan(DEFAULT_BUSY_TIMEOUT_MS);
    expect((settleError as Error).message).toContain(
      `${url.slice("sqlite:".length)} is locked by another process (waited ${OWNER_BUSY_TIMEOUT_MS} ms)`,
    );
    expect(performance.now() - started).toBeLessThan(DEFAULT_BUSY_TIMEOUT_MS);
    // Its charges cannot be written: a new request is refused (503) rather than served.
    const refused = makeReservation({ accountId: account.id, amountNano: 100n });
    expect(isSqliteBusy(await rejection(owner.reserve(refused)))).toBe(true);
    // Reads do not need the lock.
    expect((await owner.getAccountMoney(account.id))?.reservedNano).toBe(100n);

    locks.pop()?.release();
    const next = makeReservation({ accountId: account.id, amountNano: 100n });
    expect(await owner.reserve(next)).toBe("reserved");
    // The settle retried once the file is free charges once.
    expect(await owner.settle(makeSettlement(served, 30n))).toBe(30n);
    expect(await owner.settle(makeSettlement(served, 30n))).toBe(30n);
    expect(await owner.settle(makeSettlement(next, 20n))).toBe(20n);
    expect(await owner.getAccountMoney(account.id)).toEqual({
      balanceNano: 950n,
      reservedNano: 0n,
      spentNano: 50n,
    });
    expect(await owner.audit()).toEqual([]);
    expect(countRows(url, "usage")).toBe(2);
    // A reservation held in memory again once writes go through.
    const held = makeReservation({ accountId: account.id, amountNano: 1n });
    expect(await owner.reserve(held)).toBe("reserved");
    expect(countRows(url, "reservations")).toBe(0);
    await owner.settle(makeSettlement(held, 1n));
  });

  it("writes a lasting reservation's row once the file is free again, not never", async () => {
    const url = newDatabaseUrl(directory);
    const owner = await openOwner(url);
    const account = makeAccount({ name: "acme", balanceNano: 1_000n });
    await owner.insertAccount(account);
    const lasting = makeReservation({ accountId: account.id, amountNano: 100n });
    expect(await owner.reserve(lasting)).toBe("reserved");
    const lock = lockFile(url);
    locks.push(lock);
    // Its row comes due while the file is locked: the write fails.
    await new Promise((resolve) => setTimeout(resolve, HOLD_MS + 200));
    locks.pop()?.release();
    // The row is written on a later attempt (the previous run's start releases what a crash left).
    await expect.poll(() => countRows(url, "reservations"), { timeout: 5_000, interval: 50 }).toBe(1);
    expect(await owner.settle(makeSettlement(lasting, 40n))).toBe(40n);
    expect(await owner.audit()).toEqual([]);
  });

  it("waits out a short lock at start, and opens a locked file for reading", async () => {
    const url = newDatabaseUrl(directory);
    const first = await openStore(url);
    await first.insertAccount(makeAccount({ name: "acme", balanceNano: 5n }));
    await first.close();

    const lock = lockFile(url);
    locks.push(lock);
    // A command that only reads needs no lock: the migration check is a read too.
    const reader = await openStore(url);
    opened.push(reader);
    expect((await reader.listAccounts()).map((account) => account.name)).toEqual(["acme"]);
    await reader.close();
    opened.pop();

    // A server starting while a command writes (a lock held longer than its busy timeout).
    const owner = openStore(url, { owner: true }).then(async (store) => {
      opened.push(store);
      return await store.releaseReservations({ replicaId: "*" });
    });
    setTimeout(() => locks.pop()?.release(), 300);
    expect(await owner).toBe(0);
  });

  it("says how long a start waited for a lock it never got (regression: 'waited 50 ms' after five seconds)", async () => {
    const url = newDatabaseUrl(directory);
    await (await openStore(url)).close();
    const lock = lockFile(url);
    locks.push(lock);
    const owner = await openOwner(url);
    const error = await rejection(owner.releaseReservations({ replicaId: "*" }));
    expect(isSqliteBusy(error)).toBe(true);
    const waited = Number(/\(waited (\d+) ms\)/.exec((error as Error).message)?.[1]);
    expect(waited).toBeGreaterThanOrEqual(DEFAULT_BUSY_TIMEOUT_MS);
    expect((error as Error).message).toContain(`The database ${url.slice("sqlite:".length)} is locked`);
  });
});

describe("a command's SQLite connection", () => {
  it("waits for another process's lock, then says the file is locked", () => {
    const url = newDatabaseUrl(directory);
    const file = url.slice("sqlite:".length);
    const setup = openNodeSqliteDatabase(file);
    setup.prepare("create table items (id integer primary key)").run([]);
    setup.close();
    const lock = lockFile(url);
    const command = openNodeSqliteDatabase(file, { busyTimeoutMilliseconds: 20 });
    try {
      expect(command.busyTimeout).toBe(20);
      let thrown: unknown;
      try {
        command.prepare("insert into items (id) values (1)").run([]);
      } catch (error) {
        thrown = error;
      }
      expect(isSqliteBusy(thrown)).toBe(true);
      expect((thrown as Error).message).toBe(
        `The database ${file} is locked by another process (waited 20 ms): another command's write, a VACUUM or an open sqlite3 session with a transaction holds it. Retry once it has finished.`,
      );
      // node:sqlite's fields stay, for whatever tells a store outage (503) from a bug.
      expect(thrown).toMatchObject({ code: "ERR_SQLITE_ERROR", errcode: 5 });
    } finally {
      lock.release();
      command.close();
    }
  });
});

describe("opening a file that is no SQLite database", () => {
  it("names the file and the fix, and a server leaves no claim behind (regression: bare messages)", async () => {
    const file = path.join(directory, "not-sqlite.db");
    writeFileSync(file, "this is no database, only text long enough to be read as a header ".repeat(100));
    for (const options of [{}, { owner: true }]) {
      await expect(openStore(`sqlite:${file}`, options)).rejects.toThrow(
        `${file} is not a SQLite database Tollgate can read (SQLite says: file is not a database). Point the database setting`,
      );
    }
    expect(existsSync(`${file}.server.lock`)).toBe(false);
  });

  it("says so when the path is a folder", async () => {
    const folder = path.join(directory, "a-folder");
    mkdirSync(folder);
    await expect(openStore(`sqlite:${folder}`, { owner: true })).rejects.toThrow(
      `Cannot open the database ${folder}: it is a folder. Name a file in it in the database setting, e.g. sqlite:${path.join(folder, "tollgate.db")}.`,
    );
    expect(existsSync(`${folder}.server.lock`)).toBe(false);
  });
});

describe("a database folder that cannot be created or written", () => {
  it("names the file that sits where the folder should be (regression: bare 'EEXIST: file already exists, mkdir')", async () => {
    const folder = path.join(directory, "data-is-a-file");
    writeFileSync(folder, "not a folder");
    for (const options of [{}, { owner: true }]) {
      await expect(openStore(`sqlite:${path.join(folder, "tollgate.db")}`, options)).rejects.toThrow(
        `Cannot create the database folder ${folder}: it is a file, not a folder. Move that file away, or point the database setting (database: in the config, or TOLLGATE_DATABASE_URL) at a file in another folder.`,
      );
    }
  });

  it("names the file a path runs through (regression: bare 'ENOTDIR: not a directory, mkdir')", async () => {
    const file = path.join(directory, "a-plain-file");
    writeFileSync(file, "not a folder");
    const folder = path.join(file, "data");
    await expect(openStore(`sqlite:${path.join(folder, "tollgate.db")}`, { owner: true })).rejects.toThrow(
      `Cannot create the database folder ${folder}: ${file} is a file, not a folder.`,
    );
  });

  it("names the folder, the user the server runs as and the fix, when that user may not write it (regression: bare 'unable to open database file' and 'EACCES')", async (context) => {
    const other = findOtherUser();
    if (typeof other === "string") {
      console.warn(`skipped: ${other}`);
      return context.skip(other);
    }
    // A root-owned folder, as a bind mount is, seen by the image's non-root user.
    const readOnly = path.join(directory, "read-only");
    const readOnlyWithDatabase = path.join(directory, "read-only-with-database");
    const readOnlyParent = path.join(directory, "read-only-parent");
    mkdirSync(readOnly);
    await (await openStore(`sqlite:${path.join(readOnlyWithDatabase, "tollgate.db")}`)).close();
    chmodSync(path.join(readOnlyWithDatabase, "tollgate.db"), 0o666);
    mkdirSync(readOnlyParent);
    const readOnlyFolders = [readOnly, readOnlyWithDatabase, readOnlyParent];
    for (const folder of readOnlyFolders) chmodSync(folder, 0o555);
    // mkdtemp makes the temporary folder its creator's alone: the other user must reach into it.
    chmodSync(directory, 0o755);
    try {
      const user = describeUser(other.uid);
      const cannotWrite = (folder: string) =>
        `Cannot write the database folder ${folder}: Tollgate runs as ${user}, who may not create files in it (SQLite keeps -wal and -shm files, and the server its lock file, beside the database). Make the folder writable by that user (e.g. chown ${other.uid} ${folder}), or point the database setting (database: in the config, or TOLLGATE_DATABASE_URL) at a file in a folder that user may write.`;
      for (const owner of [true, false]) {
        expect(openAs(other, path.join(readOnly, "tollgate.db"), owner)).toBe(cannotWrite(readOnly));
        expect(openAs(other, path.join(readOnlyWithDatabase, "tollgate.db"), owner)).toBe(
          cannotWrite(readOnlyWithDatabase),
        );
      }
      const missing = path.join(readOnlyParent, "data");
      expect(openAs(other, path.join(missing, "tollgate.db"), true)).toBe(
        `Cannot create the database folder ${missing}: Tollgate runs as ${user}, who may not create folders in ${readOnlyParent}. Create ${missing} and make it writable by that user (e.g. chown ${other.uid} ${missing}), or point the database setting (database: in the config, or TOLLGATE_DATABASE_URL) at a file in a folder that user may write.`,
      );
      expect(existsSync(path.join(readOnly, "tollgate.db.server.lock"))).toBe(false);
    } finally {
      // Writable again, so that the temporary folder can be removed by a user other than root.
      for (const folder of readOnlyFolders) chmodSync(folder, 0o755);
    }
  });
});

const storeModule = new URL("../../src/store/open-store.ts", import.meta.url).href;

/** A process to open the store in, as a user a folder's mode applies to, and that user's uid. */
interface OtherUser {
  command: string[];
  uid: number;
}

/** The uid a test run as root opens the store as: `nobody`'s on most systems. */
const NOBODY = 65534;

/**
 * Whom the read-only folder test opens the store as: root writes any folder whatever its mode,
 * so a run as root runs the store as {@link NOBODY} (with `setpriv`); any other user is refused
 * as it is. A string says why it cannot.
 */
function findOtherUser(): OtherUser | string {
  const uid = process.getuid?.();
  if (uid === undefined) return "this platform has no POSIX users";
  if (uid !== 0) return { command: [process.execPath], uid };
  const command = ["setpriv", `--reuid=${NOBODY}`, `--regid=${NOBODY}`, "--clear-groups", process.execPath];
  const probe = spawnSync(
    command[0]!,
    [...command.slice(1), "--input-type=module", "-e", `await import(${JSON.stringify(storeModule)});`],
    { encoding: "utf8" },
  );
  if (probe.error !== undefined) return `setpriv cannot run here (${probe.error.message})`;
  if (probe.status !== 0)
    return `node cannot run as uid ${NOBODY} here: ${probe.stderr.trim().split("\n")[0]}`;
  return { command, uid: NOBODY };
}

/** The user `uid` as the messages name it: by name and uid, or by uid alone when it has no name. */
function describeUser(uid: number): string {
  const name = spawnSync("id", ["-nu", String(uid)], { encoding: "utf8" }).stdout.trim();
  return name === "" ? `the user with uid ${uid}` : `the user ${name} (uid ${uid})`;
}

/** What opening the store on `file` says in a process of `user`. */
function openAs(user: OtherUser, file: string, owner: boolean): string {
  const script = `const { openStore } = await import(${JSON.stringify(storeModule)});
    try { await (await openStore(${JSON.stringify(`sqlite:${file}`)}, { owner: ${owner} })).close(); process.stdout.write("opened"); }
    catch (error) { process.stdout.write(error.message); }`;
  const [program, ...prefix] = user.command;
  return spawnSync(program!, [...prefix, "--input-type=module", "-e", script], { encoding: "utf8" }).stdout;
}
