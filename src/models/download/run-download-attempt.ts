import type { PartialFile, PartialFileVersion } from "./create-partial-file.ts";
import { createStallWatchdog } from "./create-stall-watchdog.ts";
import type { DownloadFileOptions } from "./download-file.ts";
import { fetchFollowingRedirects } from "./fetch-following-redirects.ts";
import { ModelDownloadError } from "./model-download-error.ts";
import { readFileSize } from "./read-file-size.ts";
import { type ReceivedFile, receiveDownloadAnswer } from "./receive-download-answer.ts";
import { type Expected, refreshExpected } from "./refresh-expected.ts";
import { formatSeconds } from "./retry-transient-failures.ts";

/**
 * Bytes before the resume point asked for again when the partial file's version has no validator
 * (no `ETag` or `Last-Modified`): compared with the saved ones, they tell a file replaced by one
 * of the same size (0.1 % of a 64 MB part; a change only further back is found by the checksum,
 * where one is published).
 */
export const UNVALIDATED_OVERLAP_BYTES = 64 * 1024;

/**
 * One request for the rest of the file. Returns the complete partial file, or `next-part` when a
 * part ended cleanly before the file does (receive-download-answer.ts reads the answer); throws a
 * {@link ModelDownloadError} (retryable or not) or the caller's abort reason.
 */
export async function runDownloadAttempt(context: {
  options: DownloadFileOptions;
  partial: PartialFile;
  expected: Expected;
  /** Hosts that answered this download: a refusal from one of them later is a restart, retried. */
  answeredHosts: Set<string>;
  /** This request asks for the next part right after the previous one ended (no "Resuming" notice). */
  continuing: boolean;
}): Promise<ReceivedFile | "next-part"> {
  const { options, partial, expected, answeredHosts, continuing } = context;
  const partialPath = partial.path;
  if (expected.stale) await refreshExpected(options, expected);
  let offset = await readFileSize(partialPath);
  // Whether this attempt dropped the partial file (or began writing it again from its start): a
  // failure then starts the download over (retry-transient-failures.ts counts those).
  const attempt = { restarted: false };
  if (expected.size !== undefined && offset > expected.size) {
    await partial.remove();
    attempt.restarted = true;
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
  try {
    const kept: PartialFileVersion =
      offset > 0 ? await partial.readVersion() : { validator: undefined, size: undefined };
    // Without a validator for If-Range, a file replaced by one of the same size was spliced onto
    // the partial file: the range starts a little earlier, and those bytes are compared with the
    // saved ones (a `206` from an earlier byte, in receive-download-answer.ts), so a changed file
    // starts over.
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
    return await receiveDownloadAnswer({
      options,
      partial,
      expected,
      attempt,
      continuing,
      offset,
      kept,
      response,
      url,
      linked,
      signal,
      watchdog,
    });
  } catch (error) {
    if (attempt.restarted && error instanceof ModelDownloadError) error.startedOver = true;
    throw error;
  } finally {
    watchdog.stop();
  }
}
