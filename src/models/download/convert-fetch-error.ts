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
 * Failures to connect that say the server (or the way to it) is not there: on a first contact
 * they are a wrong URL or a machine without network, but from a server that already answered
 * this download they are it restarting, or the network dropping for a moment.
 */
const passingAfterContactCodes = new Set([
  "ECONNREFUSED",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENETDOWN",
  "EAI_AGAIN",
]);

/**
 * Turns what `fetch` threw (`phase: "request"`) or reading its body threw (`phase: "body"`) into a
 * {@link ModelDownloadError}: a broken body, a reset or a timeout is `interrupted` (retried);
 * any other failure to get an answer (DNS, refused connection, certificate, blocked port) is
 * `unreachable`, which repeats until the network or the URL changes, so that a machine without
 * network fails at once. Once `contacted` (the server answered this download before, or part of
 * the file is saved), a refused connection, an unreachable host or a passing DNS failure is
 * `interrupted` too: a server restarting, not a wrong URL. An abort is passed on as it is: the
 * caller's reason, or the stall watchdog's error.
 */
export function convertFetchError(
  error: unknown,
  options: {
    url: URL;
    signal: AbortSignal | undefined;
    phase: "request" | "body";
    /** The server answered this download before, or part of the file is saved. Default false. */
    contacted?: boolean | undefined;
  },
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
  if (options.contacted === true && code !== undefined && passingAfterContactCodes.has(code)) {
    return new ModelDownloadError(
      "interrupted",
      `Cannot reach ${url.host} again while downloading ${redactUrl(url)} (${reason}).`,
      kept,
    );
  }
  return new ModelDownloadError("unreachable", `Cannot reach ${url.host} (${reason}).`, kept);
}

function readCode(value: unknown): string | undefined {
  if (typeof value !== "object" || value === null || !("code" in value)) return undefined;
  return typeof value.code === "string" ? value.code : undefined;
}
