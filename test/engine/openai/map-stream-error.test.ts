import { describe, expect, it } from "vitest";
import { mapStreamError } from "../../../src/engine/openai/map-stream-error.ts";
import { readErrorBody } from "../../../src/engine/openai/read-error-body.ts";

function map(error: unknown) {
  return mapStreamError({
    body: readErrorBody(JSON.stringify(error), []),
    summary: "sent an error",
    modelId: "gpt",
    sentStreamOptions: true,
  });
}

describe("mapStreamError", () => {
  it("reads llama.cpp's context overflow as the client's 400 context_length_exceeded, not retried", () => {
    const failure = map({
      code: 400,
      message: "the request exceeds the available context size, try increasing it",
      type: "exceed_context_size_error",
    });
    expect(failure).toMatchObject({ retryable: false, fallback: false, endpointFault: false });
    expect(failure.error).toMatchObject({ code: "context_length_exceeded", status: 400 });
    expect(failure.error.message).toContain("exceeds the available context size");
  });

  it("reads an error whose code is 400 as the client's 400, with the upstream's message", () => {
    const failure = map({ error: { code: 400, message: "Invalid 'top_p'.", param: "top_p" } });
    expect(failure).toMatchObject({ retryable: false });
    expect(failure.error).toMatchObject({ code: "invalid_value", status: 400, param: "top_p" });
    expect(failure.error.message).toContain("Invalid 'top_p'.");
  });

  it("names a context overflow without a status by its code", () => {
    expect(map({ error: { code: "context_length_exceeded", message: "too long" } }).error.code).toBe(
      "context_length_exceeded",
    );
  });

  it("retries anything else, without holding it against the endpoint", () => {
    for (const error of [
      { code: 500, message: "model crashed", type: "server_error" },
      { error: { code: 429, message: "busy" } },
      { error: { message: "the model is warming up" } },
    ]) {
      const failure = map(error);
      expect(failure).toMatchObject({ retryable: true, endpointFault: false, fallback: true });
      expect(failure.error.code).toBe("upstream_unavailable");
      expect(failure.summary).toBe("sent an error");
    }
  });
});
