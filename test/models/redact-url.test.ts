import { describe, expect, it } from "vitest";
import { redactUrlsInText } from "../../src/models/download/redact-url.ts";

describe("redactUrlsInText", () => {
  it("shows each URL in a text without its user, password and query", () => {
    expect(
      redactUrlsInText(
        "fetch https://user:secret@models.example/tiny.gguf?sig=abc failed; retried http://mirror.example/x",
      ),
    ).toBe("fetch https://models.example/tiny.gguf?… failed; retried http://mirror.example/x");
    expect(redactUrlsInText("(see hf+https://a:b@example.org/m)")).toBe("(see hf+https://example.org/m)");
  });

  it("reads a long run of letters once (a scheme was tried from each of them: quadratic)", () => {
    const run = "a".repeat(400_000);
    expect(redactUrlsInText(run)).toBe(run);
    expect(redactUrlsInText(`${run}://user:pw@host.example/`)).toBe(`${run}://host.example/`);
  });
});
