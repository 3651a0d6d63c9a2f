/** Header values as undici gives them: one string, several, or none. */
type HeaderValue = string | string[] | undefined;

/** JSON media types: `application/json`, `application/...+json`. */
const JSON_TYPE = /^application\/([\w.-]+\+)?json$/;

/** A `content-type`'s media type, lower-cased, without parameters; `undefined` when there is none. */
export function readMediaType(contentType: HeaderValue): string | undefined {
  const type = (Array.isArray(contentType) ? contentType[0] : contentType)?.split(";", 1)[0]?.trim();
  return type === undefined || type === "" ? undefined : type.toLowerCase();
}

/** Whether a media type (as {@link readMediaType} returns it) is JSON. */
export function isJsonType(mediaType: string): boolean {
  return JSON_TYPE.test(mediaType);
}

/** A `content-encoding` other than `identity`, as sent; `undefined` for an uncompressed body. */
export function readContentEncoding(header: HeaderValue): string | undefined {
  const value = (Array.isArray(header) ? header.join(", ") : header)?.trim();
  return value === undefined || value === "" || value.toLowerCase() === "identity" ? undefined : value;
}
