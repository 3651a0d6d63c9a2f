import { describe, expect, it } from "vitest";
import { readErrorBody } from "../../../src/engine/openai/read-error-body.ts";

/** With no endpoint secrets: only the shapes of credentials are removed. */
function readBody(text: string) {
  return readErrorBody(text, []);
}

describe("readErrorBody", () => {
  it("reads OpenAI's error shape", () => {
    expect(
      readBody(
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
    expect(readBody('{"error":"model overloaded"}').message).toBe("model overloaded");
    expect(readBody('{"message":"bad things"}').message).toBe("bad things");
    expect(readBody('{"detail":"Not Found"}').message).toBe("Not Found");
    expect(readBody('{"detail":[{"msg":"field required"},{"msg":"value too big"}]}').message).toBe(
      "field required; value too big",
    );
    expect(readBody("upstream timed out\n").message).toBe("upstream timed out");
    expect(readBody('{"error":{"code":429}}').code).toBe("429");
  });

  it("reads the fields at the top level (vLLM's errors, llama.cpp's error events)", () => {
    expect(
      readBody('{"object":"error","message":"too long","type":"BadRequestError","param":null,"code":400}'),
    ).toEqual({ message: "too long", type: "BadRequestError", code: "400", param: undefined });
  });

  it("names the field of a FastAPI validation error", () => {
    expect(
      readBody(
        JSON.stringify({
          detail: [
            { loc: ["body", "stream_options"], msg: "Extra inputs are not permitted" },
            { loc: ["body", "messages", 0, "role"], msg: "Input should be 'user'" },
          ],
        }),
      ).message,
    ).toBe("stream_options: Extra inputs are not permitted; messages.0.role: Input should be 'user'");
  });

  it("says nothing for empty bodies and HTML pages", () => {
    expect(readBody("")).toEqual({
      message: undefined,
      type: undefined,
      code: undefined,
      param: undefined,
    });
    expect(readBody("<html><body>502 Bad Gateway</body></html>").message).toBeUndefined();
  });

  it("removes anything shaped like a credential and shortens long messages", () => {
    const body = readBody(
      JSON.stringify({
        error: { message: "Incorrect API key provided: sk-proj-abcdef123456. Header was Bearer xyz.123" },
      }),
    );
    expect(body.message).toBe("Incorrect API key provided: [redacted]. Header was [redacted]");
    const long = readBody(JSON.stringify({ error: { message: "word ".repeat(200) } }));
    expect(long.message?.length).toBe(300);
    expect(long.message?.endsWith("…")).toBe(true);
  });

  // Regression: the cut at 299 code units split an emoji, and the client got a lone "\ud83d".
  it("never cuts an emoji in half when it shortens a message", () => {
    // 298 units of words, then the emoji at units 299 and 300: the cut falls between its halves.
    const words = `${"word ".repeat(59)}abc`;
    const body = readBody(
      JSON.stringify({ error: { message: `${words}😀 and more`, type: `${words}😀 x` } }),
    );
    expect(body.message).toBe(`${words}…`);
    expect(body.type).toBe(`${words}…`);
    const fits = readBody(JSON.stringify({ error: { message: `${words.slice(1)}😀 and more` } }));
    expect(fits.message).toBe(`${words.slice(1)}😀…`);
  });

  it("removes the endpoint's secrets from every field, before shortening", () => {
    const secrets = ["vllm-local-7f3a", "azkey-9c1e2f"];
    const body = readErrorBody(
      JSON.stringify({
        error: {
          message: `${"word ".repeat(58)}token vllm-local-7f3a refused`,
          type: "denied_for_azkey-9c1e2f",
          code: "azkey-9c1e2f",
          param: "api-key=azkey-9c1e2f",
        },
      }),
      secrets,
    );
    expect(body).toEqual({
      message: `${"word ".repeat(58)}token [re…`,
      type: "denied_for_[redacted]",
      code: "[redacted]",
      param: "api-key=[redacted]",
    });
    expect(readErrorBody("vllm-local-7f3a is not allowed", secrets).message).toBe(
      "[redacted] is not allowed",
    );
  });
});
