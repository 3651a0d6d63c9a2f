/**
 * Downloads one file resumably, verified and atomically.
 *
 * The bytes go to `DESTINATION.partial` beside the destination. An attempt asks for the rest of
 * the file with `Range: bytes=N-` when the partial file holds N bytes: `206` appends (after
 * checking that `Content-Range` starts at N), `200` means the server ignored the range and the
 * file is written again from its start, `416` means the partial file is already whole (or does
 * not fit the file, and is dropped). The file's size comes from `Content-Range` or
 * `Content-Length` and must match the size known in advance, if any. A broken connection, a stall
 * or a 5xx/429 answer is retried after a growing pause, resuming where the file ends; an attempt
 * that added bytes does not count against the limit. When the whole file is there, its SHA-256 is
 * checked where one is known (given by the caller, or by `X-Linked-ETag`), and the partial file is
 * renamed to the destination: the destination exists only complete and verified. A checksum
 * mismatch deletes the partial file, and so does a file that does not start as a GGUF model does
 * (a login or error page that a server answered with 200).
 */
import { mkdir, open, rename, rm, stat } from "node:fs/promises";
import { dirname } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { convertFetchError } from "./convert-fetch-error.ts";
import { createHttpStatusError } from "./create-http-status-error.ts";
import { createStallWatchdog } from "./create-stall-watchdog.ts";
import type { DownloadListener } from "./download-progress.ts";
import { fetchFollowingRedirects } from "./fetch-following-redirects.ts";
import { formatBytes } from "./format-download-figures.ts";
import { hashFile } from "./hash-file.ts";
import { ModelDownloadError } from "./model-download-error.ts";
import { parseContentRange } from "./parse-content-range.ts";
import { redactUrl } from "./redact-url.ts";
import { startsAsGguf } from "./starts-as-gguf.ts";

/** Options of {@link downloadFile}. */
export interface DownloadFileOptions extends DownloadListener {
  url: string;
  /** Where the complete file ends up; its folder is created. */
  destination: string;
  /** Bytes, where known in advance (a repository listing); the server must agree. */
  expectedSize?: number | undefined;
  /** Lowercase hex SHA-256, where known in advance; else taken from `X-Linked-ETag` if sent. */
  expectedSha256?: string | undefined;
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
}

/** A downloaded, complete file. */
export interface DownloadedFile {
  path: string;
  bytes: number;
  /** The SHA-256 the file was verified against; `undefined` when none was known. */
  sha256: string | undefined;
}

const maxRetryDelayMilliseconds = 30_000;

export async function downloadFile(options: DownloadFileOptions): Promise<DownloadedFile> {
  const partialPath = `${options.destination}.partial`;
  const maxAttempts = options.maxAttempts ?? 5;
  const retryDelay = options.retryDelayMilliseconds ?? 1000;
  const expected = { size: options.expectedSize, sha256: options.expectedSha256 };
  await mkdir(dirname(options.destination), { recursive: true });
  let failures = 0;
  let received: ReceivedFile;
  for (;;) {
    const before = await readFileSize(partialPath);
    try {
      received = await runAttempt(options, partialPath, expected);
      break;
    } catch (error) {
      if (options.signal?.aborted) throw options.signal.reason;
      const progressed = (await readFileSize(partialPath)) > before;
      failures = progressed ? 1 : failures + 1;
      if (!(error instanceof ModelDownloadError) || !error.retryable || failures >= maxAttempts) throw error;
      const pause = Math.min(retryDelay * 2 ** (failures - 1), maxRetryDelayMilliseconds);
      options.onNotice?.(
        `${error.message} Retrying in ${formatSeconds(pause)} (attempt ${failures + 1} of ${maxAttempts}).`,
      );
      await delay(pause, undefined, { signal: options.signal });
    }
  }
  const { bytes } = received;
  if (!(await startsAsGguf(partialPath))) {
    await rm(partialPath, { force: true });
    const what = received.contentType === undefined ? "" : ` (${received.contentType})`;
    throw new ModelDownloadError(
      "invalid-response",
      `${redactUrl(new URL(options.url))} sent ${bytes} bytes${what} that are not a GGUF model file (which starts with "GGUF"), such as a login or error page; the download was deleted. Check the URL, and that the file may be downloaded without signing in.`,
    );
  }
  if (expected.size !== undefined && bytes !== expected.size) {
    await rm(partialPath, { force: true });
    throw new ModelDownloadError(
      "size-mismatch",
      `The download of ${redactUrl(new URL(options.url))} has ${bytes} bytes, but ${expected.size} were expected; the partial file was deleted.`,
    );
  }
  if (expected.sha256 !== undefined) {
    options.onNotice?.("Verifying the SHA-256 checksum.");
    const actual = await hashFile(partialPath, options.signal);
    if (actual !== expected.sha256) {
      await rm(partialPath, { force: true });
      throw new ModelDownloadError(
        "checksum",
        `The download of ${redactUrl(new URL(options.url))} is corrupt: its SHA-256 is ${actual}, but ${expected.sha256} was expected. The partial file was deleted; download it again.`,
      );
    }
  }
  await rename(partialPath, options.destination);
  return { path: options.destination, bytes, sha256: expected.sha256 };
}

