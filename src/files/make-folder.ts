import { existsSync, mkdirSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { dirname, resolve } from "node:path";

/**
 * Makes `folder` and the folders above it that are missing, one at a time, as `mkdir -p` does.
 * Node's recursive mkdir never returns where a folder exists that takes no folder in it, as
 * /dev/fd and /proc/PID/fd do (the child is ENOENT, so it makes the parent, which is EEXIST, and
 * tries the child again, for ever, at full CPU and deaf to SIGTERM): here the first mkdir that
 * fails throws its error. A file in the way throws as a recursive mkdir does (ENOTDIR, EEXIST).
 */
export function makeFolderSync(folder: string): void {
  for (const missing of missingFolders(folder)) {
    try {
      mkdirSync(missing);
    } catch (error) {
      // Made meanwhile by another process: as good.
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    }
  }
  mkdirSync(folder, { recursive: true });
}

/** {@link makeFolderSync}, without blocking. */
export async function makeFolder(folder: string): Promise<void> {
  for (const missing of missingFolders(folder)) {
    try {
      await mkdir(missing);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    }
  }
  await mkdir(folder, { recursive: true });
}

/** `folder` and the folders above it that do not exist, the outermost first. */
function missingFolders(folder: string): string[] {
  const missing: string[] = [];
  for (let current = resolve(folder); !existsSync(current); current = dirname(current)) {
    missing.unshift(current);
    if (dirname(current) === current) break;
  }
  return missing;
}
