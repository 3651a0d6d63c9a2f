/** Header values as undici gives them: one string, several, or none. */
type HeaderValue = string | string[] | undefined;

/** JSON media types: `application/json`, `application/...+json`. */
const JSON_TYPE = /^application\/([\w.-]+\+)?json$/;

/** Longest `content-encoding` value repeated in a message. */
const MAX_ENCODING_LENGTH = 40;

/** A `content-type`'s media type, lower-cased, without parameters; `undefined` when there is none. */
export function readMediaType(contentType: HeaderValue): string | undefined {
  const type = (Array.isArray(contentType) ? contentType[0] : contentType)?.split(";", 1)[0]?.trim();
  return type === undefined || type === "" ? undefined : type.toLowerCase();
}

/** Whether a media type (as {@link readMediaType} returns it) is JSON. */
export function isJsonType(mediaType: string): boolean {
  return JSON_TYPE.test(mediaType);
}

/**
 * A `content-encoding` other than `identity`, as sent (cut short: it goes into a message);
 * `undefined` for an uncompressed body.
 */
export function readContentEncoding(header: HeaderValue): string | undefined {
  const value = (Array.isArray(header) ? header.join(", ") : header)?.trim();
  if (value === undefined || value === "" || value.toLowerCase() === "identity") return undefined;
  return value.length <= MAX_ENCODING_LENGTH ? value : `${value.slice(0, MAX_ENCODING_LENGTH - 1)}…`;
}
