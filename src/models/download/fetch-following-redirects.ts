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
  /**
   * Hosts (`host:port`) that answered earlier in this download; each host that answers is added.
   * A refused connection to one of them is a server restarting (`interrupted`), not `unreachable`.
   */
  answeredHosts?: Set<string>;
  /** Part of the file is saved already: any refused connection is `interrupted`. Default false. */
  resuming?: boolean;
}

const maxRedirects = 10;
const userAgent = "tollgate (model download)";

/**
 * `fetch` with redirects followed by hand, so the headers of every hop can be read: Hugging Face
 * puts the file's SHA-256 and size on its redirect to the CDN (`X-Linked-ETag`, `X-Linked-Size`),
 * and credentials must only go to the host they belong to. Compression is refused so that byte
 * counts and ranges refer to the file itself. A user and password in a URL are sent as HTTP Basic
 * authorization to that URL's origin (and there in place of `authorize`'s). Only redirects to
 * `http:` and `https:` URLs are followed; one elsewhere (`file:`, `data:`) is an error naming it.
 */
export async function fetchFollowingRedirects(
  options: FetchFollowingRedirectsOptions,
): Promise<{ response: Response; url: URL; linked: LinkedFileFacts }> {
  const linked: LinkedFileFacts = { sha256: undefined, size: undefined };
  let url = new URL(options.url);
  let credentials: UrlCredentials | undefined;
  for (let hop = 0; ; hop++) {
    credentials = takeUrlCredentials(url) ?? credentials;
    const headers: Record<string, string> = {
      "user-agent": userAgent,
      "accept-encoding": "identity",
      ...options.headers,
    };
    const authorization =
      credentials?.origin === url.origin ? credentials.authorization : options.authorize?.(url);
    if (authorization !== undefined) headers.authorization = authorization;
    let response: Response;
    try {
      response = await downloadFetch(url, { headers, redirect: "manual", signal: options.signal });
    } catch (error) {
      const contacted = options.resuming === true || options.answeredHosts?.has(url.host) === true;
      throw convertFetchError(error, { url, signal: options.signal, phase: "request", contacted });
    }
    options.answeredHosts?.add(url.host);
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
      const target = parseRedirectTarget(location, url);
      if (target.protocol !== "http:" && target.protocol !== "https:") {
        // fetch cannot get a file: URL (and must not: a server would pick a local file to read),
        // and a data: URL is whatever bytes the redirect itself carries.
        throw new ModelDownloadError(
          "invalid-response",
          `${redactUrl(url)} redirects to a ${target.protocol} URL; only redirects to http: and https: URLs are followed.`,
        );
      }
      url = target;
      continue;
    }
    if (url.origin === options.trustedEtagOrigin && response.ok) {
      linked.sha256 ??= readSha256(response.headers.get("etag"));
    }
    return { response, url, linked };
  }
}

/** A `Location` resolved against the URL that sent it; one that is no URL at all is an error. */
function parseRedirectTarget(location: string, base: URL): URL {
  try {
    return new URL(location, base);
  } catch {
    throw new ModelDownloadError(
      "invalid-response",
      `${redactUrl(base)} redirects to something that is not a URL.`,
    );
  }
}

/** HTTP Basic credentials taken out of a URL, for the origin they were written for. */
interface UrlCredentials {
  origin: string;
  /** The `Authorization` value. */
  authorization: string;
}

/**
 * Takes a user and password written in the URL (`https://user:password@host/...`) out of it, as
 * HTTP Basic credentials. `fetch` refuses a URL that carries them (and its error repeats the URL,
 * secrets and all), and a redirect resolved against such a URL would carry them to wherever it
 * points; as a header they go to their own origin only.
 */
function takeUrlCredentials(url: URL): UrlCredentials | undefined {
  if (url.username === "" && url.password === "") return undefined;
  const user = decodeURIComponentSafely(url.username);
  const password = decodeURIComponentSafely(url.password);
  url.username = "";
  url.password = "";
  return {
    origin: url.origin,
    authorization: `Basic ${Buffer.from(`${user}:${password}`).toString("base64")}`,
  };
}

function decodeURIComponentSafely(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
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
