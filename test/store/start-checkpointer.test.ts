import { statSync } from "node:fs";
import path from "node:path";
import { DatabaseSync } from "node:sqlite";
import { describe, expect, it } from "vitest";
import { openStore } from "../../src/store/open-store.ts";
import { openNodeSqliteDatabase, WAL_SIZE_LIMIT_BYTES } from "../../src/store/sqlite/node-sqlite-database.ts";
import {
  createCheckpointing,
  START_AFTER_WRITES,
  startCheckpointer,
} from "../../src/store/sqlite/start-checkpointer.ts";
import { makeAccount, makeUsage } from "./store-fixtures.ts";
import { makeTemporaryDirectory, newDatabaseUrl } from "./temporary-directory.ts";

const directory = makeTemporaryDirectory();

/** A WAL file with one table, opened as the server opens its store (automatic checkpoint on). */
function openWalFile(): { file: string; database: DatabaseSync } {
  const file = newDatabaseUrl(directory).slice("sqlite:".length);
  const database = new DatabaseSync(file);
  database.exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL");
  database.exec("create table notes (id integer primary key, body text not null)");
  return { file, database };
}

/** About `kib` KiB of rows, in transactions of a few rows: well below the automatic 1000 pages. */
function write(database: DatabaseSync, kib: number): void {
  const insert = database.prepare("insert into notes (body) values (?)");
  const body = "x".repeat(1024);
  for (let index = 0; index < kib; index += 8) {
    database.exec("begin immediate");
    for (let row = 0; row < 8; row++) insert.run(body);
    database.exec("commit");
  }
}

function automaticPages(database: DatabaseSync): unknown {
  return (database.prepare("PRAGMA wal_autocheckpoint").get() as Record<string, unknown>).wal_autocheckpoint;
}

