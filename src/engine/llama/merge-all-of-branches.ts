import { checkKeywords, describe } from "./check-schema-keywords.ts";
import { intersectKeywords, startIntersection } from "./intersect-schema-keywords.ts";
import { copiedKeywords, pick } from "./pick-schema-keywords.ts";
import { isRecord } from "./read-schema-types.ts";
import type { SchemaConversion } from "./schema-conversion.ts";
import { child, type Position } from "./schema-position.ts";

/**
 * Merges `allOf` branches (and the schema's own keywords) into one schema, shallowly, each
 * keyword as both must hold (see intersect-schema-keywords.ts); refused when no value can meet
 * them all. Properties and required names of several branches are gathered into one copy, each
 * read counted as a step (copying the growing whole for every branch took 19 s for 5000 branches
 * of one property).
 *
 * A branch that is a `$ref` is merged as the schema it points at (its own `allOf` branches after
 * it): copied as a `$ref`, the reference was converted first and every other branch dropped, so
 * `allOf: [{"$ref": "#/$defs/Base"}, {"properties": ...}]` lost the extension. A reference to a
 * schema being converted (a cycle) stays a `$ref` as before; one merged here already is not again.
 * The schemas merged in are added to `inlined`: while the result is converted, a reference to
 * one of them is a cycle too (or it would be merged in again, and again).
 */
export function mergeAllOf(
  conversion: SchemaConversion,
  schema: Record<string, unknown>,
  at: Position,
  inlined: Set<unknown>,
): Record<string, unknown> {
  const { allOf, ...base } = pick(schema, copiedKeywords);
  inlined.add(schema);
  const branches = (allOf as unknown[]).map((branch, index) => ({
    branch,
    at: child(at, "allOf", String(index)),
  }));
  const merged = mergeBranches(conversion, base, branches, at, inlined);
  if (typeof merged === "string")
    conversion.refuseNoValue(at, `the 'allOf' branches have ${merged}, so no value can match.`);
  return merged;
}

/**
 * An `anyOf` or `oneOf` branch (at `at`) merged with the keywords beside it (`siblings`), as
 * both must hold, or why no value can (see {@link mergeAllOf}).
 */
export function mergeAnyOfBranch(
  conversion: SchemaConversion,
  siblings: Record<string, unknown>,
  branch: unknown,
  at: Position,
  inlined: Set<unknown>,
): Record<string, unknown> | string {
  return mergeBranches(conversion, siblings, [{ branch, at }], at, inlined);
}

function mergeBranches(
  conversion: SchemaConversion,
  base: Record<string, unknown>,
  branches: { branch: unknown; at: Position }[],
  at: Position,
  inlined: Set<unknown>,
): Record<string, unknown> | string {
  const into = startIntersection(base);
  // Branches still to merge, the next one last.
  const pending = [...branches].reverse();
  while (pending.length > 0) {
    const { branch: next, at: place } = pending.pop() as { branch: unknown; at: Position };
    if (next === true) continue;
    if (next === false) return "one that is false (no value)";
    if (!isRecord(next))
      conversion.refuse(place, `a schema must be an object or a boolean, not ${describe(next)}.`);
    checkKeywords(conversion, next, place);
    let branch = next;
    // Where the merged keywords sit in the client's schema: a `$ref`'s target where it points.
    let origin = place;
    const reference = typeof branch.$ref === "string" ? branch.$ref : undefined;
    const target = reference === undefined ? undefined : conversion.resolveMergeable(reference, at);
    if (target === true) continue;
    if (target === false) return "one that is false (no value)";
    if (target !== undefined) {
      if (inlined.has(target)) continue;
      inlined.add(target);
      // Converted, a `$ref` is all a schema is (keywords beside it are dropped): so here too.
      if (typeof target.$ref === "string") {
        pending.push({ branch: { $ref: target.$ref }, at: place });
        continue;
      }
      branch = target;
      origin = { depth: place.depth, pointer: () => reference ?? place.pointer() };
    }
    const { allOf: nested, ...own } = branch;
    // Merged, its alternatives sit beside other keywords: named where the client wrote them.
    for (const keyword of ["anyOf", "oneOf"]) {
      const list = own[keyword];
      if (Array.isArray(list)) conversion.noteAlternatives(list, child(origin, keyword));
    }
    // What `allOf` holds is merged here; the rest of the branch is what its own would be.
    if (Array.isArray(nested)) {
      if (target !== undefined) conversion.budget.spend(at, "steps", nested.length);
      for (let index = nested.length - 1; index >= 0; index--)
        pending.push({ branch: nested[index], at: child(place, "allOf", String(index)) });
    }
    const problem = intersectKeywords(conversion, into, pick(own, copiedKeywords), at);
    if (problem !== undefined) return problem;
  }
  return into.merged;
}
