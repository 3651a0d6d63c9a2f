import type { GbnfJsonSchema } from "node-llama-cpp";
import { isRecord } from "./read-schema-types.ts";
import type { PropertyCounts } from "./schema-conversion.ts";
import { child, type Position } from "./schema-position.ts";

/**
 * Keeps a converted schema's grammar finite. An object's grammar writes every declared property
 * (see convert-json-schema-to-gbnf.ts), so `{"properties": {"next": {"$ref": "#"}}}` had no finite
 * value: the model nested `next` until the context was full, billed for all of it, and never
 * ended the JSON. So an optional property whose schema has no finite value is left out (the output
 * stays valid: it is optional), and an object with a required one is refused, as no value can
 * match it. Likewise an alternative (`oneOf`) without a finite value is left out where another
 * has one (`{"anyOf": [{"$ref": "#/$defs/endless"}, {"type": "null"}]}` let the model nest
 * `endless` for ever): with none, what holds it has no finite value either. A cycle of references
 * with nothing in between (`{"$ref": "#"}`) is refused after this (see check-grammar-stacks.ts).
 */
export class FiniteValues {
  /**
   * Per converted `properties` (shared by the copies of its object): its required names, its place,
   * and how many properties it must keep at least (`minProperties`, where no other name may be)
   * and may keep at most (`maxProperties`).
   */
  readonly #objects = new WeakMap<object, { required: ReadonlySet<string>; at: Position } & PropertyCounts>();

  note(
    properties: Record<string, GbnfJsonSchema>,
    required: readonly string[],
    at: Position,
    counts?: PropertyCounts,
  ): void {
    this.#objects.set(properties, {
      required: new Set(required),
      at,
      minimum: counts?.minimum,
      maximum: counts?.maximum,
    });
  }

  /** Leaves out what has no finite value from `root` and its `$defs` (in place), or refuses it. */
  prune(
    root: GbnfJsonSchema,
    defs: Record<string, GbnfJsonSchema>,
    refuse: (at: Position, problem: string) => never,
  ): void {
    const bodies = new Map(Object.entries(defs));
    // Definitions that have no value even when every object and array is taken to end: only
    // references and alternatives lead from them back to them, which the grammar parser refuses.
    const structuresEnd = solve(root, bodies, { structuresEnd: true, opaque: new Set() });
    const pureCycles = new Set([...bodies.values()].filter((body) => !structuresEnd.has(body)));
    const options = { structuresEnd: false, opaque: pureCycles };
    // Every property is written: one without a finite value leaves its object none either.
    const ending = solve(root, bodies, options);
    for (const node of reachable([root, ...bodies.values()], bodies)) {
      const noted = isRecord(node.properties) ? this.#objects.get(node.properties) : undefined;
      if (noted === undefined || !isRecord(node.properties)) continue;
      // Never below `minProperties` (regression: `{"a": ..., "next": {"$ref": "#"}}` beside
      // `minProperties: 2` wrote `{"a": 470}`): what must stay and cannot end is refused below.
      let room = Object.keys(node.properties).length - (noted.minimum ?? 0);
      for (const [name, property] of Object.entries(node.properties)) {
        if (room <= 0) break;
        if (noted.required.has(name) || ending.has(property as object)) continue;
        delete node.properties[name];
        room--;
      }
      // Past `maxProperties`, the last optional ones are left out too: after those that cannot
      // end, so that they go first (regression: `{a, r: {$ref: "#"}, b}` beside min and max 2
      // left `b` out, then had to keep `r`, and refused a schema `{"a": 1, "b": true}` meets).
      if (noted.maximum === undefined) continue;
      const names = Object.keys(node.properties);
      let surplus = names.length - noted.maximum;
      for (let index = names.length - 1; surplus > 0 && index >= 0; index--) {
        const name = names[index] as string;
        if (noted.required.has(name)) continue;
        delete node.properties[name];
        surplus--;
      }
    }
    // Left out, those let what held them end: what has no finite value still needs a required one.
    const finite = solve(root, bodies, options);
    // An alternative without a finite value beside one with: the model could take it and write
    // until the context is full. The alternatives that end are what the schema allows.
    for (const node of reachable([root, ...bodies.values()], bodies)) {
      if (!Array.isArray(node.oneOf) || !finite.has(node)) continue;
      const ending = node.oneOf.filter((branch: unknown) => finite.has(branch as object));
      if (ending.length < node.oneOf.length) node.oneOf = ending;
    }
    const kept = reachable([root], bodies);
    for (const node of kept) {
      const noted = isRecord(node.properties) ? this.#objects.get(node.properties) : undefined;
      if (noted === undefined || !isRecord(node.properties)) continue;
      for (const [name, property] of Object.entries(node.properties)) {
        if (finite.has(property as object)) continue;
        const required = noted.required.has(name);
        const needed = required
          ? `the required property '${name}'`
          : `the property '${name}', which 'minProperties' (${noted.minimum}) needs written,`;
        refuse(
          child(noted.at, "properties", name),
          `${needed} has no finite value: its '$ref' leads back into it with no alternative that ends. ${required ? "Make it optional" : "Lower 'minProperties'"}, or give the recursion an end (such as {"anyOf": [{"$ref": ...}, {"type": "null"}]}, or an array of them).`,
        );
      }
    }
    if (!finite.has(root))
      refuse(
        { depth: 0, pointer: () => "#" },
        "the schema has no finite value: its '$ref' leads back into it with no alternative that ends. Give the recursion an end (an optional property, an alternative such as null, or an array of them).",
      );
    for (const [name, body] of bodies) if (!kept.has(body)) delete defs[name];
  }
}

