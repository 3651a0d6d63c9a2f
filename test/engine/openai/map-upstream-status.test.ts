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
});
