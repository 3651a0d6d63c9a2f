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

describe("redactUpstreamText on what an upstream quotes in part (found by a security review)", () => {
  const secret = "UPSTREAM-SECRET-0123456789";

  it("removes a piece of a long secret, its start, middle or end, and keeps short look-alikes", () => {
    expect(redactUpstreamText("bad key UPSTREAM-SECR...", [secret])).toBe("bad key [redacted]...");
    expect(redactUpstreamText("bad key ...0123456789, ...SECRET-0123", [secret])).toBe(
      "bad key ...[redacted], ...[redacted]",
    );
    expect(redactUpstreamText("UPSTREAM servers are SECRET", [secret])).toBe("UPSTREAM servers are SECRET");
    // A short secret goes only whole: pieces of it would be ordinary words.
    expect(redactUpstreamText("the token vllm-local was refused", ["vllm-local-7f3a"])).toBe(
      "the token vllm-local was refused",
    );
  });

  it("removes a URL's query values named as credentials, keeping the rest of the URL", () => {
    expect(
      redactUpstreamText("fetch http://10.0.0.5:8000/v1?token=abc&model=m&X-Amz-Signature=f00d failed", []),
    ).toBe("fetch http://10.0.0.5:8000/v1?token=[redacted]&model=m&X-Amz-Signature=[redacted] failed");
    expect(redactUpstreamText("see https://example.com/docs?page=2#keys", [])).toBe(
      "see https://example.com/docs?page=2#keys",
    );
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
