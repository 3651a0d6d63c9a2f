import type { GbnfJsonSchema } from "node-llama-cpp";
import { AppError } from "../../errors/app-error.ts";
import { ownGrammarCosts } from "./patch-grammar-definitions.ts";

/**
 * The most parse stacks a schema's grammar may keep at once (see {@link checkGrammarStacks}).
 * llama.cpp spends on every stack when it builds a grammar and when it checks each token of the
 * vocabulary against the grammar, per generated token: 2^20 stacks (a 1 KB schema) took 33 ms
 * to build, 2^24 a second, and 4096 stacks that stay open together took a few tens of ms per
 * token on a 569-token vocabulary (real vocabularies are 50 to 250 times larger). An `enum` of
 * the 1000 values a schema may declare is 1000 stacks at its opening quote.
 */
export const maxGrammarStacks = 2000;
/** The most steps the count may take: real schemas take a few per node; past it, refused as too complex. */
const maxSteps = 200_000;

const leftRecursionHint = `A '$ref' that leads back to itself with nothing in between (such as {"$ref": "#"}, or definitions that only refer to each other) cannot be generated: make every such cycle pass through an object property or an array item, or simplify the schema.`;

/**
 * Refuses, with 400 `invalid_value` naming `param`, a converted schema (convert-json-schema-to-gbnf.ts)
 * whose llama.cpp grammar would keep more than {@link maxGrammarStacks} parse stacks at one place,
 * or refers to itself with nothing in between (left recursion), before llama.cpp sees it.
 *
 * llama.cpp keeps one stack per way the grammar can go on from what was written so far. At a
 * place, each alternative (`oneOf`, a `$ref` to one) adds its own stacks, down through nested
 * alternatives until a character: `d1: anyOf[d0, d0]`, `d2: anyOf[d1, d1]`, ... is 2^N stacks
 * at the start of `dN`, each walked (identical ones are dropped only once made), though the
 * grammar has one rule per definition. A sequence (an object's properties, an array's items)
 * opens only its first element. After a character, the stacks that cannot take it end, so
 * branches of different kinds (an object, a string, null) part at once, but branches that begin
 * alike stay open together: objects whose first properties have the same names (and values that
 * are not different constants) both open the value that follows, and stacks multiply again in
 * every level that nests so (`a: anyOf[{x: a'}, {x: a', y: ...}]`, `a'` the same, and so on).
 * The count follows both, an upper bound: every branch that may still match is counted, and a
 * recursion that multiplies the open branches each time round is refused whatever its depth.
 */
export function checkGrammarStacks(schema: GbnfJsonSchema, param: string): void {
  const problem = new StackCount(schema).problem();
  if (problem === "left-recursion") {
    throw new AppError(
      "invalid_value",
      `The JSON schema in '${param}' cannot be turned into a grammar (a '$ref' leads back to itself before any character is written). ${leftRecursionHint}`,
      { param },
    );
  }
  if (problem === "multiplying-recursion") {
    // Refused at any depth, however few alternatives one level opens: the model may nest as deep
    // as its tokens allow, and each level multiplies what llama.cpp keeps open.
    throw new AppError(
      "invalid_value",
      `Invalid JSON Schema in '${param}': alternatives (anyOf or oneOf branches) that begin alike contain themselves before anything tells them apart, so what a local model's output grammar keeps open multiplies with every level of nesting (objects whose first properties have the same names, the recursive one among them). Put a property that tells the alternatives apart (a 'const', or one that only one of them has) before the property that recurses, or merge the alike alternatives.`,
      { param },
    );
  }
  if (problem !== undefined) {
    const what =
      problem === "too-many"
        ? `its grammar would keep more than ${maxGrammarStacks} alternatives open at once`
        : "its grammar's alternatives are too intricate to count";
    throw new AppError(
      "invalid_value",
      `Invalid JSON Schema in '${param}': ${what} (what a local model's output grammar takes). Each anyOf or oneOf branch counts once for every way it is reached (a '$ref' to an anyOf of '$ref's to anyOfs multiplies them), and branches that begin alike (objects whose first properties have the same names, strings) stay open together, again in every level that nests them. Merge alternatives that are alike, put a property that tells them apart (a 'const') first, or simplify the schema.`,
      { param },
    );
  }
}

