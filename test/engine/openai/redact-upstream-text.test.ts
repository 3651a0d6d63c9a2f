import { describe, expect, it } from "vitest";
import { dropCutSecret, redactUpstreamText } from "../../../src/engine/openai/redact-upstream-text.ts";

describe("redactUpstreamText", () => {
  it("removes each secret wherever it occurs, and what is shaped like a credential", () => {
    expect(
      redactUpstreamText("key 'vllm-local-7f3a' (vllm-local-7f3a), other sk-proj-abcdef123", [
        "vllm-local-7f3a",
      ]),
    ).toBe("key '[redacted]' ([redacted]), other [redacted]");
  });

  it("redacts a bearer token without the punctuation around it", () => {
    expect(redactUpstreamText("denied (got Bearer abc.DEF-123_x~+/==), retry", [])).toBe(
      "denied (got [redacted]), retry",
    );
    expect(redactUpstreamText('header "Bearer tok" refused', [])).toBe('header "[redacted]" refused');
  });
});

describe("dropCutSecret", () => {
  it("redacts the user and password of a URL, keeping its host", () => {
    expect(redactUpstreamText("Traceback: postgres://svc:hunter2@db-primary.internal/prod", [])).toBe(
      "Traceback: postgres://[redacted]@db-primary.internal/prod",
    );
    expect(redactUpstreamText("redis://:pw@cache:6379 and https://example.com/a@b", [])).toBe(
      "redis://[redacted]@cache:6379 and https://example.com/a@b",
    );
  });

  it("drops the start of a secret that a cut text ends in", () => {
    expect(dropCutSecret("denied vllm-l", ["azkey-9c1e2f", "vllm-local-7f3a"])).toBe("denied ");
    expect(dropCutSecret("denied for now", ["vllm-local-7f3a"])).toBe("denied for now");
  });
});
