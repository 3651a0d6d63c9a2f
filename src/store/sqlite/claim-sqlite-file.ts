import { linkSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { isProcessRunning } from "../../process/is-process-running.ts";

/**
 * Claims a SQLite file for the server of this process, or throws when a live server of another
 * process has it.
 *
 * A server owns its SQLite file: it releases every reservation it finds when it starts, and it
 * holds new reservations in memory (sqlite-billing-batch.ts), so a second server on the same file
 * would release the first one's reservations and reserve without seeing the money the first one
 * holds. The claim is a file beside the database, `<file>.server`, holding the owner's process id:
 * a claim whose process is gone (a crash, a kill) is taken over; one of this process is shared.
 * Returns the release, which removes the claim file while it still names this process.
 */
export function claimSqliteFile(file: string): () => void {
  const claimFile = `${file}.server`;
  const release = () => {
    if (readOwner(claimFile) === process.pid) rmSync(claimFile, { force: true });
  };
  // The claim appears whole and at once (written beside it, then linked to its name, which
  // fails when the name exists): of two servers starting at once, one claims the file and the
  // other finds that claim. A claim left by a process that is gone is moved aside first, and
  // put back if it turns out another server claimed the file in between.
  const written = `${claimFile}.${process.pid}.new`;
  writeFileSync(written, `${process.pid}\n`);
  try {
    for (let attempt = 0; attempt < 5; attempt++) {
      if (createClaim(written, claimFile)) return release;
      const owner = readOwner(claimFile);
      if (owner === process.pid) return release;
      if (owner !== undefined && isProcessRunning(owner)) throw claimedError(file, claimFile, owner);
      removeStaleClaim(claimFile);
    }
  } finally {
    rmSync(written, { force: true });
  }
  throw new Error(`Could not claim ${file}: ${claimFile} keeps changing. Is another server starting on it?`);
}

/** Puts the claim in place unless one exists: false when it does. */
function createClaim(written: string, claimFile: string): boolean {
  try {
    linkSync(written, claimFile);
    return true;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "EEXIST") return false;
    // A file system without hard links: an exclusive create, whose content follows at once.
    if (code !== "EPERM" && code !== "ENOTSUP" && code !== "EOPNOTSUPP") throw error;
  }
  try {
    writeFileSync(claimFile, `${process.pid}\n`, { flag: "wx" });
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw error;
  }
}

function claimedError(file: string, claimFile: string, owner: number): Error {
  return new Error(
    `Another Tollgate server (process ${owner}) serves ${file}. One server owns a SQLite file; to run several servers, give them one PostgreSQL database (database: postgres://...). If that process is gone, delete ${claimFile}.`,
  );
}

/**
 * Moves a claim whose owner is gone out of the way. Renaming is atomic, so of two servers doing
 * this at once only one moves the file; if what it moved names a live process after all (a
 * server claimed the file just before), it is put back (`link` never replaces a file).
 */
function removeStaleClaim(claimFile: string): void {
  const aside = `${claimFile}.${process.pid}.stale`;
  try {
    renameSync(claimFile, aside);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return;
    throw error;
  }
  const owner = readOwner(aside);
  if (owner !== undefined && owner !== process.pid && isProcessRunning(owner)) {
    try {
      linkSync(aside, claimFile);
    } catch {
      // Someone created a new claim meanwhile: the next attempt reads it.
    }
  }
  rmSync(aside, { force: true });
}

function readOwner(claimFile: string): number | undefined {
  let text: string;
  try {
    text = readFileSync(claimFile, "utf8");
  } catch {
    return undefined;
  }
  const pid = Number(text.trim());
  return Number.isSafeInteger(pid) && pid > 0 ? pid : undefined;
}
