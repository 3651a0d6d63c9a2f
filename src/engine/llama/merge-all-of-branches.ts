import { copiedKeywords, pick } from "./pick-schema-keywords.ts";
import { isRecord, readTypes } from "./read-schema-types.ts";
import type { SchemaConversion } from "./schema-conversion.ts";
import type { Position } from "./schema-position.ts";

/**
 * Merges `allOf` branches (and the schema's own keywords) into one schema, shallowly. Properties
 * and required names of several branches are gathered into one copy, each read counted as a step
 * (copying the growing whole for every branch took 19 s for 5000 branches of one property).
 *
 * A branch that is a `$ref` is merged as the schema it points at (its own `allOf` branches after
 * it): copied as a `$ref`, the reference was converted first and every other branch dropped, so
 * `allOf: [{"$ref": "#/$defs/Base"}, {"properties": ...}]` lost the extension. A reference to a
 * schema being converted (a cycle) stays a `$ref` as before; one merged here already is not again.
 */
export function mergeAllOf(
  conversion: SchemaConversion,
  schema: Record<string, unknown>,
  at: Position,
): Record<string, unknown> {
  const { allOf, ...merged } = pick(schema, copiedKeywords);
  const copied = new Set<string>();
  const inlined = new Set<unknown>([schema]);
  // Branches still to merge, the next one last.
  const pending = [...(allOf as unknown[])].reverse();
  while (pending.length > 0) {
    const next = pending.pop();
    if (!isRecord(next)) continue;
    let branch = next;
    const target = typeof branch.$ref === "string" ? conversion.resolveMergeable(branch.$ref, at) : undefined;
    if (target !== undefined) {
      if (inlined.has(target)) continue;
      inlined.add(target);
      // Converted, a `$ref` is all a schema is (keywords beside it are dropped): so here too.
      if (typeof target.$ref === "string") {
        pending.push({ $ref: target.$ref });
        continue;
      }
      const { allOf: nested, ...own } = target;
      // What `allOf` holds the converter merges; the rest of the target is what its own would be.
      if (Array.isArray(nested)) {
        conversion.budget.spend(at, "steps", nested.length);
        for (const item of [...nested].reverse()) pending.push(item);
      }
      branch = own;
    }
    for (const key of copiedKeywords) {
      if (!Object.hasOwn(branch, key)) continue;
      const value = branch[key];
      const existing = merged[key];
      if (key === "properties" && isRecord(existing) && isRecord(value)) {
        // Without a prototype, so that a property named `__proto__` is one like any other.
        const properties: Record<string, unknown> = copied.has(key)
          ? existing
          : Object.assign(Object.create(null), existing);
        const added = Object.entries(value);
        conversion.budget.spend(
          at,
          "steps",
          (copied.has(key) ? 0 : Object.keys(existing).length) + added.length,
        );
        for (const [name, property] of added) properties[name] = property;
        merged[key] = properties;
        copied.add(key);
      } else if (key === "required" && Array.isArray(existing) && Array.isArray(value)) {
        const required: unknown[] = copied.has(key) ? existing : [...existing];
        conversion.budget.spend(at, "steps", (copied.has(key) ? 0 : existing.length) + value.length);
        for (const name of value) required.push(name);
        merged[key] = required;
        copied.add(key);
      } else if (key === "type" && existing !== undefined) {
        merged[key] = intersectTypes(conversion, existing, value, at);
      } else if (!(key in merged)) {
        merged[key] = value;
      }
    }
  }
  return merged;
}

/** The types both `allOf` branches allow (an integer is a number); refused when there are none. */
function intersectTypes(
  conversion: SchemaConversion,
  first: unknown,
  second: unknown,
  at: Position,
): string[] {
  const [left, right] = [readTypes({ type: first }), readTypes({ type: second })];
  const allows = (types: string[], type: string) =>
    types.includes(type) || (type === "integer" && types.includes("number"));
  const both = [...new Set([...left, ...right])].filter((type) => allows(left, type) && allows(right, type));
  if (both.length === 0)
    conversion.refuse(
      at,
      `the 'allOf' branches have no 'type' in common (${left.join(", ")} and ${right.join(", ")}), so no value can match.`,
    );
  return both;
}
