import { describe, expect, it } from "vitest";
import { parseInstant } from "../../src/admin/parse-instant.ts";

describe("parseInstant", () => {
  it.each([
    ["2025-12-31", "2025-12-31T00:00:00.000Z"],
    ["2025-12-31T18:00:00Z", "2025-12-31T18:00:00.000Z"],
    ["2025-12-31T18:00Z", "2025-12-31T18:00:00.000Z"],
    ["2025-12-31T18:00:00.5+02:00", "2025-12-31T16:00:00.500Z"],
    ["2024-02-29", "2024-02-29T00:00:00.000Z"],
    ["0001-01-01", "0001-01-01T00:00:00.000Z"],
    ["0099-12-31T23:59:59Z", "0099-12-31T23:59:59.000Z"],
    // Python's isoformat, Go's RFC 3339 with nanoseconds: cut to milliseconds, never rounded up.
    ["2099-01-01T00:00:00.123456+00:00", "2099-01-01T00:00:00.123Z"],
    ["2025-12-31T23:59:59.999999999Z", "2025-12-31T23:59:59.999Z"],
    ["2025-12-31T18:00:00.000000Z", "2025-12-31T18:00:00.000Z"],
    ["2025-12-31T18:00:00.98765432101234567890+02:00", "2025-12-31T16:00:00.987Z"],
    // The ends of the four-digit years, in UTC.
    ["9999-12-31T23:59:59.999Z", "9999-12-31T23:59:59.999Z"],
    ["9999-12-31T23:00:00+05:00", "9999-12-31T18:00:00.000Z"],
    ["0000-01-01T05:00-05:00", "0000-01-01T10:00:00.000Z"],
    // RFC 3339's other spellings: lower-case t and z, a space for the T (Python's str(datetime)).
    ["2025-12-31t18:00:00z", "2025-12-31T18:00:00.000Z"],
    ["2025-12-31 18:00:00+02:00", "2025-12-31T16:00:00.000Z"],
    ["2025-12-31 18:00:00.123456+00:00", "2025-12-31T18:00:00.123Z"],
    // ISO 8601's offsets without a colon or minutes (regression: refused; `date +%FT%T%z`).
    ["2026-11-29T09:11:00+0100", "2026-11-29T08:11:00.000Z"],
    ["2026-11-29T09:11:00+01", "2026-11-29T08:11:00.000Z"],
    ["2026-11-29T09:11:00.5-0530", "2026-11-29T14:41:00.500Z"],
    ["2026-11-29 09:11-03", "2026-11-29T12:11:00.000Z"],
  ])("reads %s", (text, iso) => {
    expect(parseInstant(text).toISOString()).toBe(iso);
  });

  it.each([
    ["a time without zone", "2025-12-31T18:00:00", /has no time zone; add one, such as Z for UTC/],
    ["a day that does not exist", "2025-02-30", /not a real date/],
    ["hour 24", "2025-01-01T24:00:00Z", /not a real date/],
    ["a month 13", "2025-13-01", /not a real date/],
    ["February 29 of a year 0 to 99 that is not a leap year", "0099-02-29", /not a real date/],
    ["words", "tomorrow", /not an ISO 8601 date/],
    ["a point without digits", "2025-12-31T18:00:00.Z", /not an ISO 8601 date/],
    [
      "microseconds without zone",
      "2025-12-31T18:00:00.123456",
      /has no time zone; add one, such as Z for UTC/,
    ],
    // `since=2025-06-01T00:00:00+02:00` unencoded in a query string arrives with a space.
    ["a zone whose + became a space", "2025-06-01T00:00:00 02:00", /write it as %2B/],
    ["the same, after a space for the T", "2025-06-01 00:00:00 02:00", /write it as %2B/],
    ["the same, an offset without a colon", "2025-06-01T00:00:00 0200", /write it as %2B/],
    ["an offset of one digit", "2025-06-01T00:00:00+2", /not an ISO 8601 date/],
    ["an offset of three digits", "2025-06-01T00:00:00+020", /not an ISO 8601 date/],
    ["an offset of 24 hours", "2025-06-01T00:00:00+2400", /not an ISO 8601 date/],
    ["a space for the T, without a zone", "2025-12-31 18:00", /has no time zone; add one, such as Z for UTC/],
    ["a date and a space with nothing after it", "2025-12-31 ", /not an ISO 8601 date/],
    ["second 60 with a fraction", "2025-12-31T23:59:60.5Z", /not a real date/],
    // Stored as `+010000-01-01T04:00:00.000Z`, which sorts before every other year as text.
    ["a zone that carries it past the year 9999", "9999-12-31T23:00:00-05:00", /years 0000 to 9999 in UTC/],
    ["a zone that carries it before the year 0000", "0000-01-01T01:00+02:00", /years 0000 to 9999 in UTC/],
  ])("refuses %s", (_case, text, message) => {
    expect(() => parseInstant(text)).toThrow(message);
  });

  it("shows at most the start of a long text it refuses (regression: 100 KB came back whole)", () => {
    const error = (() => {
      try {
        parseInstant(`2025-${"1".repeat(100_000)}`);
      } catch (caught) {
        return caught as Error;
      }
    })();
    expect(error?.message).toMatch(/^"2025-1{72}\.\.\." is not an ISO 8601 date/);
    expect(error?.message.length).toBeLessThan(300);
  });
});
