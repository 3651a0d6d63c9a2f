/**
 * Downloads one file resumably, verified and atomically.
 *
 * The bytes go to `DESTINATION.partial` beside the destination, each written at its own offset (so
 * that a second writer of the same bytes, a process that lost the download lock, cannot shift
 * them). An attempt asks for the rest of the file with `Range: bytes=N-` when the partial file
 * holds N bytes: `206` continues it (one whose `Content-Range` starts before N has the bytes up to
 * N compared with the saved ones; one that ends cleanly before the file does is followed at once by
 * a request for the next part), `200` of the version the partial file holds (the same strong
 * `ETag`) means the server ignored the range: its first N bytes are compared and the rest appended;
 * any other `200` means the file changed (or cannot be told) and is written again from its start,
 * once the new body is seen to start as a GGUF file (a login or error page sent instead is retried,
 * and the partial file kept), `416` means the partial file is already whole (or does not fit the
 * file, and is dropped). The validator of the answer that started the partial file (its strong
 * `ETag`, else its `Last-Modified`) and the file size it announced are kept beside it in
 * `DESTINATION.partial.validator`; the validator is sent as `If-Range`, so that a file changed
 * between attempts (or between runs) is downloaded again whole rather than saved as a mix of both
 * versions; a `206` or `416` naming another validator or another size drops the partial file too
 * (without a validator, the range starts {@link UNVALIDATED_OVERLAP_BYTES} early to compare). A
 * file-system error while saving (a full disk, a read-only folder) is `not-writable`, never
 * retried. Before writing, when the file's size is known, the models folder must have room for the
 * rest of it and a margin (ensure-free-space.ts: for the database and logs that may share the
 * disk), else nothing is written; a disk that fills up all the same (another writer, a size not
 * told) has the partial file emptied, giving the space back. The file's size comes from
 * `Content-Range` or `Content-Length` and must match the size known in advance, if any. A broken
 * connection, a stall or a 5xx/429 answer is retried after a growing pause, resuming where the file
 * ends; an attempt that took the file further than it had been does not count against the limit,
 * and one that dropped it counts as a start-over (retry-transient-failures.ts: the third ends the
 * download). So is a refused connection (a server restarting) once the server has answered this
 * download or part of the file is saved; a refused first contact fails at once (a machine without
 * network). A file seen to have changed is checked against what `refreshExpected` says of its new
 * version, never the old one's size or checksum. When the whole file is there, its SHA-256 is
 * checked where one is known (given by the caller, or by `X-Linked-ETag`), and the partial file is
 * renamed to the destination: the destination exists only complete and verified. A checksum
 * mismatch deletes the partial file, and so does a file that does not start as a GGUF model does (a
 * login or error page that a server answered with 200). Where the size and the checksum were not
 * both known beforehand, the GGUF header must describe no more tensor data than the file holds
 * (check-gguf-complete.ts): a body of untold size that ends short is a broken connection (retried,
 * resuming the partial file), and a file that ends short all the same (a too small
 * `Content-Length`) is deleted.
 */
import { rename } from "node:fs/promises";
import { dirname } from "node:path";
import { makeFolder } from "../../files/make-folder.ts";
import { createPartialFile } from "./create-partial-file.ts";
import type { DownloadListener } from "./download-progress.ts";
import type { ReadFreeBytes } from "./ensure-free-space.ts";
import { findMissingGgufData } from "./find-missing-gguf-data.ts";
import { hashFile } from "./hash-file.ts";
import { ModelDownloadError } from "./model-download-error.ts";
import { readFileSize } from "./read-file-size.ts";
import type { ReceivedFile } from "./receive-download-answer.ts";
import { redactUrl } from "./redact-url.ts";
import type { Expected } from "./refresh-expected.ts";
import { retryTransientFailures } from "./retry-transient-failures.ts";
import { runDownloadAttempt } from "./run-download-attempt.ts";
import { startsAsGguf } from "./starts-as-gguf.ts";

export { UNVALIDATED_OVERLAP_BYTES } from "./run-download-attempt.ts";

