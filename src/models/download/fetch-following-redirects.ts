import type { Response } from "undici";
import { convertFetchError } from "./convert-fetch-error.ts";
import { downloadFetch } from "./download-fetch.ts";
import { ModelDownloadError } from "./model-download-error.ts";
import { redactUrl } from "./redact-url.ts";

/** What the redirect chain said about the file, before the file itself. */
export interface LinkedFileFacts {
  /** Lowercase hex SHA-256, from `X-Linked-ETag` (Hugging Face LFS) or a trusted plain `ETag`. */
  sha256: string | undefined;
  /** Bytes, from `X-Linked-Size`. */
  size: number | undefined;
}

export interface FetchFollowingRedirectsOptions {
  url: string;
  /** Extra request headers, sent on every hop (such as `Range`). */
  headers: Record<string, string>;
  /** The `Authorization` value for a hop's URL, or `undefined` (so tokens never leave their host). */
  authorize?: (url: URL) => string | undefined;
  /** An origin whose plain `ETag`, when it is 64 hex digits, is the content's SHA-256. */
  trustedEtagOrigin?: string;
  signal?: AbortSignal;
}

const maxRedirects = 10;
const userAgent = "tollgate (model download)";

/**
 * `fetch` with redirects followed by hand, so the headers of every hop can be read: Hugging Face
 * puts the file's SHA-256 and size on its redirect to the CDN (`X-Linked-ETag`, `X-Linked-Size`),
 * and credentials must only go to the host they belong to. Compression is refused so that byte
 * counts and ranges refer to the file itself.
 */
export async function fetchFollowingRedirects(
  options: FetchFollowingRedirectsOptions,
): Promise<{ response: Response; url: URL; linked: LinkedFileFacts }> {
  const linked: LinkedFileFacts = { sha256: undefined, size: undefined };
  let url = new URL(options.url);
  for (let hop = 0; ; hop++) {
    const headers: Record<string, string> = {
      "user-agent": userAgent,
      "accept-encoding": "identity",
      ...options.headers,
    };
    const authorization = options.authorize?.(url);
    if (authorization !== undefined) headers.authorization = authorization;
    let response: Response;
    try {
      response = await downloadFetch(url, { headers, redirect: "manual", signal: options.signal });
    } catch (error) {
      throw convertFetchError(error, { url, signal: options.signal, phase: "request" });
    }
    linked.sha256 ??= readSha256(response.headers.get("x-linked-etag"));
    linked.size ??= readSize(response.headers.get("x-linked-size"));
    const location = response.headers.get("location");
    if (response.status >= 300 && response.status < 400 && location !== null) {
      await response.body?.cancel().catch(() => {});
      if (hop >= maxRedirects) {
        throw new ModelDownloadError(
          "invalid-response",
          `${redactUrl(new URL(options.url))} redirects more than ${maxRedirects} times.`,
        );
      }
      url = new URL(location, url);
      continue;
    }
    if (url.origin === options.trustedEtagOrigin && response.ok) {
      linked.sha256 ??= readSha256(response.headers.get("etag"));
    }
    return { response, url, linked };
  }
}

/** A SHA-256 from an entity tag (`"hex"` or `W/"hex"`), or `undefined` when it is something else. */
function readSha256(etag: string | null): string | undefined {
  const match = etag === null ? null : /^(?:W\/)?"?([0-9a-fA-F]{64})"?$/.exec(etag.trim());
  return match?.[1]?.toLowerCase();
}

function readSize(header: string | null): number | undefined {
  if (header === null || !/^\d+$/.test(header.trim())) return undefined;
  return Number(header.trim());
}
