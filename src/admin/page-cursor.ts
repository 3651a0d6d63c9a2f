import { AdminError } from "./admin-error.ts";
import { hasNulCharacter } from "./has-nul-character.ts";

/**
 * A position in a listing ordered by (creation time, then a unique text: a usage row's id, an
 * account's name), as the admin API hands it out (`next_after`) and takes it back (`after`):
 * opaque to clients, base64url of the listing, the time and the text.
 */
export interface PageCursor {
  createdAt: Date;
  tieBreaker: string;
}

/** The listings that hand out cursors: each takes back only its own. */
export type PagedListing = "accounts" | "keys" | "usage";

const LISTING_PREFIX = /^(accounts|keys|usage) /;

export function encodePageCursor(listing: PagedListing, createdAt: Date, tieBreaker: string): string {
  return Buffer.from(`${listing} ${createdAt.toISOString()} ${tieBreaker}`).toString("base64url");
}

/**
 * Reads {@link encodePageCursor}'s text for `listing`; throws an `invalid_value`
 * {@link AdminError} otherwise. Another listing's cursor is refused, saying so: its time and text
 * read as a position here too, and a script that mixed them up skipped or repeated rows without
 * a word. A cursor without a listing (handed out before cursors named theirs) is still read.
 */
export function decodePageCursor(text: string, listing: PagedListing): PageCursor {
  const whole = /^[A-Za-z0-9_-]+$/.test(text) ? Buffer.from(text, "base64url").toString() : "";
  const named = LISTING_PREFIX.exec(whole)?.[1];
  if (named !== undefined && named !== listing) {
    throw new AdminError(
      "invalid_value",
      `after is the next_after of a page of ${named}, not of ${listing}: pass the next_after of this listing's last page.`,
      { field: "after" },
    );
  }
  const decoded = named === undefined ? whole : whole.slice(named.length + 1);
  const space = decoded.indexOf(" ");
  const createdAt = new Date(decoded.slice(0, space));
  const tieBreaker = decoded.slice(space + 1);
  // No record's id or name holds a NUL (nor could PostgreSQL be asked about one), and none was
  // made outside the years 0000 to 9999 (stores compare times as text, where `+275760-...` sorts
  // first, and such a cursor began the listing again): not a cursor handed out.
  if (
    space < 0 ||
    !/^\d{4}-/.test(decoded) ||
    Number.isNaN(createdAt.getTime()) ||
    createdAt.toISOString() !== decoded.slice(0, space) ||
    hasNulCharacter(tieBreaker)
  ) {
    throw new AdminError("invalid_value", "after must be the next_after of an earlier page.", {
      field: "after",
    });
  }
  return { createdAt, tieBreaker };
}
