/**
 * Schemas of a few hundred bytes whose llama.cpp grammar keeps exponentially many parse stacks
 * (see check-grammar-stacks.ts), for the tests that check they are refused; and one whose
 * constant's checks take far more than their budget (constant-meets-keywords.ts).
 */

/**
 * A const of an object of 100 members (property `a`'s array branch), reached through 20 * 20
 * references to an enum of 100 empty objects: 400 * 100 comparisons of 100 names each, some
 * 4,000,000 checks. Checked to the end, the branch meets no value and is left out; with its checks
 * spent, the const is taken to meet the rest, and written (its member `k99` shows).
 */
export function createConstantComparisons(): Record<string, unknown> {
  const ref = (name: string) => ({ $ref: `#/$defs/${name}` });
  const member = Object.fromEntries(Array.from({ length: 100 }, (_, index) => [`k${index}`, 0]));
  return {
    type: "object",
    properties: {
      a: { anyOf: [{ type: "array", const: [member], items: ref("L1") }, { type: "string" }] },
    },
    required: ["a"],
    $defs: {
      L1: { anyOf: Array.from({ length: 20 }, () => ref("L2")) },
      L2: { anyOf: Array.from({ length: 20 }, () => ref("E")) },
      E: { enum: Array.from({ length: 100 }, () => ({})) },
    },
  };
}

/** `d0` a string, each `dN` an anyOf of two references to `d(N-1)`: 2^N ways to the string. */
export function createReferenceChain(levels: number): Record<string, unknown> {
  const defs: Record<string, unknown> = { d0: { type: "string" } };
  for (let level = 1; level <= levels; level++) {
    const previous = { $ref: `#/$defs/d${level - 1}` };
    defs[`d${level}`] = { anyOf: [previous, { ...previous }] };
  }
  return { $defs: defs, $ref: `#/$defs/d${levels}` };
}

/** Two chains that take turns (`aN`: anyOf[a(N-1), b(N-1)], `bN` the other way), under a property. */
export function createTwoChains(levels: number): Record<string, unknown> {
  const defs: Record<string, unknown> = { a0: { type: "string" }, b0: { type: "integer" } };
  for (let level = 1; level <= levels; level++) {
    const a = { $ref: `#/$defs/a${level - 1}` };
    const b = { $ref: `#/$defs/b${level - 1}` };
    defs[`a${level}`] = { anyOf: [a, b] };
    defs[`b${level}`] = { anyOf: [b, a] };
  }
  return { type: "object", properties: { v: { $ref: `#/$defs/a${levels}` } }, required: ["v"], $defs: defs };
}

/** Objects that begin alike in each level: after `{"x":` both stay open, 2^N stacks at the bottom. */
export function createAlikeBranches(levels: number): Record<string, unknown> {
  const defs: Record<string, unknown> = { a0: { type: "string" } };
  for (let level = 1; level <= levels; level++) {
    const x = { $ref: `#/$defs/a${level - 1}` };
    defs[`a${level}`] = {
      anyOf: [
        { type: "object", properties: { x } },
        { type: "object", properties: { x, y: { type: "integer" } } },
      ],
    };
  }
  return { $defs: defs, $ref: `#/$defs/a${levels}` };
}
