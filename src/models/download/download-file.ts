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
import { mkdir, rename, stat } from "node:fs/promises";
import { dirname } from "node:path";
import { createHttpStatusError } from "./create-http-status-error.ts";
import { createPartialFile, type PartialFile, type PartialFileVersion } from "./create-partial-file.ts";
import { createStallWatchdog } from "./create-stall-watchdog.ts";
import type { DownloadListener } from "./download-progress.ts";
import { ensureFreeSpace, type ReadFreeBytes } from "./ensure-free-space.ts";
import { fetchFollowingRedirects } from "./fetch-following-redirects.ts";
import { findMissingGgufData } from "./find-missing-gguf-data.ts";
import { formatBytes } from "./format-download-figures.ts";
import { hashFile } from "./hash-file.ts";
import { keepGgufBody } from "./keep-gguf-body.ts";
import { ModelDownloadError } from "./model-download-error.ts";
import { parseContentRange } from "./parse-content-range.ts";
import { readAnswerVersion, readContentLength, readValidator } from "./read-answer-version.ts";
import { redactUrl } from "./redact-url.ts";
import { formatSeconds, retryTransientFailures } from "./retry-transient-failures.ts";
import { skipSavedBytes } from "./skip-saved-bytes.ts";
import { startsAsGguf } from "./starts-as-gguf.ts";
import { writeDownloadBody } from "./write-download-body.ts";

/**
 * Bytes before the resume point asked for again when the partial file's version has no validator
 * (no `ETag` or `Last-Modified`): compared with the saved ones, they tell a file replaced by one
 * of the same size (0.1 % of a 64 MB part; a change only further back is found by the checksum,
 * where one is published).
 */
export const UNVALIDATED_OVERLAP_BYTES = 64 * 1024;

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

