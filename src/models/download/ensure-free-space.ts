import { statfs } from "node:fs/promises";
import { formatBytes } from "./format-download-figures.ts";
import { ModelDownloadError } from "./model-download-error.ts";
import { redactUrl } from "./redact-url.ts";

/**
 * Bytes a download leaves free on the models folder's disk beyond the file itself (64 MB), for
 * the SQLite database, logs and the like that may share it: a disk filled to the last byte fails
 * their writes (charges) too.
 */
export const freeSpaceMarginBytes = 64_000_000;

/** Bytes this process may still write in a folder; `undefined` when that cannot be told. */
export type ReadFreeBytes = (folder: string) => Promise<number | undefined>;

/**
 * Throws a `not-writable` {@link ModelDownloadError}, before anything is written, when the `rest`
 * bytes of a file still to save do not fit in `folder` with {@link freeSpaceMarginBytes} to
 * spare. Free space that cannot be told is no reason to refuse.
 */
export async function ensureFreeSpace(options: {
  folder: string;
  rest: number;
  url: URL;
  freeBytes?: ReadFreeBytes | undefined;
}): Promise<void> {
  const { folder, rest } = options;
  if (rest <= 0) return;
  const free = await (options.freeBytes ?? readFreeBytes)(folder).catch(() => undefined);
  const needed = rest + freeSpaceMarginBytes;
  if (free === undefined || free >= needed) return;
  throw new ModelDownloadError(
    "not-writable",
    `The models folder ${folder} has ${formatBytes(free)} free, but the download of ${redactUrl(options.url)} needs ${formatBytes(needed)} there (the ${formatBytes(rest)} still to save, and ${formatBytes(freeSpaceMarginBytes)} left free for other files); nothing was written. Make room there, or set TOLLGATE_MODELS_DIR to a folder on a disk with room.`,
  );
}

/**
 * The bytes `statfs` says this process may still write on the folder's file system; `undefined`
 * for one that tells no size (some FUSE and network file systems report 0 blocks).
 */
async function readFreeBytes(folder: string): Promise<number | undefined> {
  const found = await statfs(folder).catch(() => undefined);
  return found === undefined || found.blocks === 0 ? undefined : found.bavail * found.bsize;
}
