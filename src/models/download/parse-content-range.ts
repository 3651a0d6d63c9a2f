/**
 * A `Content-Range` header (RFC 9110 section 14.4): `bytes START-END/TOTAL` for a part (`TOTAL`
 * may be `*`, unknown), `bytes *\/TOTAL` in a 416 answer. `undefined` for anything else.
 */
export type ContentRange =
  | { type: "part"; start: number; end: number; total: number | undefined }
  | { type: "unsatisfied"; total: number };

export function parseContentRange(header: string | null): ContentRange | undefined {
  if (header === null) return undefined;
  const part = /^\s*bytes\s+(\d+)-(\d+)\/(\d+|\*)\s*$/i.exec(header);
  if (part !== null) {
    const start = Number(part[1]);
    const end = Number(part[2]);
    const total = part[3] === "*" ? undefined : Number(part[3]);
    if (end < start || (total !== undefined && end >= total)) return undefined;
    return { type: "part", start, end, total };
  }
  const unsatisfied = /^\s*bytes\s+\*\/(\d+)\s*$/i.exec(header);
  if (unsatisfied !== null) return { type: "unsatisfied", total: Number(unsatisfied[1]) };
  return undefined;
}
