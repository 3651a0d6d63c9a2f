import { readFileSync, rmSync, writeFileSync } from "node:fs";

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
  const owner = readOwner(claimFile);
  if (owner !== undefined && owner !== process.pid && isAlive(owner)) {
    throw new Error(
      `Another Tollgate server (process ${owner}) serves ${file}. One server owns a SQLite file; to run several servers, give them one PostgreSQL database (database: postgres://...). If that process is gone, delete ${claimFile}.`,
    );
  }
  writeFileSync(claimFile, `${process.pid}\n`);
  return () => {
    if (readOwner(claimFile) === process.pid) rmSync(claimFile, { force: true });
  };
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

/** Whether a process with this id exists (one of another user counts: it cannot be signalled). */
function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}
