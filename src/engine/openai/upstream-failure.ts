import { AppError } from "../../errors/app-error.ts";

/** Why one attempt at an upstream failed before it produced anything, and what may follow. */
export interface UpstreamFailure {
  /**
   * What happened, completing "The upstream server of the model 'x' ...", as log lines say it:
   * names no secret, and quotes nothing the upstream said that may repeat the prompt (the
   * client's `error` may: see `shownSummary` of {@link createEndpointFailure}).
   */
  summary: string;
  /** Another attempt (on this endpoint or another) may succeed. */
  retryable: boolean;
  /** The same endpoint may be tried again in this request (false: its set-up is wrong). */
  retrySameEndpoint: boolean;
  /** The endpoint is at fault (down, slow, misconfigured): counts towards its cooldown. */
  endpointFault: boolean;
  /** Fallback models may serve the request when every endpoint failed like this. */
  fallback: boolean;
  /** The pause the upstream asked for (`retry-after`), in ms. */
  retryAfterMs: number | undefined;
  /** The client's error when this is the last failure. */
  error: AppError;
  /**
   * What the upstream's error said, for the operator's log line only (a wrong key, a missing
   * model and exhausted credit look alike to a client). The whole body, without the endpoint's
   * secrets or anything shaped like a credential, on one line, cut short, only where the
   * endpoint's account failed (401, 402, 403, 404, 429); for any other error (a refusal of the
   * request, a server error, an error the stream sent), whose text may repeat the prompt, only
   * its type and code. `undefined` where nothing of the sort came.
   */
  upstreamBody?: string | undefined;
  /**
   * The upstream refused the `stream_options` it was sent (a server that does not know the
   * field): the endpoint is asked again at once without it, whatever `retryable` says.
   */
  streamOptionsRefused?: boolean;
  /**
   * The upstream refused the `max_tokens` it was sent and asked for `max_completion_tokens`: the
   * endpoint is asked again at once with the bound under that name, whatever `retryable` says.
   */
  maxTokensRefused?: boolean;
  /**
   * The request was never sent: its endpoint began to rest while it waited for a connection. It
   * goes to another endpoint, costing no retry and counting against nothing.
   */
  requeued?: boolean;
  /**
   * Tokens the upstream generated before the attempt failed without any part for the client
   * (reasoning, then an error or a cut): estimated where the upstream did not count them.
   */
  generatedTokens?: number;
  /**
   * The upstream closed a kept-alive connection just as the request went out on it (its idle
   * timeout ran out then; see UpstreamCall.closedWhileIdle): the request is sent again at once on
   * the same endpoint, costing no retry and not held against the endpoint, a few times a request
   * at most (then it is the failure it looks like).
   */
  closedWhileIdle?: boolean;
}

/** A failure of the endpoint (not of the request): retried, counted, with fallbacks. */
export function createEndpointFailure(options: {
  modelId: string;
  summary: string;
  /**
   * What the client's error says in place of `summary`, where it quotes what the upstream said
   * (an error the stream sent, whose message may repeat the prompt: the caller's own data, which
   * no log line holds). Default `summary`.
   */
  shownSummary?: string | undefined;
  retrySameEndpoint?: boolean;
  endpointFault?: boolean;
  retryAfterMs?: number | undefined;
  /**
   * Whether the client's own retry, later, may succeed. False where only the operator can mend
   * the endpoint (its key, its model, its account's credit): the client's error says so and
   * carries `x-should-retry: false`. Other endpoints and the fallbacks are tried all the same.
   * Default true.
   */
  retryLater?: boolean;
}): UpstreamFailure {
  return {
    summary: options.summary,
    retryable: true,
    retrySameEndpoint: options.retrySameEndpoint ?? true,
    endpointFault: options.endpointFault ?? true,
    fallback: true,
    retryAfterMs: options.retryAfterMs,
    error: createUnavailableError(
      options.modelId,
      options.shownSummary ?? options.summary,
      options.retryAfterMs,
      options.retryLater,
    ),
  };
}

/**
 * A failure no other attempt would mend (the request itself is at fault, or Tollgate is): no
 * retry, no fallback, and the endpoint is not blamed; the client hears `error`.
 */
export function createFinalFailure(summary: string, error: AppError): UpstreamFailure {
  return {
    summary,
    retryable: false,
    retrySameEndpoint: false,
    endpointFault: false,
    fallback: false,
    retryAfterMs: undefined,
    error,
  };
}

/**
 * `upstream_unavailable` (503) with a message that says what happened and no secret. `retryLater`
 * false: no retry of the client's can help (see {@link createEndpointFailure}). Default true.
 */
export function createUnavailableError(
  modelId: string,
  summary: string,
  retryAfterMs: number | undefined,
  retryLater = true,
): AppError {
  const message = `The upstream server of the model '${modelId}' ${summary}.`;
  const retryAfterSeconds = retryAfterMs === undefined ? undefined : Math.ceil(retryAfterMs / 1000);
  return retryLater
    ? new AppError("upstream_unavailable", `${message} Please retry later.`, { retryAfterSeconds })
    : new AppError("upstream_unavailable", message, { retryAfterSeconds, retryable: false });
}
