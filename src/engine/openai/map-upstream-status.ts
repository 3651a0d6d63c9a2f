import { AppError } from "../../errors/app-error.ts";
import type { UpstreamErrorBody } from "./read-error-body.ts";
import { createEndpointFailure, createFinalFailure, type UpstreamFailure } from "./upstream-failure.ts";

/**
 * What an upstream's error status means for the request:
 *
 * | status                   | client gets                              | retried            | cooldown | fallbacks |
 * |--------------------------|------------------------------------------|--------------------|----------|-----------|
 * | 400, 422                 | 400 (upstream's message), or 400 `context_length_exceeded` | no | no | no |
 * | 413                      | 413 `request_too_large`                  | no                 | no       | no        |
 * | 401, 403 (*)             | 503 `upstream_unavailable` (credentials, never the upstream's words) | other endpoints | yes | yes |
 * | 403, moderation (OpenRouter's `metadata.flagged_input`) | 400 (upstream's message) | no | no | no |
 * | 402, 429 `insufficient_quota` (*) | 503 `upstream_unavailable` (no credit) | other endpoints | yes    | yes       |
 * | 404 (*) and other 4xx    | 503 `upstream_unavailable`               | other endpoints    | yes      | yes       |
 * | 408, 5xx                 | 503 `upstream_unavailable`               | yes, with backoff  | yes      | yes       |
 * | other 429                | 503 `upstream_unavailable` + retry-after | yes, after its `retry-after` | no | yes |
 *
 * (*) Only the operator can mend these (the endpoint's key, base URL or model, the upstream
 * account's credit): the client is not asked to retry later, and gets `x-should-retry: false`.
 *
 * An upstream's 401/403 is about Tollgate's credentials, never the client's: passing it on would
 * tell the client its own key is wrong. A 429 whose code or type is `insufficient_quota` (OpenAI's
 * "You exceeded your current quota") is no rate limit: the account has no credit left, and no
 * wait mends that; a 402 (DeepSeek's "Insufficient Balance", OpenRouter's credits) says the same.
 * A 400 that names `stream_options`, which Tollgate itself adds to every request, is marked
 * `streamOptionsRefused`: the same request goes again without it. One that refuses `max_tokens`
 * for `max_completion_tokens` is marked `maxTokensRefused`: the same request goes again with the
 * bound under that name.
 */
export function mapUpstreamStatus(options: {
  status: number;
  body: UpstreamErrorBody;
  retryAfterMs: number | undefined;
  modelId: string;
  /** Whether the request had `stream_options`. Default false. */
  sentStreamOptions?: boolean | undefined;
  /** Whether the request had `max_tokens`. Default false. */
  sentMaxTokens?: boolean | undefined;
}): UpstreamFailure {
  const { status, body, modelId, retryAfterMs } = options;
  const told =
    body.message !== undefined
      ? `: ${body.message}`
      : body.unreadable !== undefined
        ? `; ${body.unreadable}`
        : "";
  switch (status) {
    case 400:
    case 422: {
      const failure = requestFailure(
        isContextOverflow(body)
          ? new AppError(
              "context_length_exceeded",
              `The request does not fit the upstream model's context${told}`,
              { param: "messages" },
            )
          : new AppError(
              "invalid_value",
              `The upstream server rejected the request (HTTP ${status})${told}`,
              {
                param: body.param,
              },
            ),
        status,
      );
      // Servers that do not know the field refuse every request that carries it.
      if (options.sentStreamOptions === true && namesStreamOptions(body))
        return { ...failure, streamOptionsRefused: true };
      if (options.sentMaxTokens === true && asksForMaxCompletionTokens(body))
        return { ...failure, maxTokensRefused: true };
      return failure;
    }
    case 413:
      return requestFailure(
        new AppError("request_too_large", `The request is too large for the upstream server${told}`),
        status,
      );
    case 403:
      // A moderation refusal is about this request's input: the client is told (400), and the
      // endpoint does not rest for it (three flagged prompts in a row rested it for every tenant).
      if (body.flagged === true)
        return requestFailure(
          new AppError(
            "invalid_value",
            `The upstream server's moderation refused the request's input (HTTP 403)${told}`,
          ),
          status,
        );
      return credentialsFailure(modelId, status);
    case 401:
      return credentialsFailure(modelId, status);
    case 404:
      return createEndpointFailure({
        modelId,
        summary:
          "answered HTTP 404 (not found); the server's operator must check the endpoint's base_url and the engine's model",
        retrySameEndpoint: false,
        retryLater: false,
      });
    case 402:
      return creditFailure(modelId, "HTTP 402");
    case 429:
      if (isQuotaExhausted(body)) return creditFailure(modelId, "HTTP 429 insufficient_quota");
      return createEndpointFailure({
        modelId,
        summary: "is rate-limiting Tollgate (HTTP 429)",
        endpointFault: false,
        retryAfterMs,
      });
    default:
      if (status === 408 || status >= 500) {
        return createEndpointFailure({ modelId, summary: `answered HTTP ${status}`, retryAfterMs });
      }
      return createEndpointFailure({
        modelId,
        summary: `answered HTTP ${status}`,
        retrySameEndpoint: false,
        retryAfterMs,
      });
  }
}