type Problem = "left-recursion" | "multiplying-recursion" | "too-many" | "too-intricate";

class Refusal {
  readonly problem: Problem;

  constructor(problem: Problem) {
    this.problem = problem;
  }
}

/** Where a stack can stand: a schema of one kind (a typed schema, a constant), or "any JSON value". */
interface Leaf {
  kind: "object" | "array" | "other";
  node: Record<string, unknown>;
  /** The constant's JSON text, for a `const`: branches with different ones part after it. */
  constant?: string;
}

/** How many stacks stand on each leaf, by leaf id. */
type Stacks = Map<number, number>;

class StackCount {
  /** What each `$ref` points at (see resolveReferences). */
  readonly #targets: WeakMap<object, unknown>;
  readonly #ids = new WeakMap<object, number>();
  readonly #leaves: Leaf[] = [];
  /** The stacks each schema opens at its start: its `oneOf` branches and references followed. */
  readonly #opened = new WeakMap<object, Stacks>();
  readonly #opening = new Set<object>();
  /** The largest multiplier each group of open stacks was looked into with, and those being looked into. */
  readonly #visited = new Map<string, number>();
  readonly #visiting = new Map<string, number>();
  readonly #root: GbnfJsonSchema;
  #steps = 0;

  constructor(root: GbnfJsonSchema) {
    this.#root = root;
    this.#targets = resolveReferences(root);
  }

  problem(): Problem | undefined {
    try {
      this.#visit(new Map([[this.#id(this.#root), 1]]), 1);
      return undefined;
    } catch (error) {
      if (error instanceof Refusal) return error.problem;
      throw error;
    }
  }

