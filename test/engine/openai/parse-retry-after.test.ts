import { describe, expect, it } from "vitest";
import { MAX_RETRY_AFTER_MS, parseRetryAfter } from "../../../src/engine/openai/parse-retry-after.ts";

describe("parseRetryAfter", () => {
  it("reads seconds, milliseconds and HTTP dates", () => {
    expect(parseRetryAfter({ "retry-after": "2" })).toBe(2000);
    expect(parseRetryAfter({ "retry-after": "0.5" })).toBe(500);
    expect(parseRetryAfter({ "retry-after-ms": "250", "retry-after": "9" })).toBe(250);
    const now = Date.parse("2025-01-01T00:00:00Z");
    expect(parseRetryAfter({ "retry-after": "Wed, 01 Jan 2025 00:00:03 GMT" }, now)).toBe(3000);
  });

  it("is undefined without a readable header, and never negative", () => {
    expect(parseRetryAfter({})).toBeUndefined();
    expect(parseRetryAfter({ "retry-after": "soon" })).toBeUndefined();
    expect(parseRetryAfter({ "retry-after": "-3" })).toBeUndefined();
    const now = Date.parse("2025-01-01T00:00:10Z");
    expect(parseRetryAfter({ "retry-after": "Wed, 01 Jan 2025 00:00:03 GMT" }, now)).toBe(0);
  });

  it("reads a pause of more than ten minutes as ten minutes", () => {
    expect(MAX_RETRY_AFTER_MS).toBe(600_000);
    expect(parseRetryAfter({ "retry-after": "600" })).toBe(600_000);
    expect(parseRetryAfter({ "retry-after": "86400" })).toBe(600_000);
    expect(parseRetryAfter({ "retry-after": "99999999999" })).toBe(600_000);
    expect(parseRetryAfter({ "retry-after-ms": "3600000" })).toBe(600_000);
    const now = Date.parse("2025-01-01T00:00:00Z");
    expect(parseRetryAfter({ "retry-after": "Thu, 02 Jan 2025 00:00:00 GMT" }, now)).toBe(600_000);
  });

  it("reads the three forms of HTTP date, each in GMT", () => {
    const now = Date.parse("2025-01-01T00:00:00Z");
    for (const date of [
      "Wed, 01 Jan 2025 00:00:03 GMT",
      "wed, 1 jan 2025 00:00:03 gmt",
      "Wednesday, 01-Jan-25 00:00:03 GMT",
      "Wed Jan  1 00:00:03 2025",
    ])
      expect(parseRetryAfter({ "retry-after": date }, now), date).toBe(3000);
  });

  it("does not read a garbled or zone-less header as a date", () => {
    const now = Date.parse("2025-01-01T00:00:00Z");
    for (const value of [
      "x 32",
      "in 2030",
      "Wed, 01 Jan 2025 00:00:03",
      "Wed, 01 Jan 2025 00:00:03 EST",
      "2025-01-01T00:00:03Z",
      "Fri, 31 Feb 2025 00:00:03 GMT",
      "Wed, 01 Jan 2025 24:00:03 GMT",
    ])
      expect(parseRetryAfter({ "retry-after": value }, now), value).toBeUndefined();
  });
});
