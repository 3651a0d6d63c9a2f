import { encodePointerSegment } from "./resolve-json-pointer.ts";

/**
 * Where the converter is in the client's schema: nesting for the depth bound, a JSON pointer for
 * messages (built only for one: a property name can be long, and a place can be met many times).
 */
export interface Position {
  depth: number;
  pointer(): string;
}

/** The position of a subschema of `at` under these pointer segments (not yet encoded). */
export function child(at: Position, ...segments: string[]): Position {
  return {
    depth: at.depth + 1,
    pointer: () => `${at.pointer()}/${segments.map(encodePointerSegment).join("/")}`,
  };
}
