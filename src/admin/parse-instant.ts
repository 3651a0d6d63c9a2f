import { showTyped } from "./read-key-reference.ts";
/**
 * Reads an instant given by an operator (`--expires`, `--since`, `--until`, `expires_at`): an
 * ISO 8601 date (`2025-12-31`, midnight UTC at its start) or date and time with a zone
 * (`2025-12-31T18:00:00Z`, `2025-12-31T18:00+02:00`, `+0200` or `+02`). Fractions of a second may have any number
 * of digits (Python's `isoformat` writes 6, Go's RFC 3339 up to 9): a `Date` holds milliseconds,
 * so the rest is cut off, never rounded into the next second. A time without a zone is refused,
 * not guessed. As RFC 3339 allows, `t` and `z` may be lower case and a space may stand for the
 * `T` (Python's `str(datetime)`: `2025-12-31 18:00:00+00:00`). Throws a `RangeError` whose
 * message says how to write it.
 */
export function parseInstant(text: string): Date {
  const iso = normalizeRfc3339(text);
  const match = INSTANT_PATTERN.exec(iso);
  if (match === null) {
    const shown = JSON.stringify(showTyped(text));
    // A local time is ISO 8601, but names no instant: it is refused for its missing zone alone.
    if (LOCAL_TIME_PATTERN.test(iso))
      throw new RangeError(`${shown} has no time zone; add one, such as Z for UTC or +02:00.`);
    const hint = SPACED_OFFSET_PATTERN.test(iso)
      ? "a + in a URL's query string reads as a space: write it as %2B (2025-12-31T18:00:00%2B02:00)"
      : "write a date such as 2025-12-31 or a date and time such as 2025-12-31T18:00:00Z";
    throw new RangeError(`${shown} is not an ISO 8601 date; ${hint}.`);
  }
  const [, year, month, day, hour = "0", minute = "0", second = "0"] = match;
  // setUTCFullYear, not Date.UTC: that one takes years 0 to 99 for 1900 to 1999.
  const calendar = new Date(0);
  calendar.setUTCFullYear(Number(year), Number(month) - 1, Number(day));
  const validDate =
    calendar.getUTCFullYear() === Number(year) &&
    calendar.getUTCMonth() === Number(month) - 1 &&
    calendar.getUTCDate() === Number(day);
  if (!validDate || Number(hour) > 23 || Number(minute) > 59 || Number(second) > 59) {
    throw new RangeError(`${JSON.stringify(showTyped(text))} is not a real date and time.`);
  }
  // Cut to milliseconds here: ECMAScript's date format has exactly 3 digits, so past that
  // `new Date` would depend on the engine's leniency.
  const instant = new Date(iso.replace(/(\.\d{3})\d+/, "$1"));
  // A zone can carry a date past either end of the four-digit years (9999-12-31T23:00-05:00):
  // stores keep instants as ISO 8601 text in UTC and compare it as text, where `+010000-...`
  // sorts before every other year, and JSON readers take four-digit years only.
  if (instant.getTime() < FIRST_INSTANT || instant.getTime() > LAST_INSTANT) {
    throw new RangeError(
      `${JSON.stringify(showTyped(text))} is outside the years 0000 to 9999 in UTC; write 9999-12-31 at the latest.`,
    );
  }
  return instant;
}

/**
 * `text` with RFC 3339's other spellings (a lower-case `t` or `z`, a space for the `T`) made
 * ISO 8601's extended format, and ISO 8601's offsets without a colon or minutes (`+0100`, which
 * `date +%FT%T%z` writes, and `+01`) with both.
 */
function normalizeRfc3339(text: string): string {
  return text
    .replace(/^(\d{4}-\d{2}-\d{2})[t ](?=\d)/, "$1T")
    .replace(/(\d)z$/, "$1Z")
    .replace(
      /(T\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?[+-]\d{2})(\d{2})?$/,
      (_, time: string, minutes?: string) => `${time}:${minutes ?? "00"}`,
    );
}

const FIRST_INSTANT = Date.parse("0000-01-01T00:00:00.000Z");
const LAST_INSTANT = Date.parse("9999-12-31T23:59:59.999Z");

const INSTANT_PATTERN =
  /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?(?:Z|[+-](?:[01]\d|2[0-3]):[0-5]\d))?$/;
const LOCAL_TIME_PATTERN = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?$/;
/** A time whose zone's `+` arrived as a space (an unencoded `+` in a query string). */
const SPACED_OFFSET_PATTERN = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)? \d{2}(:?\d{2})?$/;
