import { createRandomText } from "../ids/random-text.ts";

const REQUEST_ID_PATTERN = /^[\w.:-]{1,128}$/;

/** The client's `x-request-id` when it is sane, else a new one (`req_` and 24 hex digits). */
export function createRequestId(header?: string | string[] | undefined): string {
  if (typeof header === "string" && REQUEST_ID_PATTERN.test(header)) return header;
  return `req_${createRandomText(12, "hex")}`;
}