/**
 * The schemas (reachable from `root` and the definitions) that have a finite value: a least fixed
 * point, found by counting what each schema still waits for (linear in the schema's size).
 */
function solve(
  root: GbnfJsonSchema,
  bodies: Map<string, GbnfJsonSchema>,
  options: { structuresEnd: boolean; opaque: ReadonlySet<object> },
): Set<object> {
  const waiting = new Map<object, number>();
  const dependents = new Map<object, object[]>();
  const ready: object[] = [];
  for (const node of reachable([root, ...bodies.values()], bodies)) {
    const needs = options.opaque.has(node) ? { all: true, of: [] } : readNeeds(node, bodies, options);
    // The same subschema twice (two properties of one definition) is waited for once.
    const of = [...new Set(needs.of)];
    // An object of no properties has a value; a `oneOf` of nothing (never written) has none.
    if (of.length === 0) {
      if (needs.all) ready.push(node);
      continue;
    }
    waiting.set(node, needs.all ? of.length : 1);
    for (const need of of) {
      const list = dependents.get(need);
      if (list === undefined) dependents.set(need, [node]);
      else list.push(node);
    }
  }
  const finite = new Set<object>();
  while (ready.length > 0) {
    const node = ready.pop() as object;
    if (finite.has(node)) continue;
    finite.add(node);
    for (const dependent of dependents.get(node) ?? []) {
      const left = (waiting.get(dependent) ?? 0) - 1;
      waiting.set(dependent, left);
      if (left === 0) ready.push(dependent);
    }
  }
  return finite;
}

/** What a schema needs to have a finite value: all of `of`, or one of them. */
function readNeeds(
  node: Record<string, unknown>,
  bodies: Map<string, GbnfJsonSchema>,
  options: { structuresEnd: boolean },
): { all: boolean; of: object[] } {
  if (typeof node.$ref === "string") return { all: true, of: [referenced(node.$ref, bodies)] };
  if (Array.isArray(node.oneOf)) return { all: false, of: node.oneOf };
  if (options.structuresEnd) return { all: true, of: [] };
  if (node.type === "object" && isRecord(node.properties))
    return { all: true, of: Object.values(node.properties).filter(isRecord) };
  if (node.type === "object" && isRecord(node.additionalProperties))
    return { all: true, of: Number(node.minProperties ?? 0) > 0 ? [node.additionalProperties] : [] };
  if (node.type === "array") {
    const prefix = Array.isArray(node.prefixItems) ? node.prefixItems.filter(isRecord) : [];
    const more = isRecord(node.items) && Number(node.minItems ?? 0) > prefix.length;
    return { all: true, of: more && isRecord(node.items) ? [...prefix, node.items] : prefix };
  }
  return { all: true, of: [] };
}

/** The schemas reachable from `from`, through references too. */
function reachable(
  from: readonly object[],
  bodies: Map<string, GbnfJsonSchema>,
): Set<Record<string, unknown>> {
  const seen = new Set<Record<string, unknown>>();
  const stack = [...from];
  while (stack.length > 0) {
    const node = stack.pop();
    if (!isRecord(node) || seen.has(node)) continue;
    seen.add(node);
    for (const found of children(node, bodies)) stack.push(found);
  }
  return seen;
}

/** The subschemas of a converted schema, a reference's definition included. */
function children(node: Record<string, unknown>, bodies: Map<string, GbnfJsonSchema>): object[] {
  const found: object[] = [];
  if (typeof node.$ref === "string") found.push(referenced(node.$ref, bodies));
  if (Array.isArray(node.oneOf)) found.push(...node.oneOf);
  if (isRecord(node.properties)) found.push(...Object.values(node.properties).filter(isRecord));
  if (Array.isArray(node.prefixItems)) found.push(...node.prefixItems);
  if (isRecord(node.items)) found.push(node.items);
  if (isRecord(node.additionalProperties)) found.push(node.additionalProperties);
  return found;
}

/** A definition that is not there (never the case): taken to end, as the grammar parser judges it. */
const missingDefinition = {};

/** The definition a converted `$ref` (`#/$defs/NAME`) names. */
function referenced(reference: string, bodies: Map<string, GbnfJsonSchema>): object {
  return bodies.get(reference.slice("#/$defs/".length)) ?? missingDefinition;
}
