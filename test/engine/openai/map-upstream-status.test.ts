import { describe, expect, it } from "vitest";
import { mapUpstreamStatus } from "../../../src/engine/openai/map-upstream-status.ts";
import { readErrorBody } from "../../../src/engine/openai/read-error-body.ts";

function map(status: number, body = "", retryAfterMs?: number) {
  return mapUpstreamStatus({ status, body: readErrorBody(body, []), retryAfterMs, modelId: "gpt" });
}

describe("mapUpstreamStatus", () => {
  it("passes the upstream's 400 on as the client's, without retry or fallback", () => {
    const failure = map(400, JSON.stringify({ error: { message: "Invalid 'top_p'.", param: "top_p" } }));
    expect(failure).toMatchObject({ retryable: false, fallback: false, endpointFault: false });
    expect(failure.error.status).toBe(400);
    expect(failure.error.code).toBe("invalid_value");
    expect(failure.error.param).toBe("top_p");
    expect(failure.error.message).toContain("Invalid 'top_p'.");
  });

  it("recognises an upstream context overflow", () => {
    const failure = map(
      400,
      JSON.stringify({ error: { message: "too long", code: "context_length_exceeded" } }),
    );
    expect(failure.error.code).toBe("context_length_exceeded");
  });

  it("recognises llama.cpp's context overflow by its type and message", () => {
    const failure = map(
      400,
      JSON.stringify({
        error: {
          code: 400,
          message: "the request exceeds the available context size, try increasing it",
          type: "exceed_context_size_error",
        },
      }),
    );
    expect(failure.error.code).toBe("context_length_exceeded");
    expect(failure.error.message).toContain("exceeds the available context size");
    expect(
      map(400, JSON.stringify({ error: { message: "prompt is longer than the context size" } })).error.code,
    ).toBe("context_length_exceeded");
  });

  it("marks a 400 about the stream_options Tollgate sent, so that it goes again without them", () => {
    const refusal = JSON.stringify({
      error: { message: "Unrecognized request argument supplied: stream_options" },
    });
    const withOptions = (status: number, body: string) =>
      mapUpstreamStatus({
        status,
        body: readErrorBody(body, []),
        retryAfterMs: undefined,
        modelId: "gpt",
        sentStreamOptions: true,
      });
    expect(withOptions(400, refusal).streamOptionsRefused).toBe(true);
    expect(
      withOptions(
        422,
        JSON.stringify({
          detail: [{ loc: ["body", "stream_options"], msg: "Extra inputs are not permitted" }],
        }),
      ).streamOptionsRefused,
    ).toBe(true);
    expect(
      withOptions(400, JSON.stringify({ error: { message: "Unknown field", param: "include_usage" } }))
        .streamOptionsRefused,
    ).toBe(true);
    // Mistral's: the validation errors in an object as the message (regression: every request 400).
    expect(
      withOptions(
        422,
        JSON.stringify({
          object: "error",
          message: {
            detail: [
              { loc: ["body", "stream_options", "include_usage"], msg: "Extra inputs are not permitted" },
            ],
          },
          type: "invalid_request_error",
        }),
      ).streamOptionsRefused,
    ).toBe(true);
    // Not sent, or another complaint: the client's 400.
    expect(map(400, refusal).streamOptionsRefused).toBeUndefined();
    expect(
      withOptions(400, JSON.stringify({ error: { message: "Invalid 'top_p'." } })).streamOptionsRefused,
    ).toBeUndefined();
    expect(withOptions(500, refusal).streamOptionsRefused).toBeUndefined();
  });

  it.each([401, 403])("never passes an upstream %i on: it is about Tollgate's credentials", (status) => {
    const failure = map(
      status,
      JSON.stringify({ error: { message: "Incorrect API key provided: sk-secret-123456" } }),
    );
    expect(failure.error.status).toBe(503);
    expect(failure.error.code).toBe("upstream_unavailable");
    expect(failure.error.message).toContain("credentials");
    expect(failure.error.message).not.toContain("sk-");
    expect(failure).toMatchObject({
      retryable: true,
      retrySameEndpoint: false,
      endpointFault: true,
      fallback: true,
    });
  });

  it("retries 5xx and 408 on the same endpoint, counting faults", () => {
    for (const status of [408, 500, 502, 503, 504]) {
      expect(map(status)).toMatchObject({
        retryable: true,
        retrySameEndpoint: true,
        endpointFault: true,
        fallback: true,
      });
      expect(map(status).error.status).toBe(503);
    }
  });

  it("waits out a 429 without counting a fault, and tells the client when to retry", () => {
    const failure = map(429, "", 2500);
    expect(failure).toMatchObject({ retryable: true, endpointFault: false, retryAfterMs: 2500 });
    expect(failure.error.code).toBe("upstream_unavailable");
    expect(failure.error.retryAfterSeconds).toBe(3);
  });

  it("tries other endpoints, not the same one, on 404 and other 4xx", () => {
    expect(map(404)).toMatchObject({ retryable: true, retrySameEndpoint: false });
    expect(map(402)).toMatchObject({ retryable: true, retrySameEndpoint: false });
  });

  // Regression: 401, 403 and 404 asked the client to retry later (retry-after, no
  // x-should-retry), though only the operator can mend the endpoint.
  it.each([401, 403, 404])("tells the client that no retry of its own mends an upstream %i", (status) => {
    const failure = map(status);
    expect(failure.error.retryable).toBe(false);
    expect(failure.error.message).toMatch(/operator must check the endpoint's/);
    expect(failure.error.message).not.toContain("retry");
    // Other endpoints and the fallbacks are tried all the same.
    expect(failure).toMatchObject({ retryable: true, retrySameEndpoint: false, fallback: true });
  });

  // Regression: an account without credit was "rate-limiting Tollgate", retry in a second.
  it.each([
    ["code", { message: "You exceeded your current quota.", code: "insufficient_quota" }],
    ["type", { message: "You exceeded your current quota.", type: "insufficient_quota" }],
  ])("reads a 429 with the %s insufficient_quota as an account without credit", (_what, error) => {
    const failure = map(429, JSON.stringify({ error }), 1000);
    expect(failure.error).toMatchObject({ code: "upstream_unavailable", status: 503, retryable: false });
    expect(failure.error.message).toBe(
      "The upstream server of the model 'gpt' says the upstream account's quota or credit is exhausted (HTTP 429 insufficient_quota); the server's operator must top it up.",
    );
    expect(failure).toMatchObject({
      retryable: true,
      retrySameEndpoint: false,
      endpointFault: true,
      fallback: true,
    });
    expect(map(402).error.message).toContain("quota or credit is exhausted (HTTP 402)");
    // A rate limit is still one.
    const limited = map(
      429,
      JSON.stringify({ error: { message: "slow down", code: "rate_limit_exceeded" } }),
    );
    expect(limited.error).toMatchObject({ retryable: true });
    expect(limited.error.message).toContain("is rate-limiting Tollgate (HTTP 429). Please retry later.");
  });

  it("says why where the body could not be read", () => {
    const failure = mapUpstreamStatus({
      status: 400,
      body: readErrorBody('{"error": {"debug": {"trace": "Traceback', [], { cut: true }),
      retryAfterMs: undefined,
      modelId: "gpt",
    });
    expect(failure.error.message).toBe(
      "The upstream server rejected the request (HTTP 400); its error body is too long to read",
    );
  });
});
