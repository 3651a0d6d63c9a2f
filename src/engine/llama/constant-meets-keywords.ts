import { numberMeetsKeywords } from "./number-bounds.ts";
import { parseRegexPattern } from "./parse-regex-pattern.ts";
import { maxPatternCharacters, readingWorkPerCharacter } from "./pattern-grammar.ts";
import { createPatternMatcher, type PatternMatcher } from "./pattern-open-positions.ts";
import { hasPatternProperties, hasType, isRecord, readTypes } from "./read-schema-types.ts";
import { wholeStringTree } from "./regex-node-shape.ts";
import type { ConversionBudget } from "./schema-conversion-budget.ts";

/**
 * RFC 3339's forms (a time's seconds fraction of any length here), and a time without a zone, as
 * the grammar writes it and zod reads it (patch-grammar-terminals.ts).
 */
const clock = "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]+)?";
const zone = "([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])";
const date = "[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])";
const formats: Record<string, RegExp | undefined> = Object.assign(Object.create(null), {
  date: new RegExp(`^${date}$`),
  time: new RegExp(`^${clock}${zone}?$`),
  "date-time": new RegExp(`^${date}[Tt]${clock}${zone}$`),
});
/** Deeper members are taken to meet their schemas: constants are written as they are. */
const maxDepth = 32;
/**
 * A conversion's constant checks (their number bounded by schema-conversion-budget.ts's
 * maxConstantChecks, shared by a request's tools), and the lengths of the strings they counted.
 */
export class ConstantChecks {
  /** The schema a `$ref` points at (`undefined`: none), for the schemas of a constant's members. */
  readonly resolve: (reference: string) => unknown;
  /**
   * Whether `format` counts: JSON Schema takes it for an annotation, which an upstream model may
   * too; a grammar enforces it (see convertJsonSchemaToGbnf's `grammarLimits`).
   */
  readonly formats: boolean;

  /** The conversion's budget: its constant checks, and the patterns' work a matcher's building spends. */
  readonly #budget: ConversionBudget;

  constructor(resolve: (reference: string) => unknown, formats: boolean, budget: ConversionBudget) {
    this.resolve = resolve;
    this.formats = formats;
    this.#budget = budget;
  }

  /** Code points by string: a long constant repeated in every branch is counted once. */
  readonly #lengths = new Map<string, number>();

  /** Takes `count` checks, or tells that none are left. */
  take(count: number): boolean {
    return this.#budget.takeConstantChecks(count);
  }

  /**
   * {@link sameValue}, what it looked at taken from the checks; past them, the values are taken to
   * be the same (a constant meets the rest). A member checked against an `enum` compared it with
   * every value uncounted: objects of 600 members against 600 values, reached through `$ref`s
   * 1600 times, held the event loop 38 s.
   */
  same(first: unknown, second: unknown): boolean {
    if (this.left < 0) return true;
    const visits = { count: 0 };
    const same = sameValue(first, second, visits);
    this.take(visits.count);
    return same;
  }

  /** The checks left (negative once taken past them). */
  get left(): number {
    return this.#budget.constantChecksLeft;
  }

  /**
   * Whether `value` matches `pattern`, as the grammar reads it (see pattern-grammar.ts): a pattern
   * it cannot write, or a check past the budget left, is taken to be met. Reading a pattern and
   * building its automaton (bounded: pattern-open-positions.ts) spend from the patterns' work of
   * the conversion, or of a request's tools together (schema-conversion-budget.ts): with a budget
   * for each tool, 128 tools each built a matcher.
   */
  matchesPattern(pattern: string, value: string): boolean {
    let matcher = this.#patterns.get(pattern);
    if (matcher === undefined) {
      if (!this.take(pattern.length)) return true;
      matcher = this.#budget.spendOnPattern(() => readMatcher(pattern))?.matcher ?? null;
      this.#patterns.set(pattern, matcher);
    }
    if (matcher === null) return true;
    const { matched, work } = matcher(value, Math.max(0, this.left));
    this.take(work);
    return matched ?? true;
  }

  /** Patterns read, as matchers: `null` where the grammar cannot write one. */
  readonly #patterns = new Map<string, PatternMatcher | null>();

  /** A string's length as JSON Schema counts it: in code points. */
  countCodePoints(text: string): number {
    let count = this.#lengths.get(text);
    if (count === undefined) {
      this.take(text.length);
      count = 0;
      for (const _ of text) count += 1;
      this.#lengths.set(text, count);
    }
    return count;
  }
}

/**
 * Whether a `const` or `enum` value meets the keywords the conversion enforces beside it: it is
 * written exactly, so `{"enum": ["a", "abcdef"], "minLength": 3}` wrote "a" too. Lengths, counts,
 * `format`, a `pattern` the grammar can write, `required`, numbers' bounds and `multipleOf` (regression: `{"enum": [1, 5, 10],
 * "maximum": 6}` wrote 10 too), and the `type`, `properties`, `items` and the like of its members,
 * where their schemas say so, within `checks`.
 */
export function constantMeetsKeywords(
  value: unknown,
  schema: Record<string, unknown>,
  checks: ConstantChecks,
): boolean {
  return meets(value, schema, 0, checks);
}