  /**
   * Looks into the places `schemas` (schema id to how many stacks enter it) open together, each
   * stack standing for `multiplier` of them.
   */
  #visit(schemas: Stacks, multiplier: number): void {
    const stacks: Stacks = new Map();
    for (const [id, count] of schemas) {
      this.#step();
      addScaled(stacks, this.#open(this.#nodes[id]), count);
    }
    if (stacks.size === 0) return;
    let total = 0;
    let structures = false;
    for (const [id, count] of stacks) {
      total += count;
      if (this.#leaves[id]?.kind !== "other") structures = true;
    }
    if (total * multiplier > maxGrammarStacks) throw new Refusal("too-many");
    // Strings, numbers, constants: nothing opens within them.
    if (!structures) return;
    // The same stacks, more of each, open the same places: looked into with the common factor out.
    const factor = [...stacks.values()].reduce(greatestCommonDivisor, 0);
    const scale = multiplier * factor;
    const key = [...stacks].map(([id, count]) => `${id}*${count / factor}`).join(",");
    const open = this.#visiting.get(key);
    if (open !== undefined) {
      // Round a recursion: with more stacks each time, without bound.
      if (scale > open) throw new Refusal("multiplying-recursion");
      return;
    }
    if ((this.#visited.get(key) ?? 0) >= scale) return;
    this.#visited.set(key, scale);
    this.#visiting.set(key, scale);
    const objects: Stacks = new Map();
    const arrays: Stacks = new Map();
    for (const [id, count] of stacks) {
      const leaf = this.#leaves[id];
      if (leaf?.kind === "object") objects.set(id, count / factor);
      else if (leaf?.kind === "array") arrays.set(id, count / factor);
    }
    if (objects.size > 0) this.#visitProperties(objects, scale);
    if (arrays.size > 0) this.#visitItems(arrays, scale);
    this.#visiting.delete(key);
  }

  /**
   * Objects open together from their `position`-th property on: those with the same name there
   * (maps: any name) open its values together, and go on together unless the values are
   * different constants.
   */
  #visitProperties(objects: Stacks, multiplier: number): void {
    // Groups of objects still open together, and the place of the property they are at.
    const pending: { objects: Stacks; position: number }[] = [{ objects, position: 0 }];
    for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
      const { position } = next;
      const byName = new Map<string, [number, number][]>();
      const maps: [number, number][] = [];
      for (const [id, count] of next.objects) {
        this.#step();
        const node = this.#leaves[id]?.node;
        if (node === undefined) continue;
        const name = this.#namesOf(node)[position];
        if (name === undefined) {
          // Past its properties, an object with `additionalProperties` takes any names, as a map.
          if (!isRecord(node.properties) || (node.additionalProperties ?? false) !== false)
            maps.push([id, count]);
          continue;
        }
        const group = byName.get(name) ?? [];
        group.push([id, count]);
        byName.set(name, group);
      }
      if (byName.size === 0) {
        if (maps.length > 0) this.#visit(this.#valuesAt([], "", maps), multiplier);
        continue;
      }
      for (const [name, group] of byName) {
        this.#visit(this.#valuesAt(group, name, maps), multiplier);
        const named = group.map(([id, count]) => ({ id, count, constant: this.#constantOf(id, name) }));
        const constants = new Set(
          named.flatMap(({ constant }) => (constant === undefined ? [] : [constant])),
        );
        for (const constant of constants.size === 0 ? [undefined] : constants) {
          const together: Stacks = new Map(maps);
          for (const member of named) {
            if (member.constant === undefined || member.constant === constant)
              together.set(member.id, member.count);
          }
          pending.push({ objects: together, position: position + 1 });
        }
      }
    }
  }

  /** An object's property names, in the order the grammar writes them (read once: an object may have 1000). */
  #namesOf(node: Record<string, unknown>): string[] {
    let names = this.#names.get(node);
    if (names === undefined) {
      names = isRecord(node.properties) ? Object.keys(node.properties) : [];
      this.#names.set(node, names);
    }
    return names;
  }
  readonly #names = new WeakMap<object, string[]>();

  /** The values objects open together: the `named` ones' property `name`, the `maps`' other values. */
  #valuesAt(named: readonly [number, number][], name: string, maps: readonly [number, number][]): Stacks {
    const values: Stacks = new Map();
    for (const [id, count] of named) {
      const properties = this.#leaves[id]?.node.properties;
      addScaled(values, one(this.#id(isRecord(properties) ? properties[name] : undefined)), count);
    }
    for (const [id, count] of maps)
      addScaled(values, one(this.#id(this.#leaves[id]?.node.additionalProperties)), count);
    return values;
  }

  /** The JSON text of a property's value when it is a constant (through references). */
  #constantOf(objectId: number, name: string): string | undefined {
    const properties = this.#leaves[objectId]?.node.properties;
    if (!isRecord(properties)) return undefined;
    const opened = this.#open(properties[name]);
    if (opened.size !== 1) return undefined;
    const [leafId] = opened.keys();
    return leafId === undefined ? undefined : this.#leaves[leafId]?.constant;
  }

  /** Arrays open together: the items at each place of their tuples, then their other items, together. */
  #visitItems(arrays: Stacks, multiplier: number): void {
    let longest = 0;
    for (const id of arrays.keys()) longest = Math.max(longest, this.#prefixOf(id).length);
    for (let position = 0; position <= longest; position++) {
      const items: Stacks = new Map();
      for (const [id, count] of arrays) {
        this.#step();
        const prefix = this.#prefixOf(id);
        const item = position < prefix.length ? prefix[position] : this.#leaves[id]?.node.items;
        if (item !== false) addScaled(items, one(this.#id(item)), count);
      }
      this.#visit(items, multiplier);
    }
  }

  #prefixOf(arrayId: number): unknown[] {
    const prefix = this.#leaves[arrayId]?.node.prefixItems;
    return Array.isArray(prefix) ? prefix : [];
  }

  /** The leaves (with their stack counts) that `node` opens at its start. */
  #open(node: unknown): Stacks {
    if (!isRecord(node)) return this.#open(anyValue);
    const known = this.#opened.get(node);
    if (known !== undefined) return known;
    if (this.#opening.has(node)) throw new Refusal("left-recursion");
    this.#opening.add(node);
    this.#step();
    const stacks: Stacks = new Map();
    if (typeof node.$ref === "string") {
      const target = this.#targets.get(node);
      addScaled(stacks, this.#open(target), 1);
    } else if (Array.isArray(node.oneOf)) {
      for (const branch of node.oneOf) addScaled(stacks, this.#open(branch), 1);
    } else if (Array.isArray(node.enum)) {
      for (const value of node.enum) {
        const constant = JSON.stringify(value);
        addScaled(stacks, one(this.#leafId({ kind: "other", node, constant }, constant)), 1);
      }
    } else if ("const" in node) {
      const constant = JSON.stringify(node.const);
      addScaled(stacks, one(this.#leafId({ kind: "other", node, constant }, constant)), 1);
    } else {
      const types = Array.isArray(node.type) ? node.type : [node.type];
      // A string's pattern opens its own alternatives (see pattern-grammar.ts).
      const { stacks: weight } = ownGrammarCosts(node);
      for (const type of types) {
        const kind = type === "object" ? "object" : type === "array" ? "array" : "other";
        addScaled(stacks, one(this.#leafId({ kind, node }, String(type))), weight);
      }
    }
    let total = 0;
    for (const count of stacks.values()) total += count;
    if (total > maxGrammarStacks) throw new Refusal("too-many");
    this.#opening.delete(node);
    this.#opened.set(node, stacks);
    return stacks;
  }

  /** The id of a leaf: one per schema node and type (or `enum` value), so the same place is one leaf. */
  #leafId(leaf: Leaf, variant: string): number {
    const key = `${this.#id(leaf.node)}:${variant}`;
    let id = this.#leafIds.get(key);
    if (id === undefined) {
      id = this.#leaves.length;
      this.#leaves.push(leaf);
      this.#leafIds.set(key, id);
    }
    return id;
  }
  readonly #leafIds = new Map<string, number>();

  /** Schema nodes by id, so that groups of them can be keyed; what is not a schema object is "any value". */
  #id(node: unknown): number {
    const object = isRecord(node) ? node : anyValue;
    let id = this.#ids.get(object);
    if (id === undefined) {
      id = this.#nodes.length;
      this.#nodes.push(object);
      this.#ids.set(object, id);
    }
    return id;
  }
  readonly #nodes: Record<string, unknown>[] = [];

  #step(): void {
    this.#steps += 1;
    if (this.#steps > maxSteps) throw new Refusal("too-intricate");
  }
}

/** `true`, a missing schema and the like: "any JSON value", whose stacks part at its first character. */
const anyValue: Record<string, unknown> = {};

/**
 * What each `$ref` of `root` points at, as node-llama-cpp resolves them: among the `$defs` of the
 * schemas that hold it (the nearest first), a definition's own among those that hold the `$defs`.
 * A forced call's envelope holds each tool's schema with its own `$defs`.
 */
function resolveReferences(root: unknown): WeakMap<object, unknown> {
  const targets = new WeakMap<object, unknown>();
  const seen = new WeakSet<object>();
  const pending: { node: unknown; scope: Record<string, unknown> }[] = [{ node: root, scope: {} }];
  while (pending.length > 0) {
    const { node, scope: outer } = pending.pop() as { node: unknown; scope: Record<string, unknown> };
    if (!isRecord(node) || seen.has(node)) continue;
    seen.add(node);
    const scope = isRecord(node.$defs) ? { ...outer, ...node.$defs } : outer;
    if (isRecord(node.$defs))
      for (const body of Object.values(node.$defs)) pending.push({ node: body, scope });
    if (typeof node.$ref === "string" && node.$ref.startsWith("#/$defs/"))
      targets.set(node, scope[node.$ref.slice("#/$defs/".length)]);
    const children = [
      ...(Array.isArray(node.oneOf) ? node.oneOf : []),
      ...(isRecord(node.properties) ? Object.values(node.properties) : []),
      ...(Array.isArray(node.prefixItems) ? node.prefixItems : []),
      node.items,
      node.additionalProperties,
    ];
    for (const child of children) pending.push({ node: child, scope });
  }
  return targets;
}

/** One stack on `id`. */
function one(id: number): Stacks {
  return new Map([[id, 1]]);
}

function addScaled(into: Stacks, from: Stacks, factor: number): void {
  for (const [id, count] of from) into.set(id, (into.get(id) ?? 0) + count * factor);
}

function greatestCommonDivisor(a: number, b: number): number {
  return b === 0 ? a : greatestCommonDivisor(b, a % b);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