/** Options of {@link downloadFile}. */
export interface DownloadFileOptions extends DownloadListener {
  url: string;
  /** Where the complete file ends up; its folder is created. */
  destination: string;
  /** Bytes, where known in advance (a repository listing); the server must agree. */
  expectedSize?: number | undefined;
  /** Lowercase hex SHA-256, where known in advance; else taken from `X-Linked-ETag` if sent. */
  expectedSha256?: string | undefined;
  /**
   * The size and SHA-256 of the file as it is now, asked again when the file is seen to have
   * changed during the download (a repository listing); without it, only those given here stay
   * known, and the rest is taken again from the next answer's `X-Linked-ETag` and
   * `X-Linked-Size`. A new version was checked against the old version's checksum, found
   * "corrupt" and deleted.
   */
  refreshExpected?: () => Promise<ExpectedFile>;
  /** The `Authorization` value for a request URL, or `undefined`. */
  authorize?: (url: URL) => string | undefined;
  /** An origin whose plain `ETag`, when 64 hex digits, is the file's SHA-256 (Hugging Face). */
  trustedEtagOrigin?: string | undefined;
  signal?: AbortSignal | undefined;
  /** Attempts in a row without a new byte before giving up. Default 5. */
  maxAttempts?: number;
  /** Pause before the first retry, doubled for each further one (at most 30 s). Default 1000. */
  retryDelayMilliseconds?: number;
  /** A request that receives nothing for this long is abandoned (and retried). Default 60 000. */
  stallTimeoutMilliseconds?: number;
  /**
   * Throws when this download may no longer finish the file (another process took over its
   * download lock); called before the complete partial file is checked and before it is renamed,
   * which then do not happen.
   */
  ensureLockHeld?: () => Promise<void>;
  /**
   * Bytes free for this process in a folder; `undefined` when it cannot be told (the check is
   * skipped). Default: `statfs`'s available blocks times their size. Tests pretend a full disk.
   */
  freeBytes?: ReadFreeBytes;
}

/** What is known of a file before its download, from a listing or the server's headers. */
export interface ExpectedFile {
  size: number | undefined;
  /** Lowercase hex SHA-256. */
  sha256: string | undefined;
}

/** A downloaded, complete file. */
export interface DownloadedFile {
  path: string;
  bytes: number;
  /** The SHA-256 the file was verified against; `undefined` when none was known. */
  sha256: string | undefined;
}

export async function downloadFile(options: DownloadFileOptions): Promise<DownloadedFile> {
  const partial = createPartialFile(`${options.destination}.partial`);
  const partialPath = partial.path;
  const expected: Expected = { size: options.expectedSize, sha256: options.expectedSha256, stale: false };
  await makeFolder(dirname(options.destination));
  // Hosts that answered this download: a refusal from one of them later is a restart, retried.
  const answeredHosts = new Set<string>();
  const attempt = async (): Promise<ReceivedFile> => {
    for (let continuing = false; ; continuing = true) {
      const received = await runDownloadAttempt({ options, partial, expected, answeredHosts, continuing });
      if (received !== "next-part") return received;
    }
  };
  const received = await retryTransientFailures(attempt, {
    maxAttempts: options.maxAttempts,
    retryDelayMilliseconds: options.retryDelayMilliseconds,
    signal: options.signal,
    onNotice: options.onNotice,
    progress: () => readFileSize(partialPath),
  }).catch(async (error: unknown) => {
    // Whether running again resumes or starts over (a server that failed from the first byte).
    if (error instanceof ModelDownloadError) error.keptBytes = await readFileSize(partialPath);
    throw error;
  });
  const { bytes } = received;
  // The file of a download another process took over is its to check, delete or rename.
  await options.ensureLockHeld?.();
  if (!(await startsAsGguf(partialPath))) {
    await partial.remove();
    const what = received.contentType === undefined ? "" : ` (${received.contentType})`;
    throw new ModelDownloadError(
      "invalid-response",
      `${redactUrl(new URL(options.url))} sent ${bytes} bytes${what} that are not a GGUF model file (which starts with "GGUF"), such as a login or error page; the download was deleted. Check the URL, and that the file may be downloaded without signing in.`,
    );
  }
  if (expected.size !== undefined && bytes !== expected.size) {
    await partial.remove();
    throw new ModelDownloadError(
      "size-mismatch",
      `The download of ${redactUrl(new URL(options.url))} has ${bytes} bytes, but ${expected.size} were expected; the partial file was deleted.`,
    );
  }
  // Without both a size and a checksum published beforehand, the header is what tells a whole
  // file from one a server cut short while claiming it complete (a too small Content-Length).
  if (!received.checked && (expected.size === undefined || expected.sha256 === undefined)) {
    const cut = await findMissingGgufData(partialPath);
    if (cut !== undefined) {
      await partial.remove();
      throw new ModelDownloadError(
        "size-mismatch",
        `The download of ${redactUrl(new URL(options.url))} was cut short: ${cut}; the download was deleted. Try again; if this repeats, the server sends the file incompletely.`,
      );
    }
  }
  if (expected.sha256 !== undefined) {
    options.onNotice?.("Verifying the SHA-256 checksum.");
    const actual = await hashFile(partialPath, options.signal);
    if (actual !== expected.sha256) {
      await partial.remove();
      throw new ModelDownloadError(
        "checksum",
        `The download of ${redactUrl(new URL(options.url))} is corrupt: its SHA-256 is ${actual}, but ${expected.sha256} was expected. The partial file was deleted; download it again.`,
      );
    }
  }
  // Hashing a large file takes a while.
  await options.ensureLockHeld?.();
  await rename(partialPath, options.destination);
  await partial.forgetVersion();
  return { path: options.destination, bytes, sha256: expected.sha256 };
}
