import { readFileSync, statSync } from "node:fs";

/**
 * The process id of another process that holds a POSIX lock on `file` (as SQLite locks), read
 * from Linux's `/proc/locks`; `undefined` where that is not known: no `/proc/locks` (macOS), a
 * holder in another PID namespace (a container: shown as process 0), an open file description
 * lock (shown as -1), or no lock on the file at all. The lock itself records no process id: this
 * is only to name the holder in a refusal, so it never throws.
 */
export function findLockHolder(file: string): number | undefined {
  try {
    const { dev, ino } = statSync(file, { bigint: true });
    // `/proc/locks` names a file by its device as major:minor in hex and its inode in decimal.
    const device = `${majorOf(dev).toString(16).padStart(2, "0")}:${minorOf(dev).toString(16).padStart(2, "0")}:${ino}`;
    for (const line of readFileSync("/proc/locks", "utf8").split("\n")) {
      // "1: POSIX  ADVISORY  WRITE 3850 fe:00:1474572 0 EOF" (a "->" line waits for a lock).
      const fields = line.trim().split(/\s+/);
      if (fields[1] === "->" || fields[1] !== "POSIX") continue;
      const pid = Number(fields[4]);
      if (fields[5] === device && Number.isSafeInteger(pid) && pid > 0 && pid !== process.pid) return pid;
    }
  } catch {
    // No /proc/locks, or the file is gone: the holder is not known.
  }
  return undefined;
}

/** The major number of a Linux device number (glibc's `gnu_dev_major`). */
function majorOf(device: bigint): bigint {
  return ((device >> 8n) & 0xfffn) | ((device >> 32n) & ~0xfffn);
}

/** The minor number of a Linux device number (glibc's `gnu_dev_minor`). */
function minorOf(device: bigint): bigint {
  return (device & 0xffn) | ((device >> 12n) & ~0xffn);
}
