import { open } from "node:fs/promises";
import { dirname } from "node:path";
import { convertFetchError } from "./convert-fetch-error.ts";
import { createNotWritableError, isSystemError } from "./create-not-writable-error.ts";
import type { PartialFile, PartialFileVersion } from "./create-partial-file.ts";
import type { DownloadListener } from "./download-progress.ts";
import { ModelDownloadError } from "./model-download-error.ts";

/**
 * Writes the body to the partial file from `start` on; returns the file's size afterwards. A file
 * started afresh keeps `version` for later resumes.
 */
export async function writeDownloadBody(context: {
  body: ReadableStream<Uint8Array> | null;
  partial: PartialFile;
  version: PartialFileVersion;
  start: number;
  total: number | undefined;
  url: URL;
  signal: AbortSignal;
  watchdog: { touch(): void };
  options: DownloadListener;
}): Promise<number> {
  const { body, start, total, partial } = context;
  // The models folder is full or read-only: not a broken connection, and not worth a retry.
  const saving = (error: unknown) =>
    isSystemError(error) ? createNotWritableError(error, dirname(partial.path)) : error;
  // Truncated before its version is replaced: a crash in between leaves an empty partial file,
  // never old bytes under a new version.
  // A resume writes into the file as it is (never creating it: bytes at its offset in a new file
  // would follow a hole); one deleted meanwhile is started over by the next attempt.
  const file = await open(partial.path, start === 0 ? "w" : "r+").catch(async (error: unknown) => {
    await body?.cancel().catch(() => {});
    if (isSystemError(error) && error.code === "ENOENT" && start > 0) {
      throw new ModelDownloadError(
        "interrupted",
        "The partial download was deleted meanwhile; starting over.",
      );
    }
    throw saving(error);
  });
  let received = start;
  try {
    if (start === 0)
      await partial.keepVersion(context.version).catch((error: unknown) => {
        throw saving(error);
      });
    context.options.onProgress?.({ receivedBytes: received, totalBytes: total, startBytes: start });
    if (body === null) return received;
    const reader = body[Symbol.asyncIterator]();
    for (;;) {
      let next: IteratorResult<Uint8Array>;
      try {
        next = await reader.next();
      } catch (error) {
        throw convertFetchError(error, { url: context.url, signal: context.signal, phase: "body" });
      }
      if (next.done === true) break;
      try {
        await file.write(next.value, 0, next.value.byteLength, received);
      } catch (error) {
        await reader.return?.().catch(() => {});
        if (isDiskFull(error)) {
          // Left full, the disk would fail every other writer on it too (the database's charges).
          await file.truncate(0).catch(() => {});
          await partial.forgetVersion().catch(() => {});
          throw createNotWritableError(error, dirname(partial.path), {
            done: "the partial download was emptied to give the space back",
          });
        }
        throw saving(error);
      }
      received += next.value.byteLength;
      context.watchdog.touch();
      context.options.onProgress?.({ receivedBytes: received, totalBytes: total, startBytes: start });
      // More than announced: stop at once rather than fill the disk.
      if (total !== undefined && received > total) {
        await reader.return?.().catch(() => {});
        break;
      }
    }
  } finally {
    await file.close().catch(() => {});
  }
  return received;
}

function isDiskFull(error: unknown): error is Error & { code: string } {
  return isSystemError(error) && (error.code === "ENOSPC" || error.code === "EDQUOT");
}
