import type { StallKind } from "./create-stall-watchdog.ts";
import type { UpstreamEndpoint } from "./create-upstream-endpoint.ts";
import type { UpstreamErrorBody } from "./read-error-body.ts";
import { redactUpstreamText } from "./redact-upstream-text.ts";
import { createEndpointFailure, type UpstreamFailure } from "./upstream-failure.ts";
import type { UpstreamSettings } from "./upstream-settings.ts";

/** Longest upstream header value (a content type or encoding) repeated in a message. */
const MAX_HEADER_LENGTH = 40;

/** What an attempt saw of an answer, for {@link describeNothing}. */
export interface AnswerSeen {
  /** `[DONE]` came. */
  done: boolean;
  /** Events read as chunks (not `[DONE]`, not errors). */
  chunksRead: number;
  /** The answer was one JSON object; `notCompletion`: one without `choices`. */
  wholeAnswer: boolean;
  notCompletion: boolean;
  /** The response's content type when it is neither an event stream nor JSON. */
  unexpectedType: string | undefined;
}

/** What an upstream that sent no answer before its body ended (or its `[DONE]`) did. */
export function describeNothing(seen: AnswerSeen, endpoint: UpstreamEndpoint): string {
  const { done, chunksRead } = seen;
  if (seen.notCompletion) return "answered with JSON that is not a chat completion";
  if (seen.wholeAnswer)
    return "answered with a chat completion that holds no answer (no content and no finish_reason)";
  if (seen.unexpectedType !== undefined && chunksRead === 0)
    return `answered with ${quoteHeader(seen.unexpectedType, endpoint)} instead of an event stream`;
  const ended = done ? "ended the stream ([DONE])" : "closed the stream";
  return chunksRead === 0
    ? done
      ? `${ended} without sending any chunk`
      : `${ended} before sending anything`
    : `${ended} after chunks that hold no answer (no content and no finish_reason)`;
}

/**
 * An error the upstream sent in its answer (an error event, a chunk with `error`, a JSON answer
 * that is an error), or the protocol it broke, described twice, completing "The upstream server
 * of the model 'x' ...": `shownSummary` for the client, with the upstream's message (the
 * caller's own data, redacted); `summary` for log lines, without it. Such a message may quote the
 * prompt (llama.cpp's and vLLM's "error parsing tool call: raw='...'"), which no log line holds
 * unless `log_prompts` asks (and that switch does not reach the engine): the log names its type
 * and code (`upstreamBody`), as for an error status's body (read-error-answer.ts). Tollgate's own
 * words (`unreadable`: an event that is not JSON, a failing finish reason) are logged as they are.
 */
export function describeStreamError(body: UpstreamErrorBody): {
  summary: string;
  shownSummary: string;
  upstreamBody: string | undefined;
} {
  const said = body.message ?? body.unreadable;
  const shownSummary = `sent an error${said === undefined ? "" : ` (${said})`}`;
  const summary = body.message === undefined ? shownSummary : "sent an error (its message is not logged)";
  return { summary, shownSummary, upstreamBody: describeErrorKind(body) };
}

/** The type and code of an upstream error, for a log line that quotes none of its text. */
export function describeErrorKind(body: UpstreamErrorBody): string | undefined {
  const fields = [
    body.type === undefined ? undefined : `type ${body.type}`,
    body.code === undefined ? undefined : `code ${body.code}`,
  ].filter((field) => field !== undefined);
  return fields.length === 0 ? undefined : fields.join(", ");
}

/** What an upstream that stalled did, by the wait it overran. */
export function describeStall(kind: StallKind, settings: UpstreamSettings): string {
  return kind === "first-byte"
    ? `did not answer within ${formatDuration(settings.firstByteTimeoutMs)}`
    : // Comment lines (keep-alive pings) are no answer: "nothing" misled whoever saw them come.
      `sent no answer data for ${formatDuration(settings.idleTimeoutMs)}`;
}

function formatDuration(milliseconds: number): string {
  return milliseconds < 1000 ? `${milliseconds} ms` : `${Math.round(milliseconds / 100) / 10} s`;
}

/**
 * An upstream's header value as a message repeats it: without the endpoint's secrets and names,
 * then cut short (cut first, a secret could be cut and its start left).
 */
export function quoteHeader(value: string, endpoint: UpstreamEndpoint): string {
  const redacted = redactUpstreamText(value, endpoint.secrets, endpoint.names);
  return redacted.length <= MAX_HEADER_LENGTH ? redacted : `${redacted.slice(0, MAX_HEADER_LENGTH - 1)}…`;
}

/**
 * An answer compressed although Tollgate asked for `accept-encoding: identity` (a server or a
 * proxy that ignores it): it cannot be read. The endpoint is at fault and will answer the same
 * again, so other endpoints and the fallbacks are tried, not this one, and it rests.
 */
export function compressedAnswerFailure(modelId: string, encoding: string): UpstreamFailure {
  return createEndpointFailure({
    modelId,
    summary: `answered with Content-Encoding ${encoding}, which Tollgate does not decode`,
    retrySameEndpoint: false,
  });
}