/** What a download checks the file against; `stale` once the file changed, until asked again. */
interface Expected extends ExpectedFile {
  stale: boolean;
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
  await mkdir(dirname(options.destination), { recursive: true });
  // Hosts that answered this download: a refusal from one of them later is a restart, retried.
  const answeredHosts = new Set<string>();
  const attempt = async (): Promise<ReceivedFile> => {
    for (let continuing = false; ; continuing = true) {
      const received = await runAttempt(options, partial, expected, answeredHosts, continuing);
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

/** The complete partial file after an attempt. */
interface ReceivedFile {
  bytes: number;
  /** The `Content-Type` of the answer that sent its bytes, when it had one. */
  contentType: string | undefined;
  /** Its GGUF header was found to describe no more data than it holds. */
  checked: boolean;
}

/**
 * One request for the rest of the file. Returns the complete partial file; throws a
 * {@link ModelDownloadError} (retryable or not) or the caller's abort reason.
 */
async function runAttempt(
  options: DownloadFileOptions,
  partial: PartialFile,
  expected: Expected,
  answeredHosts: Set<string>,
  continuing: boolean,
): Promise<ReceivedFile | "next-part"> {
  const partialPath = partial.path;
  if (expected.stale) await refreshExpected(options, expected);
  let offset = await readFileSize(partialPath);
  // Whether this attempt dropped the partial file (or began writing it again from its start): a
  // failure then starts the download over (retry-transient-failures.ts counts those).
  let restarted = false;
  if (expected.size !== undefined && offset > expected.size) {
    await partial.remove();
    restarted = true;
    offset = 0;
  }
  if (expected.size !== undefined && offset === expected.size)
    return { bytes: offset, contentType: undefined, checked: false };
  const requestUrl = new URL(options.url);
  const stallMilliseconds = options.stallTimeoutMilliseconds ?? 60_000;
  const watchdog = createStallWatchdog({
    milliseconds: stallMilliseconds,
    createError: () =>
      new ModelDownloadError(
        "interrupted",
        `${requestUrl.host} sent nothing for ${formatSeconds(stallMilliseconds)}.`,
      ),
  });
  const signal =
    options.signal === undefined ? watchdog.signal : AbortSignal.any([options.signal, watchdog.signal]);
  let partEnd: number | undefined;
  const startOverOnMismatch = async (named: boolean): Promise<ModelDownloadError> => {
    await partial.remove();
    restarted = true;
    expected.stale = true;
    return new ModelDownloadError(
      "interrupted",
      named
        ? `${requestUrl.host} sent bytes that differ from the partial download, although it named the same version of the file; starting over.`
        : `The file on ${requestUrl.host} changed since the partial download began (its bytes before the resume point differ; it names no version, so only its bytes can tell); starting over.`,
    );
  };
  try {
    const kept: PartialFileVersion =
      offset > 0 ? await partial.readVersion() : { validator: undefined, size: undefined };
    // Without a validator for If-Range, a file replaced by one of the same size was spliced onto
    // the partial file: the range starts a little earlier, and those bytes are compared with the
    // saved ones (a `206` from an earlier byte, below), so a changed file starts over.
    const rangeStart =
      kept.validator === undefined ? Math.max(0, offset - UNVALIDATED_OVERLAP_BYTES) : offset;
    const { response, url, linked } = await fetchFollowingRedirects({
      url: options.url,
      headers:
        offset > 0
          ? {
              range: `bytes=${rangeStart}-`,
              ...(kept.validator === undefined ? {} : { "if-range": kept.validator }),
            }
          : {},
      authorize: options.authorize,
      trustedEtagOrigin: options.trustedEtagOrigin,
      signal,
      answeredHosts,
      resuming: offset > 0,
    });
    watchdog.touch();
    let body = response.body;
    const discard = () => body?.cancel().catch(() => {});
    const validator = readValidator(response.headers);
    if (
      response.status === 200 &&
      offset > 0 &&
      kept.validator !== undefined &&
      validator !== kept.validator
    ) {
      // Another version, sent whole: checked against what is known of it, not of the old one.
      expected.stale = true;
      await refreshExpected(options, expected).catch(async (error: unknown) => {
        await discard();
        throw error;
      });
    }
    expected.sha256 ??= linked.sha256;
    expected.size ??= linked.size;
    let start: number;
    let total: number | undefined;
    if (response.status === 206) {
      const range = parseContentRange(response.headers.get("content-range"));
      if (range?.type !== "part" || range.start > offset) {
        await discard();
        await partial.remove();
        restarted = true;
        throw new ModelDownloadError(
          "interrupted",
          `${url.host} sent another part of the file than the one asked for; starting over.`,
        );
      }
      if (readAnswerVersion(kept, { validator, size: range.total }) === "other") {
        await discard();
        await partial.remove();
        restarted = true;
        expected.stale = true;
        throw new ModelDownloadError(
          "interrupted",
          `The file on ${url.host} changed since the partial download began; starting over.`,
        );
      }
      // A part from an earlier byte than asked: the bytes already saved are compared, not dropped.
      if (range.start < offset && body !== null) {
        body = skipSavedBytes(body, {
          path: partialPath,
          position: range.start,
          count: offset - range.start,
          onBytes: () => watchdog.touch(),
          mismatch: () => startOverOnMismatch(kept.validator !== undefined),
        });
      }
      start = offset;
      total = range.total;
      // A server that sends ranges in parts (this one ending before the file does) is asked for
      // the next at once when this one ends where it said it would.
      partEnd = range.end + 1;
      if (offset > 0 && !continuing) {
        options.onNotice?.(
          `Resuming at ${formatBytes(offset)}${total === undefined ? "" : ` of ${formatBytes(total)}`}.`,
        );
      }
    } else if (
      response.status === 200 &&
      offset > 0 &&
      !response.headers.has("content-encoding") &&
      readAnswerVersion(kept, {
        validator,
        size: readContentLength(response.headers.get("content-length")),
      }) === "same"
    ) {
      // The whole file again, of the version the partial file holds the start of (a CDN that
      // ignores Range): its first bytes are compared with the saved ones, and the rest appended.
      options.onNotice?.(
        `${url.host} sent the whole file again; comparing the ${formatBytes(offset)} already saved, then resuming.`,
      );
      if (body !== null) {
        body = skipSavedBytes(body, {
          path: partialPath,
          position: 0,
          count: offset,
          onBytes: () => watchdog.touch(),
          mismatch: () => startOverOnMismatch(kept.validator !== undefined),
        });
      }
      start = offset;
      total = response.headers.has("content-encoding")
        ? undefined
        : readContentLength(response.headers.get("content-length"));
    } else if (response.status === 200) {
      if (offset > 0 && body !== null) {
        body = await keepGgufBody({ body, url, signal, contentType: response.headers.get("content-type") });
      }
      if (offset > 0) {
        options.onNotice?.(
          kept.validator !== undefined && validator !== kept.validator
            ? `The file on ${url.host} changed since the partial download began; starting over.`
            : `${url.host} cannot resume downloads; starting over.`,
        );
      }
      start = 0;
      // Another version: starting over. A server that cannot resume (or cannot tell) is not
      // counted so, its attempts measured by how far they get.
      restarted = offset > 0 && kept.validator !== undefined && validator !== kept.validator;
      total = response.headers.has("content-encoding")
        ? undefined
        : readContentLength(response.headers.get("content-length"));
    } else if (response.status === 416) {
      await discard();
      const range = parseContentRange(response.headers.get("content-range"));
      // Whole only if the file is still the size it had when the partial file began.
      const whole = kept.size === undefined || kept.size === offset;
      if (range?.type === "unsatisfied" && range.total === offset && whole)
        return { bytes: offset, contentType: undefined, checked: false };
      await partial.remove();
      restarted = true;
      expected.stale = true;
      throw new ModelDownloadError(
        "interrupted",
        `The partial download does not fit the file on ${url.host}; starting over.`,
      );
    } else {
      await discard();
      throw createHttpStatusError(response, url);
    }
    if (total !== undefined && expected.size !== undefined && total !== expected.size) {
      await discard();
      throw new ModelDownloadError(
        "size-mismatch",
        `${redactUrl(url)} has ${total} bytes, but ${expected.size} were expected (the file may have changed; try again).`,
      );
    }
    total ??= expected.size;
    if (total !== undefined) {
      // The partial file's bytes count as taken: a resume adds the rest, a restart empties it first.
      const rest = total - (await readFileSize(partialPath));
      await ensureFreeSpace({ folder: dirname(partialPath), rest, url, freeBytes: options.freeBytes }).catch(
        async (error: unknown) => {
          await discard();
          throw error;
        },
      );
    }
    const written = await writeDownloadBody({
      body,
      partial,
      version: { validator, size: total },
      start,
      total,
      url,
      signal,
      watchdog,
      options,
    });
    if (total !== undefined && written < total) {
      // Only after new bytes: a part wholly before the end of the partial file would be asked again for ever.
      if (written === partEnd && written > offset) return "next-part";
      throw new ModelDownloadError(
        "interrupted",
        `The connection to ${url.host} closed after ${formatBytes(written)} of ${formatBytes(total)}.`,
      );
    }
    if (total !== undefined && written > total) {
      await partial.remove();
      restarted = true;
      throw new ModelDownloadError(
        "interrupted",
        `${url.host} sent more than the announced ${total} bytes; starting over.`,
      );
    }
    // A body of untold size ends when the connection closes, cut short or not: the GGUF header
    // tells (a page that is no GGUF file is refused once the attempts end).
    const checked = total === undefined && (await startsAsGguf(partialPath));
    if (checked) {
      const cut = await findMissingGgufData(partialPath);
      if (cut !== undefined) {
        throw new ModelDownloadError(
          "interrupted",
          `The download from ${url.host} was cut short: the connection closed after ${formatBytes(written)}, before the end of the model file (${cut}).`,
        );
      }
    }
    return { bytes: written, contentType: response.headers.get("content-type") ?? undefined, checked };
  } catch (error) {
    if (restarted && error instanceof ModelDownloadError) error.startedOver = true;
    throw error;
  } finally {
    watchdog.stop();
  }
}

/**
 * Forgets what was known of the file's old version, and asks what is known of the new one
 * (`refreshExpected`); a failure to (a broken connection) leaves it to the next attempt to ask.
 */
async function refreshExpected(options: DownloadFileOptions, expected: Expected): Promise<void> {
  const fresh: ExpectedFile = (await options.refreshExpected?.()) ?? {
    size: options.expectedSize,
    sha256: options.expectedSha256,
  };
  expected.size = fresh.size;
  expected.sha256 = fresh.sha256;
  expected.stale = false;
}

async function readFileSize(path: string): Promise<number> {
  const found = await stat(path).catch(() => undefined);
  return found?.isFile() ? found.size : 0;
}
