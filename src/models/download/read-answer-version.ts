import type { PartialFileVersion } from "./create-partial-file.ts";

/**
 * How an answer to a resume relates to the version of the file whose start the partial file
 * holds: `same` when it names that version by the same strong `ETag` (a `Last-Modified` may not
 * tell two versions of one second apart) and its size, where both tell it, is the same; `other`
 * when it names another validator or tells another size (a server that ignores `If-Range` sends
 * whatever the file is now, and one without validators still tells the file's size); `unknown`
 * otherwise. `answer.size` is the whole file's size the answer tells, if any.
 */
export function readAnswerVersion(
  kept: PartialFileVersion,
  answer: PartialFileVersion,
): "same" | "other" | "unknown" {
  if (kept.validator !== undefined && answer.validator !== kept.validator) return "other";
  if (kept.size !== undefined && answer.size !== undefined && answer.size !== kept.size) return "other";
  return kept.validator?.startsWith('"') === true ? "same" : "unknown";
}

/**
 * What `If-Range` may name an answer's content by: its strong `ETag`, else its `Last-Modified`.
 * A weak `ETag` (`W/...`) is not allowed there (RFC 9110 section 13.1.5).
 */
export function readValidator(headers: Headers): string | undefined {
  const etag = headers.get("etag")?.trim();
  if (etag !== undefined && etag !== "" && !etag.startsWith("W/")) return etag;
  const lastModified = headers.get("last-modified")?.trim();
  return lastModified === undefined || lastModified === "" ? undefined : lastModified;
}

export function readContentLength(header: string | null): number | undefined {
  return header !== null && /^\d+$/.test(header.trim()) ? Number(header.trim()) : undefined;
}
