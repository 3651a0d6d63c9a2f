import { isRecord } from "./read-schema-types.ts";

/**
 * The value a `$ref` within the document points at (`#` or `#/a/b` with JSON pointer and URI
 * escapes), or `undefined` for one that does not resolve or is not local (a URL, an anchor).
 */
export function resolveLocalReference(root: unknown, reference: string): unknown {
  if (reference === "#") return root;
  if (!reference.startsWith("#/")) return undefined;
  let target: unknown = root;
  for (const encoded of reference.slice(2).split("/")) {
    const segment = decodePointerSegment(encoded);
    if (segment === undefined) return undefined;
    if (Array.isArray(target) && /^(0|[1-9][0-9]*)$/.test(segment)) target = target[Number(segment)];
    else if (isRecord(target) && Object.hasOwn(target, segment)) target = target[segment];
    else return undefined;
  }
  return target;
}

/** A JSON pointer segment of a URI fragment, unescaped; `undefined` for a malformed `%` escape. */
export function decodePointerSegment(segment: string): string | undefined {
  try {
    return decodeURIComponent(segment).replaceAll("~1", "/").replaceAll("~0", "~");
  } catch {
    return undefined;
  }
}

export function encodePointerSegment(segment: string): string {
  return segment.replaceAll("~", "~0").replaceAll("/", "~1");
}
