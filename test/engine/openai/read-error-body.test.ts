import { describe, expect, it } from "vitest";
import { readErrorBody } from "../../../src/engine/openai/read-error-body.ts";

describe("readErrorBody", () => {
  it("reads OpenAI's error shape", () => {
    expect(
      readErrorBody(
        JSON.stringify({
          error: {
            message: "Invalid 'temperature'.",
            type: "invalid_request_error",
            param: "temperature",
            code: "invalid_value",
          },
        }),
      ),
    ).toEqual({
      message: "Invalid 'temperature'.",
      type: "invalid_request_error",
      param: "temperature",
      code: "invalid_value",
    });
  });

  it("reads the shapes other compatible servers use", () => {
    expect(readErrorBody('{"error":"model overloaded"}').message).toBe("model overloaded");
    expect(readErrorBody('{"message":"bad things"}').message).toBe("bad things");
    expect(readErrorBody('{"detail":"Not Found"}').message).toBe("Not Found");
    expect(readErrorBody('{"detail":[{"msg":"field required"},{"msg":"value too big"}]}').message).toBe(
      "field required; value too big",
    );
    expect(readErrorBody("upstream timed out\n").message).toBe("upstream timed out");
    expect(readErrorBody('{"error":{"code":429}}').code).toBe("429");
  });

  it("says nothing for empty bodies and HTML pages", () => {
    expect(readErrorBody("")).toEqual({
      message: undefined,
      type: undefined,
      code: undefined,
      param: undefined,
    });
    expect(readErrorBody("<html><body>502 Bad Gateway</body></html>").message).toBeUndefined();
  });

  it("removes anything shaped like a credential and shortens long messages", () => {
    const body = readErrorBody(
      JSON.stringify({
        error: { message: "Incorrect API key provided: sk-proj-abcdef123456. Header was Bearer xyz.123" },
      }),
    );
    expect(body.message).toBe("Incorrect API key provided: [redacted]. Header was [redacted]");
    const long = readErrorBody(JSON.stringify({ error: { message: "word ".repeat(200) } }));
    expect(long.message?.length).toBe(300);
    expect(long.message?.endsWith("…")).toBe(true);
  });
});
