import { dirname } from "node:path";
import type { Response } from "undici";
import { createHttpStatusError } from "./create-http-status-error.ts";
import type { PartialFile, PartialFileVersion } from "./create-partial-file.ts";
import type { StallWatchdog } from "./create-stall-watchdog.ts";
import type { DownloadFileOptions } from "./download-file.ts";
import { ensureFreeSpace } from "./ensure-free-space.ts";
import type { LinkedFileFacts } from "./fetch-following-redirects.ts";
import { findMissingGgufData } from "./find-missing-gguf-data.ts";
import { formatBytes } from "./format-download-figures.ts";
import { keepGgufBody } from "./keep-gguf-body.ts";
import { ModelDownloadError } from "./model-download-error.ts";
import { parseContentRange } from "./parse-content-range.ts";
import { readAnswerVersion, readContentLength, readValidator } from "./read-answer-version.ts";
import { readFileSize } from "./read-file-size.ts";
import { redactUrl } from "./redact-url.ts";
import { type Expected, refreshExpected } from "./refresh-expected.ts";
import { skipSavedBytes } from "./skip-saved-bytes.ts";
import { startsAsGguf } from "./starts-as-gguf.ts";
import { writeDownloadBody } from "./write-download-body.ts";

/** The complete partial file after an attempt. */
export interface ReceivedFile {
  bytes: number;
  /** The `Content-Type` of the answer that sent its bytes, when it had one. */
  contentType: string | undefined;
  /** Its GGUF header was found to describe no more data than it holds. */
  checked: boolean;
}

/**
 * The answer to one attempt's request (run-download-attempt.ts), written to the partial file: its
 * status tells how its body continues the partial file (`206` from the offset or from an earlier
 * byte, `200` of the same version, `200` of another or an untold one, `416`), its `Content-Range`
 * and validator must fit the version the partial file holds, its size the size expected, and the
 * models folder must have room for the rest. Returns the complete partial file, or `next-part` when
 * a part ended cleanly before the file does; throws a {@link ModelDownloadError} (retryable or
 * not) or the caller's abort reason, having set `attempt.restarted` when it dropped the partial
 * file (or began writing it again from its start).
 */
export async function receiveDownloadAnswer(context: {
  options: DownloadFileOptions;
  partial: PartialFile;
  expected: Expected;
  /** Whether this attempt dropped the partial file; its failure then starts the download over. */
  attempt: { restarted: boolean };
  /** This request asks for the next part right after the previous one ended (no "Resuming" notice). */
  continuing: boolean;
  /** The partial file's size when the request was sent: where the answer's bytes are written. */
  offset: number;
  /** The version of the file whose start the partial file holds (nothing kept when `offset` is 0). */
  kept: PartialFileVersion;
  response: Response;
  /** The URL that answered (after redirects). */
  url: URL;
  /** What the redirect chain said of the file (`X-Linked-Size`, `X-Linked-ETag`). */
  linked: LinkedFileFacts;
  signal: AbortSignal;
  watchdog: StallWatchdog;
}): Promise<ReceivedFile | "next-part"> {
  const {
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
  } = context;
  const partialPath = partial.path;
  const requestUrl = new URL(options.url);
  let partEnd: number | undefined;
  const startOverOnMismatch = async (named: boolean): Promise<ModelDownloadError> => {
    await partial.remove();
    attempt.restarted = true;
    expected.stale = true;
    return new ModelDownloadError(
      "interrupted",
      named
        ? `${requestUrl.host} sent bytes that differ from the partial download, although it named the same version of the file; starting over.`
        : `The file on ${requestUrl.host} changed since the partial download began (its bytes before the resume point differ; it names no version, so only its bytes can tell); starting over.`,
    );
  };
  let body = response.body;
  const discard = () => body?.cancel().catch(() => {});
  const validator = readValidator(response.headers);
  if (response.status === 200 && offset > 0 && kept.validator !== undefined && validator !== kept.validator) {
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
      attempt.restarted = true;
      throw new ModelDownloadError(
        "interrupted",
        `${url.host} sent another part of the file than the one asked for; starting over.`,
      );
    }
    if (readAnswerVersion(kept, { validator, size: range.total }) === "other") {
      await discard();
      await partial.remove();
      attempt.restarted = true;
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
    attempt.restarted = offset > 0 && kept.validator !== undefined && validator !== kept.validator;
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
    attempt.restarted = true;
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
    attempt.restarted = true;
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
}
