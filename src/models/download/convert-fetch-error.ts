import { ModelDownloadError } from "./model-download-error.ts";
import { redactUrl, redactUrlsInText } from "./redact-url.ts";

/** Connection failures that a new attempt may well not meet again. */
const transientCodes = new Set([
  "ECONNRESET",
  "ECONNABORTED",
  "EPIPE",
  "ETIMEDOUT",
  "UND_ERR_SOCKET",
  "UND_ERR_CLOSED",
  "UND_ERR_CONNECT_TIMEOUT",
  "UND_ERR_HEADERS_TIMEOUT",
  "UND_ERR_BODY_TIMEOUT",
]);

/**
 * Turns what `fetch` threw (`phase: "request"`) or reading its body threw (`phase: "body"`) into a
 * {@link ModelDownloadError}: a broken body, a reset or a timeout is `interrupted` (retried);
 * any other failure to get an answer (DNS, refused connection, certificate, blocked port) is
 * `unreachable`, which repeats until the network or the URL changes. An abort is passed on as it
 * is: the caller's reason, or the stall watchdog's error.
 */
export function convertFetchError(
  error: unknown,
  options: { url: URL; signal: AbortSignal | undefined; phase: "request" | "body" },
): unknown {
  const { url, signal } = options;
  if (signal?.aborted) return signal.reason;
  if (error instanceof ModelDownloadError) return error;
  const cause = error instanceof Error && error.cause instanceof Error ? error.cause : error;
  const code = readCode(cause) ?? readCode(error);
  // The reason goes into client messages and logs: a URL it repeats loses its secrets. An error
  // whose text held a URL is not kept as the cause either, since a logger prints causes too.
  const rawReason = cause instanceof Error ? cause.message : String(cause);
  const reason = redactUrlsInText(rawReason);
  const kept = reason === rawReason ? { cause: error } : {};
  if (options.phase === "body" || (code !== undefined && transientCodes.has(code))) {
    return new ModelDownloadError(
      "interrupted",
      `The connection to ${url.host} broke while downloading ${redactUrl(url)} (${reason}).`,
      kept,
    );
  }
  return new ModelDownloadError("unreachable", `Cannot reach ${url.host} (${reason}).`, kept);
}

function readCode(value: unknown): string | undefined {
  if (typeof value !== "object" || value === null || !("code" in value)) return undefined;
  return typeof value.code === "string" ? value.code : undefined;
}