function meets(
  value: unknown,
  schema: Record<string, unknown>,
  depth: number,
  work: ConstantChecks,
): boolean {
  if (depth > maxDepth || work.left < 0) return true;
  if (typeof value === "number") return numberMeetsKeywords(value, schema);
  if (typeof value === "string") {
    // Code points are between half the UTF-16 units and all of them: most lengths need no count.
    const units = value.length;
    const min = typeof schema.minLength === "number" ? schema.minLength : 0;
    const max = typeof schema.maxLength === "number" ? schema.maxLength : Number.POSITIVE_INFINITY;
    const length = min <= Math.ceil(units / 2) && units <= max ? min : work.countCodePoints(value);
    if (!inRange(length, schema.minLength, schema.maxLength)) return false;
    const format = typeof schema.format === "string" && work.formats ? formats[schema.format] : undefined;
    if (format !== undefined && !format.test(value)) return false;
    return typeof schema.pattern !== "string" || !work.formats || work.matchesPattern(schema.pattern, value);
  }
  if (Array.isArray(value)) {
    if (!inRange(value.length, schema.minItems, schema.maxItems)) return false;
    const tuple = Array.isArray(schema.prefixItems)
      ? schema.prefixItems
      : Array.isArray(schema.items)
        ? schema.items
        : [];
    const rest = Array.isArray(schema.items)
      ? schema.additionalItems
      : Array.isArray(schema.prefixItems) || !Array.isArray(schema.items)
        ? schema.items
        : undefined;
    return value.every((item, index) =>
      memberMeets(item, index < tuple.length ? tuple[index] : rest, depth, work),
    );
  }
  if (isRecord(value)) {
    const names = Object.keys(value);
    if (!inRange(names.length, schema.minProperties, schema.maxProperties)) return false;
    if (
      Array.isArray(schema.required) &&
      work.take(schema.required.length) &&
      !schema.required.every((name) => typeof name !== "string" || Object.hasOwn(value, name))
    )
      return false;
    const properties = isRecord(schema.properties) ? schema.properties : {};
    return names.every((name) =>
      memberMeets(
        value[name],
        Object.hasOwn(properties, name)
          ? properties[name]
          : hasPatternProperties(schema)
            ? undefined
            : schema.additionalProperties,
        depth,
        work,
      ),
    );
  }
  return true;
}

/**
 * Whether a member of a constant meets its schema (`undefined`: none): `allOf` branches all, one
 * of `anyOf` or `oneOf`; what a `$ref` points at is taken to be met.
 */
function memberMeets(value: unknown, schema: unknown, depth: number, work: ConstantChecks): boolean {
  if (schema === false) return false;
  if (!isRecord(schema)) return true;
  // Past its checks, a constant is taken to meet the rest: a value met by each of many branches
  // of many branches would be checked against all of them.
  if (!work.take(1)) return true;
  // What a reference points at holds too (converted, it is all the schema is: checking both is safe).
  if (typeof schema.$ref === "string" && !memberMeets(value, work.resolve(schema.$ref), depth + 1, work))
    return false;
  const types = schema.type === undefined ? [] : readTypes(schema);
  const nullable = schema.nullable === true && value === null;
  if (types.length > 0 && !nullable && !types.some((type) => hasType(value, type))) return false;
  if ("const" in schema && !work.same(value, schema.const)) return false;
  if (Array.isArray(schema.enum) && !schema.enum.some((allowed) => work.same(value, allowed))) return false;
  if (
    Array.isArray(schema.allOf) &&
    !schema.allOf.every((branch) => memberMeets(value, branch, depth + 1, work))
  )
    return false;
  for (const keyword of ["anyOf", "oneOf"]) {
    const branches = schema[keyword];
    if (Array.isArray(branches) && !branches.some((branch) => memberMeets(value, branch, depth + 1, work)))
      return false;
  }
  return meets(value, schema, depth + 1, work);
}

function inRange(count: number, minimum: unknown, maximum: unknown): boolean {
  return (
    !(typeof minimum === "number" && count < minimum) && !(typeof maximum === "number" && count > maximum)
  );
}

/**
 * Whether two JSON values are equal (object members in any order); `visits`, when given, counts
 * the values and member names looked at.
 */
export function sameValue(first: unknown, second: unknown, visits?: { count: number }): boolean {
  if (visits !== undefined) visits.count++;
  if (first === second) return true;
  if (Array.isArray(first) && Array.isArray(second))
    return (
      first.length === second.length && first.every((item, index) => sameValue(item, second[index], visits))
    );
  if (!isRecord(first) || !isRecord(second) || Array.isArray(first) || Array.isArray(second)) return false;
  const names = Object.keys(first);
  const otherNames = Object.keys(second);
  if (visits !== undefined) visits.count += names.length + otherNames.length;
  return (
    names.length === otherNames.length &&
    names.every((name) => Object.hasOwn(second, name) && sameValue(first[name], second[name], visits))
  );
}

/** A matcher of `pattern`, `null` where the grammar cannot write it, and the work reading it took. */
function readMatcher(pattern: string): { matcher: PatternMatcher | null; work: number } {
  if (pattern.length > maxPatternCharacters) return { matcher: null, work: 0 };
  const reading = pattern.length * readingWorkPerCharacter;
  const branches = parseRegexPattern(pattern);
  if (branches === undefined) return { matcher: null, work: reading };
  const tree = wholeStringTree(branches);
  if (tree === undefined) return { matcher: () => ({ matched: false, work: 0 }), work: reading };
  const built = createPatternMatcher(tree);
  return { matcher: built.match ?? null, work: reading + built.work };
}