/** The complete partial file after an attempt. */
interface ReceivedFile {
  bytes: number;
  /** The `Content-Type` of the answer that sent its bytes, when it had one. */
  contentType: string | undefined;
}

/**
 * One request for the rest of the file. Returns the complete partial file; throws a
 * {@link ModelDownloadError} (retryable or not) or the caller's abort reason.
 */
async function runAttempt(
  options: DownloadFileOptions,
  partialPath: string,
  expected: { size: number | undefined; sha256: string | undefined },
): Promise<ReceivedFile> {
  let offset = await readFileSize(partialPath);
  if (expected.size !== undefined && offset > expected.size) {
    await rm(partialPath, { force: true });
    offset = 0;
  }
  if (expected.size !== undefined && offset === expected.size)
    return { bytes: offset, contentType: undefined };
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
  try {
    const { response, url, linked } = await fetchFollowingRedirects({
      url: options.url,
      headers: offset > 0 ? { range: `bytes=${offset}-` } : {},
      authorize: options.authorize,
      trustedEtagOrigin: options.trustedEtagOrigin,
      signal,
    });
    watchdog.touch();
    expected.sha256 ??= linked.sha256;
    expected.size ??= linked.size;
    const body = response.body;
    const discard = () => body?.cancel().catch(() => {});
    let start: number;
    let total: number | undefined;
    if (response.status === 206) {
      const range = parseContentRange(response.headers.get("content-range"));
      if (range?.type !== "part" || range.start !== offset) {
        await discard();
        await rm(partialPath, { force: true });
        throw new ModelDownloadError(
          "interrupted",
          `${url.host} sent another part of the file than the one asked for; starting over.`,
        );
      }
      start = offset;
      total = range.total;
      if (offset > 0) {
        options.onNotice?.(
          `Resuming at ${formatBytes(offset)}${total === undefined ? "" : ` of ${formatBytes(total)}`}.`,
        );
      }
    } else if (response.status === 200) {
      if (offset > 0) options.onNotice?.(`${url.host} cannot resume downloads; starting over.`);
      start = 0;
      total = response.headers.has("content-encoding")
        ? undefined
        : readContentLength(response.headers.get("content-length"));
    } else if (response.status === 416) {
      await discard();
      const range = parseContentRange(response.headers.get("content-range"));
      if (range?.type === "unsatisfied" && range.total === offset)
        return { bytes: offset, contentType: undefined };
      await rm(partialPath, { force: true });
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
    const written = await writeBody({
      body,
      path: partialPath,
      start,
      total,
      url,
      signal,
      watchdog,
      options,
    });
    if (total !== undefined && written < total) {
      throw new ModelDownloadError(
        "interrupted",
        `The connection to ${url.host} closed after ${formatBytes(written)} of ${formatBytes(total)}.`,
      );
    }
    if (total !== undefined && written > total) {
      await rm(partialPath, { force: true });
      throw new ModelDownloadError(
        "interrupted",
        `${url.host} sent more than the announced ${total} bytes; starting over.`,
      );
    }
    return { bytes: written, contentType: response.headers.get("content-type") ?? undefined };
  } finally {
    watchdog.stop();
  }
}

/** Writes the body to the partial file from `start` on; returns the file's size afterwards. */
async function writeBody(context: {
  body: ReadableStream<Uint8Array> | null;
  path: string;
  start: number;
  total: number | undefined;
  url: URL;
  signal: AbortSignal;
  watchdog: { touch(): void };
  options: DownloadListener;
}): Promise<number> {
  const { body, start, total } = context;
  const file = await open(context.path, start === 0 ? "w" : "a");
  let received = start;
  try {
    context.options.onProgress?.({ receivedBytes: received, totalBytes: total, startBytes: start });
    if (body !== null) {
      try {
        for await (const chunk of body) {
          await file.write(chunk);
          received += chunk.byteLength;
          context.watchdog.touch();
          context.options.onProgress?.({ receivedBytes: received, totalBytes: total, startBytes: start });
          // More than announced: stop at once rather than fill the disk.
          if (total !== undefined && received > total) break;
        }
      } catch (error) {
        throw convertFetchError(error, { url: context.url, signal: context.signal, phase: "body" });
      }
    }
  } finally {
    await file.close();
  }
  return received;
}

function readContentLength(header: string | null): number | undefined {
  return header !== null && /^\d+$/.test(header.trim()) ? Number(header.trim()) : undefined;
}

async function readFileSize(path: string): Promise<number> {
  const found = await stat(path).catch(() => undefined);
  return found?.isFile() ? found.size : 0;
}

function formatSeconds(milliseconds: number): string {
  const seconds = milliseconds / 1000;
  return `${Number.isInteger(seconds) ? seconds : seconds.toFixed(1)} s`;
}
