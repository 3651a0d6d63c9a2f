import type { IncomingHttpHeaders } from "node:http";
import { cutText } from "../../errors/cut-text.ts";
import type { UpstreamEndpoint } from "./create-upstream-endpoint.ts";
import { describeErrorKind } from "./describe-upstream-fault.ts";
import { mapUpstreamStatus } from "./map-upstream-status.ts";
import { parseRetryAfter } from "./parse-retry-after.ts";
import { readErrorBody } from "./read-error-body.ts";
import { MAX_ERROR_BODY_LENGTH, readText } from "./read-upstream-body.ts";
import { dropCutSecret, redactUpstreamText } from "./redact-upstream-text.ts";
import type { UpstreamCall } from "./start-upstream-call.ts";
import type { UpstreamFailure } from "./upstream-failure.ts";

/** Statuses about the endpoint's account, whose error body a log line quotes (see quoteBody). */
const ACCOUNT_STATUSES = new Set([401, 402, 403, 404, 429]);

/** Longest upstream error body quoted in a log line, in characters. */
const MAX_LOGGED_BODY_LENGTH = 500;

/** The error body, up to its bound; where cut there, without the start of a secret it may end in. */
export async function readErrorText(
  call: UpstreamCall,
  secrets: readonly string[],
  onPiece: () => void,
): Promise<{ text: string; cut: boolean }> {
  const { text, cut } = await readText(call, MAX_ERROR_BODY_LENGTH, onPiece);
  return { text: cut ? dropCutSecret(text, secrets) : text, cut };
}

/**
 * The failure an upstream's answer with an error status (not 2xx) makes, from its `body` as
 * {@link readErrorText} read it (empty where it was compressed and not read).
 */
export function mapErrorAnswer(options: {
  response: { statusCode: number; headers: IncomingHttpHeaders };
  body: { text: string; cut: boolean };
  endpoint: UpstreamEndpoint;
  modelId: string;
  /** Whether the request had `stream_options`. */
  sentStreamOptions: boolean;
  /** Whether the request had `max_tokens`. */
  sentMaxTokens: boolean;
}): UpstreamFailure {
  const { response, body, endpoint } = options;
  const read = readErrorBody(body.text, endpoint.secrets, { cut: body.cut, names: endpoint.names });
  const failure = mapUpstreamStatus({
    status: response.statusCode,
    body: read,
    retryAfterMs: parseRetryAfter(response.headers),
    modelId: options.modelId,
    sentStreamOptions: options.sentStreamOptions,
    sentMaxTokens: options.sentMaxTokens,
  });
  // Quoted for the operator only where the endpoint's account failed (401, 402, 403, 404,
  // 429): a wrong key, a missing model and no credit look alike otherwise. A refusal of the
  // request itself (400, 413, 422) is the client's to read, and its body may repeat the prompt
  // (FastAPI's validation errors do), which no log line holds; nor does a server error's body
  // (a 500 may quote the prompt or the answer: "error parsing tool call: raw='...'"). Their
  // type and code tell the operator enough. Of an account status's JSON body, only its message,
  // type and code: the rest may carry the request (OpenRouter's moderation 403 puts the flagged
  // input in `metadata`).
  const upstreamBody =
    failure.fallback && ACCOUNT_STATUSES.has(response.statusCode)
      ? read.message === undefined
        ? quoteBody(body, endpoint.secrets)
        : quoteBody(
            { text: quotedMessage(read.message, describeErrorKind(read)), cut: false },
            endpoint.secrets,
          )
      : describeErrorKind(read);
  if (upstreamBody === undefined) return failure;
  return { ...failure, upstreamBody };
}

/** An error body's message as a log line quotes it, after its type and code where it has them. */
function quotedMessage(message: string, kind: string | undefined): string {
  return kind === undefined ? message : `${kind}: ${message}`;
}

/**
 * An error body as the operator's log line quotes it (see `upstreamBody` in upstream-failure.ts):
 * without the endpoint's secrets or what is shaped like a credential (redacted on the whole text,
 * then cut), on one line, at most {@link MAX_LOGGED_BODY_LENGTH} characters; `undefined` when empty.
 */
function quoteBody(body: { text: string; cut: boolean }, secrets: readonly string[]): string | undefined {
  const text = redactUpstreamText(body.text, secrets).replace(/\s+/g, " ").trim();
  if (text === "") return undefined;
  return text.length <= MAX_LOGGED_BODY_LENGTH && !body.cut
    ? text
    : `${cutText(text, MAX_LOGGED_BODY_LENGTH - 1)}…`;
}
