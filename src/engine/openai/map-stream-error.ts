import { describeErrorKind } from "./describe-upstream-fault.ts";
import { mapUpstreamStatus } from "./map-upstream-status.ts";
import type { UpstreamErrorBody } from "./read-error-body.ts";
import { createEndpointFailure, type UpstreamFailure } from "./upstream-failure.ts";

/**
 * What an error that the upstream sent inside a successful answer (an error event, a chunk with
 * `error`, a JSON answer that is an error) means for the request, before any part came.
 *
 * Servers that name a status there (llama.cpp and vLLM send `code: 400`) or a context overflow
 * are read as that HTTP status would be when it is the request's fault: the client hears the
 * upstream's reason (400, or 400 `context_length_exceeded`) and nothing is retried, since no
 * other attempt would go better. Anything else is retried (another endpoint, a fallback), and not
 * held against the endpoint, whose server did answer.
 */
export function mapStreamError(options: {
  body: UpstreamErrorBody;
  /** What happened, completing "The upstream server of the model 'x' ...", for log lines. */
  summary: string;
  /** The same for the client, with the upstream's message (see describeStreamError). Default `summary`. */
  shownSummary?: string | undefined;
  modelId: string;
  /** Whether the request had `stream_options`. */
  sentStreamOptions: boolean;
  /** Whether the request had `max_tokens`. */
  sentMaxTokens?: boolean;
}): UpstreamFailure {
  const { body, modelId } = options;
  // The log line names the error's type and code, never its message (which may quote the prompt).
  const upstreamBody = describeErrorKind(body);
  const status = readErrorStatus(body);
  if (status !== undefined) {
    const failure = mapUpstreamStatus({
      status,
      body,
      retryAfterMs: undefined,
      modelId,
      sentStreamOptions: options.sentStreamOptions,
      sentMaxTokens: options.sentMaxTokens,
    });
    if (!failure.retryable) return { ...failure, upstreamBody };
  }
  const failure = createEndpointFailure({
    modelId,
    summary: options.summary,
    shownSummary: options.shownSummary,
    endpointFault: false,
  });
  return { ...failure, upstreamBody };
}

/** The HTTP status an error in a stream names: its numeric `code`, else 400 for a context overflow. */
function readErrorStatus(body: UpstreamErrorBody): number | undefined {
  if (body.code !== undefined && /^[45]\d\d$/.test(body.code)) return Number(body.code);
  if (body.code === "context_length_exceeded" || body.type === "exceed_context_size_error") return 400;
  return undefined;
}
