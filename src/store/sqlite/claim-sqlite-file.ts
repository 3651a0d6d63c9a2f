import { existsSync, readFileSync, rmSync, statSync } from "node:fs";
import { basename } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { isProcessRunning } from "../../process/is-process-running.ts";
import { explainSqliteError } from "./explain-sqlite-error.ts";
import { findLockHolder } from "./find-lock-holder.ts";

/**
 * Claims a SQLite file for the server of this process, or throws when a server of another process
 * has it.
 *
 * A server owns its SQLite file: it releases every reservation it finds when it starts, and it
 * holds new reservations in memory (sqlite-billing-batch.ts), so a second server on the same file
 * would release the first one's reservations and reserve without seeing the money the first one
 * holds. The claim is a lock the operating system keeps: an exclusive SQLite lock on a file beside
 * the database, `<file>.server.lock`, held by a connection of this process for as long as it
 * serves. The kernel drops it when the process ends, however it ends, and it holds across PID
 * namespaces: two containers of the image sharing a volume each run as process 1, which a claim
 * naming a process id took for its own. (It needs a file system with working POSIX locks, as
 * SQLite itself does: not NFS.) Servers of this process share the claim. Returns the release.
 */
export function claimSqliteFile(file: string): () => void {
  const lockFile = `${file}.server.lock`;
  let claim = claims.get(lockFile);
  if (claim === undefined) {
    refuseLegacyClaim(file);
    claim = { connection: lockExclusively(file, lockFile), holders: 0 };
    claims.set(lockFile, claim);
  }
  claim.holders += 1;
  const held = claim;
  let released = false;
  return () => {
    if (released) return;
    released = true;
    held.holders -= 1;
    if (held.holders > 0) return;
    claims.delete(lockFile);
    // Removed while still locked: a server that opened it meanwhile finds it gone once it has the
    // lock (see lockExclusively), and claims the file anew.
    try {
      rmSync(lockFile, { force: true });
    } catch {
      // A folder made read-only meanwhile: the lock file stays, and does no harm (a server that
      // opens it takes its lock, which closing this connection lets go).
    } finally {
      held.connection.close();
    }
  };
}

/** The claims this process holds, by lock file: one connection each, however many servers share it. */
const claims = new Map<string, { connection: DatabaseSync; holders: number }>();

/**
 * Opens `lockFile` and takes SQLite's exclusive lock on it, without waiting. The lock is on the
 * file that was opened: if that file was removed or replaced before the lock was had (its owner
 * releasing it), the lock guards nothing, and the file now at the name is locked instead.
 */
function lockExclusively(file: string, lockFile: string): DatabaseSync {
  let busyTries = 0;
  for (let attempt = 0; attempt < 5; attempt++) {
    const before = inodeOf(lockFile);
    const connection = openLockFile(lockFile);
    const opened = inodeOf(lockFile);
    if (before !== undefined && opened !== before) {
      connection.close();
      continue;
    }
    try {
      connection.exec("PRAGMA locking_mode = EXCLUSIVE");
      connection.exec("BEGIN EXCLUSIVE");
    } catch (error) {
      connection.close();
      if (!/locked|busy/i.test((error as Error).message)) throw error;
      // SQLite takes its exclusive lock by way of a shared one: claims at the same moment can
      // each hold the shared lock the other needs, and all be refused (seen once in a test of six
      // claims at once). Tried again after a pause of its own; a live server's claim refuses
      // every try.
      if (++busyTries > CLAIM_TRIES_WHEN_BUSY) throw claimedError(file, lockFile);
      pauseThread(5 + Math.floor(Math.random() * 20));
      attempt--;
      continue;
    }
    if (opened !== undefined && inodeOf(lockFile) === opened) return connection;
    connection.close();
  }
  throw new Error(`Could not claim ${file}: ${lockFile} keeps changing. Is another server starting on it?`);
}

/** How many more times a claim that found the lock file locked tries, before it is refused. */
const CLAIM_TRIES_WHEN_BUSY = 3;

/** Blocks this thread for `ms` (a claim is made once, as a server starts). */
function pauseThread(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/**
 * Opens (creating) the lock file. It is the first file a server creates beside its database, so
 * a folder the server may not write shows here: the error names the folder and the fix.
 */
function openLockFile(lockFile: string): DatabaseSync {
  try {
    return new DatabaseSync(lockFile, { timeout: 0 });
  } catch (error) {
    throw explainSqliteError(error, lockFile, 0);
  }
}

function inodeOf(path: string): number | undefined {
  try {
    return statSync(path).ino;
  } catch {
    return undefined;
  }
}

/** The refusal of a claim on a SQLite file that another server's process holds. */
export class SqliteFileClaimedError extends Error {
  /** The process that holds the claim, where it is known (see find-lock-holder.ts). */
  readonly holderPid: number | undefined;
  /** Whether that process is a `tollgate restore` (which holds the claim while it works), not a server. */
  readonly holderRestores: boolean;

  constructor(message: string, holderPid: number | undefined, holderRestores = false) {
    super(message);
    this.name = "SqliteFileClaimedError";
    this.holderPid = holderPid;
    this.holderRestores = holderRestores;
  }
}

function claimedError(file: string, lockFile: string): Error {
  // The lock records no process: the system's table of locks names it, where it can.
  const holder = findLockHolder(lockFile);
  if (holder !== undefined && isRestoring(holder)) {
    return new SqliteFileClaimedError(
      `A tollgate restore (process ${holder}) is restoring ${file} (it holds ${lockFile}): wait for it to finish, then start again.`,
      holder,
      true,
    );
  }
  return new SqliteFileClaimedError(
    `Another Tollgate server serves ${file} (${holder === undefined ? "it" : `process ${holder}`} holds ${lockFile}). One server owns a SQLite file; to run several servers, give them one PostgreSQL database (database: postgres://...).`,
    holder,
  );
}

/**
 * Whether process `pid` runs `tollgate restore`, as its arguments say (Linux's /proc; elsewhere
 * it is taken for a server). Regression: a server started during a restore, and a second
 * restore, were told that a server held the file.
 */
function isRestoring(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").includes("restore");
  } catch {
    return false;
  }
}

/**
 * Whether process `pid` may be Node.js, as its program's name says (Linux's /proc; elsewhere, or
 * unreadable, it may). A claim's process id that another program took since (after a crash and a
 * reboot) names no server.
 */
function mayRunNode(pid: number): boolean {
  try {
    const program = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0")[0] ?? "";
    return program === "" || /node/i.test(basename(program));
  } catch {
    return true;
  }
}

/**
 * Versions before the lock claimed the file with `<file>.server`, naming their process: one whose
 * process runs Node.js is a server of such a version still serving (an upgrade must stop it
 * first); one whose process is gone, or runs another program (its id reused), was left by a
 * crash, and goes.
 */
function refuseLegacyClaim(file: string): void {
  const legacy = `${file}.server`;
  if (!existsSync(legacy)) return;
  let owner: number | undefined;
  try {
    const pid = Number(readFileSync(legacy, "utf8").trim());
    owner = Number.isSafeInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    owner = undefined;
  }
  if (owner !== undefined && owner !== process.pid && isProcessRunning(owner) && mayRunNode(owner)) {
    throw new SqliteFileClaimedError(
      `Another Tollgate server (process ${owner}) serves ${file}. One server owns a SQLite file; to run several servers, give them one PostgreSQL database (database: postgres://...). If that process is gone, delete ${legacy}.`,
      owner,
    );
  }
  rmSync(legacy, { force: true });
}