/** Resolves once the database file (not its WAL) is larger than `bytes`; fails after 10 s. */
async function fileGrowsPast(file: string, bytes: number): Promise<number> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const size = statSync(file).size;
    if (size > bytes) return size;
    if (Date.now() > deadline) throw new Error(`${file} stayed at ${size} bytes`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe("startCheckpointer", () => {
  it("turns the automatic checkpoint off and copies the WAL into the file from its worker", async () => {
    const { file, database } = openWalFile();
    const settings: boolean[] = [];
    const checkpointer = await startCheckpointer({
      file,
      intervalMs: 20,
      setAutomatic: (automatic) => {
        settings.push(automatic);
        database.exec(`PRAGMA wal_autocheckpoint = ${automatic ? 1000 : 0}`);
      },
    });
    try {
      expect(settings).toEqual([false]);
      expect(automaticPages(database)).toBe(0);
      const before = statSync(file).size;
      // 1 MiB: SQLite's own checkpoint would wait for 4 MiB; only the worker moves it now.
      write(database, 1024);
      expect(await fileGrowsPast(file, before + 512 * 1024)).toBeGreaterThan(before);
    } finally {
      await checkpointer.stop();
    }
    expect(settings).toEqual([false, true]);
    expect(automaticPages(database)).toBe(1000);
    database.close();
  });

  it("lets the WAL start over under sustained writes: it stays near its size limit, not the size of all that was written", async () => {
    const file = newDatabaseUrl(directory).slice("sqlite:".length);
    const database = openNodeSqliteDatabase(file);
    database.prepareDirect("create table notes (id integer primary key, body text not null)").run();
    let calls = 0;
    const checkpointer = await startCheckpointer({
      file,
      intervalMs: 10,
      restartFrames: 256,
      setAutomatic: (automatic) => database.setAutomaticCheckpoint(automatic),
      pauseWrites: (ms) => {
        calls++;
        return database.pauseWrites(ms);
      },
    });
    const insert = database.prepareDirect("insert into notes (body) values (?)");
    const begin = database.prepareDirect("begin immediate");
    const commit = database.prepareDirect("commit");
    const body = "x".repeat(1024);
    // Three times the limit: room for the worker to fall behind on a loaded machine (a peak of
    // 45 MB was seen there) while a WAL that never started over would still reach 96 MB.
    const written = WAL_SIZE_LIMIT_BYTES * 3;
    let walPeak = 0;
    try {
      // Commits one after another with only a turn of the event loop between them, as a busy
      // server's settles come: the worker's own checkpoints never catch up with them.
      for (let bytes = 0; bytes < written; bytes += 8 * 1024) {
        // As the billing batch does (sqlite-billing-batch.ts).
        const paused = database.writesResumed;
        if (paused !== undefined) await paused;
        begin.run();
        for (let row = 0; row < 8; row++) insert.run(body);
        commit.run();
        await new Promise((resolve) => setImmediate(resolve));
        walPeak = Math.max(walPeak, statSync(`${file}-wal`).size);
      }
    } finally {
      await checkpointer.stop();
      database.close();
    }
    expect(calls).toBeGreaterThan(0);
    expect(walPeak).toBeLessThan(WAL_SIZE_LIMIT_BYTES + 24 * 2 ** 20);
  });

  it("leaves the automatic checkpoint on when its worker cannot open the file (and has exited)", async () => {
    const settings: boolean[] = [];
    const checkpointer = await startCheckpointer({
      file: path.join(directory, "no-such-folder", "store.db"),
      setAutomatic: (automatic) => settings.push(automatic),
    });
    // The worker ends itself on failure: stopping it afterwards still resolves.
    await new Promise((resolve) => setTimeout(resolve, 500));
    await checkpointer.stop();
    expect(settings).toEqual([]);
  });
});

describe("createCheckpointing", () => {
  it("starts the worker only at the threshold's write, and stops it", async () => {
    const { file, database } = openWalFile();
    const settings: boolean[] = [];
    const checkpointing = createCheckpointing({
      file,
      startAfterWrites: 3,
      setAutomatic: (automatic) => settings.push(automatic),
    });
    checkpointing.noteWrite();
    checkpointing.noteWrite();
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(settings).toEqual([]);
    checkpointing.noteWrite();
    for (let attempt = 0; attempt < 250 && settings.length === 0; attempt++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(settings).toEqual([false]);
    checkpointing.noteWrite();
    await checkpointing.stop();
    expect(settings).toEqual([false, true]);
    database.close();
  });
});

describe("createCheckpointing, idle", () => {
  it("stops the worker once a whole interval passed without a write, and starts one again at the threshold", async () => {
    const { file, database } = openWalFile();
    const settings: boolean[] = [];
    const checkpointing = createCheckpointing({
      file,
      startAfterWrites: 2,
      // Long beside the writes' 20 ms: a loaded machine's timers do not make a busy one look idle.
      stopWhenIdleMs: 1_000,
      setAutomatic: (automatic) => settings.push(automatic),
    });
    const until = async (expected: boolean[]) => {
      for (let attempt = 0; attempt < 250 && settings.length < expected.length; attempt++) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect(settings).toEqual(expected);
    };
    checkpointing.noteWrite();
    checkpointing.noteWrite();
    await until([false]);
    // Writes keep coming (each interval sees one): the worker stays.
    for (let tick = 0; tick < 125; tick++) {
      checkpointing.noteWrite();
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(settings).toEqual([false]);
    // Idle: it goes, and SQLite's own checkpoints come back.
    await until([false, true]);
    checkpointing.noteWrite();
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(settings).toEqual([false, true]);
    checkpointing.noteWrite();
    await until([false, true, false]);
    await checkpointing.stop();
    expect(settings).toEqual([false, true, false, true]);
    database.close();
  });
});

describe("a server's SQLite store", () => {
  it("checkpoints on a worker once its writes are sustained, long before SQLite would", async () => {
    const url = newDatabaseUrl(directory);
    const file = url.slice("sqlite:".length);
    const store = await openStore(url, { owner: true });
    try {
      const account = makeAccount({ name: "acme", balanceNano: 10n ** 15n });
      await store.insertAccount(account);
      const before = statSync(file).size;
      // A thousand usage rows (twice the threshold), settled in batches as requests would be:
      // about 2.4 MiB of WAL, below the 1000 pages (4 MiB) SQLite's own checkpoint waits for.
      expect(START_AFTER_WRITES).toBeLessThan(1000);
      for (let batch = 0; batch < 20; batch++) {
        await Promise.all(
          Array.from({ length: 50 }, () =>
            store.settle(makeUsage({ accountId: account.id, costNano: 1n, requestId: "r".repeat(100) })),
          ),
        );
      }
      expect(await fileGrowsPast(file, before + 512 * 1024)).toBeGreaterThan(before);
      expect(await store.audit()).toEqual([]);
    } finally {
      await store.close();
    }
  });
});