/** The upstream refused Tollgate's key (401, 403): the operator's to fix; the endpoint rests. */
function credentialsFailure(modelId: string, status: number): UpstreamFailure {
  return createEndpointFailure({
    modelId,
    summary: `refused Tollgate's credentials (HTTP ${status}); the server's operator must check the endpoint's api_key`,
    retrySameEndpoint: false,
    retryLater: false,
  });
}

/** OpenAI's 429 for an account without credit: its code, or its type, is `insufficient_quota`. */
function isQuotaExhausted(body: UpstreamErrorBody): boolean {
  return body.code === "insufficient_quota" || body.type === "insufficient_quota";
}

/**
 * The upstream account has no quota or credit left (`what`: the status that says so): the
 * endpoint rests and the others and the fallbacks are tried, as for refused credentials, and the
 * client is told that the operator must act rather than to retry.
 */
function creditFailure(modelId: string, what: string): UpstreamFailure {
  return createEndpointFailure({
    modelId,
    summary: `says the upstream account's quota or credit is exhausted (${what}); the server's operator must top it up`,
    retrySameEndpoint: false,
    retryLater: false,
  });
}

/**
 * The upstream says the prompt does not fit: OpenAI's code, llama.cpp's type
 * (`exceed_context_size_error`), or a message about the context's length, size or window.
 */
function isContextOverflow(body: UpstreamErrorBody): boolean {
  return (
    body.code === "context_length_exceeded" ||
    body.type === "exceed_context_size_error" ||
    /context.(length|size|window)|maximum context/i.test(body.message ?? "")
  );
}

/**
 * The upstream refuses `max_tokens` and names `max_completion_tokens` instead ("Unsupported
 * parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens'
 * instead."), not a `max_tokens` that is only too large for it.
 */
function asksForMaxCompletionTokens(body: UpstreamErrorBody): boolean {
  const message = body.message ?? "";
  return (
    /max_completion_tokens/.test(message) &&
    (body.param === "max_tokens" || /max_tokens/.test(message.replaceAll("max_completion_tokens", "")))
  );
}

/** The upstream's complaint is about `stream_options` (or its `include_usage`). */
function namesStreamOptions(body: UpstreamErrorBody): boolean {
  return /stream_options|include_usage/i.test(`${body.param ?? ""} ${body.message ?? ""}`);
}

/** The request itself is at fault: no retry, no fallback, the client hears why. */
function requestFailure(error: AppError, status: number): UpstreamFailure {
  return createFinalFailure(`rejected the request (HTTP ${status})`, error);
}
