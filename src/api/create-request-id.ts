import { hideKeySecrets } from "../admin/read-key-reference.ts";
import { createRandomText } from "../ids/random-text.ts";

/**
 * A client's id is kept when it is 1 to 128 visible ASCII characters: UUIDs, base64 (`+/=`),
 * W3C trace parents and paths all pass. Spaces, control characters and anything else are not
 * repeated into headers, log lines and the ledger; such a request gets an id of its own.
 */
const REQUEST_ID_PATTERN = /^[!-~]{1,128}$/;

/**
 * The client's `x-request-id` when it is sane, else a new one (`req_` and 24 hex digits). An API
 * key sent as the id (a header mixed up) is not sane: the id goes into log lines and the ledger.
 */
export function createRequestId(header?: string | string[] | undefined): string {
  if (typeof header === "string" && REQUEST_ID_PATTERN.test(header) && hideKeySecrets(header) === header)
    return header;
  return `req_${createRandomText(12, "hex")}`;
}
