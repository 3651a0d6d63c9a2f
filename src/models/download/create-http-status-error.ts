import { ModelDownloadError } from "./model-download-error.ts";
import { redactUrl } from "./redact-url.ts";

/** The longest `Retry-After` honoured: a server asking for more is tried again after this. */
export const maxRetryAfterMilliseconds = 60_000;

/** The error for an HTTP answer that is neither the file nor a redirect. */
export function createHttpStatusError(response: Response, url: URL): ModelDownloadError {
  const status = `${response.status}${response.statusText === "" ? "" : ` ${response.statusText}`}`;
  const shown = redactUrl(url);
  if (response.status === 404 || response.status === 410) {
    return new ModelDownloadError(
      "not-found",
      `${shown} does not exist (HTTP ${status}); check the model URI.`,
    );
  }
  if (response.status === 401 || response.status === 403) {
    return new ModelDownloadError(
      "access-denied",
      `${shown} refused the download (HTTP ${status}): it needs credentials that may read it. From a Hugging Face repository, private or gated (accept its licence on the hub first), set HF_TOKEN to a token of an account that may; from another server, write its user and password in the URL (https://user:password@host/...) or use a signed URL.`,
    );
  }
  if (response.status === 408 || response.status === 429 || response.status >= 500) {
    const retryAfterMilliseconds =
      response.status === 429 || response.status === 503
        ? parseRetryAfter(response.headers.get("retry-after"), Date.now())
        : undefined;
    return new ModelDownloadError("server-error", `${url.host} answered HTTP ${status}.`, {
      retryAfterMilliseconds,
    });
  }
  return new ModelDownloadError("invalid-response", `${shown} answered HTTP ${status}, not the file.`);
}

/**
 * A `Retry-After` value (RFC 9110 section 10.2.3: seconds, or an HTTP date) as milliseconds from
 * `now`, at most {@link maxRetryAfterMilliseconds}; `undefined` when absent or unreadable.
 */
export function parseRetryAfter(header: string | null, now: number): number | undefined {
  const text = header?.trim();
  if (text === undefined || text === "") return undefined;
  const wait = /^\d+$/.test(text) ? Number(text) * 1000 : Date.parse(text) - now;
  if (Number.isNaN(wait)) return undefined;
  return Math.min(Math.max(wait, 0), maxRetryAfterMilliseconds);
}
