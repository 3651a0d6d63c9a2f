import type { GbnfJsonSchema } from "node-llama-cpp";
import { AppError } from "../../errors/app-error.ts";
import { cutText, cutTextKeepingEnd } from "../../errors/cut-text.ts";
import { checkGrammarStacks } from "./check-grammar-stacks.ts";
import { checkKeywords, describe } from "./check-schema-keywords.ts";
import { ConstantChecks, constantMeetsKeywords, sameValue } from "./constant-meets-keywords.ts";
import { convertConstant } from "./convert-schema-constant.ts";
import { convertTypedSchema } from "./convert-typed-schema.ts";
import { mergeAllOf, mergeAnyOfBranch } from "./merge-all-of-branches.ts";
import { ownGrammarDefinition, ownGrammarText } from "./patch-grammar-definitions.ts";
import { copiedKeywords, pick, siblingKeywords } from "./pick-schema-keywords.ts";
import { hasType, isRecord, readTypes } from "./read-schema-types.ts";
import { resolveLocalReference } from "./resolve-json-pointer.ts";
import { anyValue, type SchemaConversion } from "./schema-conversion.ts";
import { ConversionBudget, type SharedBudget } from "./schema-conversion-budget.ts";
import { SchemaDefinitionNames } from "./schema-definition-names.ts";
import { FiniteValues } from "./schema-finite-values.ts";
import { child, type Position } from "./schema-position.ts";

/**
 * Converts a client's JSON Schema to the subset node-llama-cpp turns into a grammar
 * (`GbnfJsonSchema`), so that every valid schema a client sends works and every output the grammar
 * allows still validates against the client's schema wherever the subset can say so.
 *
 * A schema that is clearly invalid is refused with 400 `invalid_value` whose `param` is
 * `options.param` and whose message names the place (a JSON pointer) and the problem, as OpenAI
 * refuses it, instead of being taken for the empty schema: a schema that is not an object or a
 * boolean; a `type` that is not one of the seven type names (or a list of them); `required` that is
 * not an array of strings; `properties`, `$defs` or `definitions` that are not objects; `enum`,
 * `anyOf`, `oneOf` or `allOf` that are not non-empty arrays, `prefixItems` that is not an array;
 * `items` or `additionalProperties` that are not schemas; a `$ref` that does not resolve within the
 * schema. Only the schemas the conversion reaches are checked (not unused `$defs`, nor what sits
 * under dropped keywords such as `not`).
 *
 * The subset has no "any value", no `anyOf`/`allOf`, no `pattern`, no numeric ranges, no `uuid`
 * format, no `nullable`, and an object emits every declared property, in order. So:
 * - `{}`, `true` and schemas without a type become "any JSON value" (lengths imply a string,
 *   `properties`, `required` or property counts an object, `items` or item counts an array);
 *   `false` becomes `null` (it cannot say "nothing").
 * - `allOf` is merged into one schema, each keyword as all branches must hold (types, constants
 *   and ranges intersected, required names gathered, a property or item several declare an
 *   `allOf` of their schemas, names one branch does not declare held to its
 *   `additionalProperties`; see intersect-schema-keywords.ts), a `$ref` branch as the schema it
 *   points at, unless that is being converted (a cycle: it stays a reference).
 * - `anyOf` and `oneOf` become `oneOf`, each branch merged as `allOf` is with the keywords beside
 *   it (`anyOf` beside `oneOf`: both hold). A branch that no value meets beside them (no type in
 *   common, no constant in common, a minimum above a maximum, `false`, ...) is left out; the
 *   schema is refused only when every branch is. Whether `oneOf` matches only one is not enforced.
 *   A `$ref` branch is merged as the schema it points at, except one that leads back into a
 *   schema being converted (a cycle): it stays a reference, which the keywords beside it do not
 *   narrow.
 *   `type: [a, b]` and `nullable` become a `oneOf` of each type.
 * - `$ref` to any JSON pointer within the schema (`#`, `#/$defs/X`, `#/definitions/X`,
 *   `#/properties/a`) becomes a `$defs` reference (keywords beside it are dropped); other
 *   references (URLs, anchors) are refused.
 * - Objects with `properties` emit exactly those (optional ones too, which is valid; no others,
 *   which is a valid subset even where `additionalProperties` allows more), so
 *   `{"type": "object", "properties": {}}` is `{}`. Objects without `properties` are maps: any
 *   keys, values per `additionalProperties` (any value by default, as JSON Schema says). Required
 *   properties that are not declared are added as `additionalProperties`' schema, or as "any
 *   JSON value" where it gives none. A tuple (`prefixItems`) is emitted whole, up to `maxItems`.
 * - For a grammar, what has no finite value (`{"$ref": "#"}` in the root's `properties`) is left
 *   out where it is an optional property or one of several alternatives, and refused where it is
 *   required or the only alternative (see schema-finite-values.ts): the model could write it until
 *   the context is full.
 * - Refused too, as no value meets them: a minimum above its maximum (`minLength` over
 *   `maxLength`, and the like for items, properties and numbers; an integer range with no
 *   integer in it), a `const` that is not of the `type` beside it or does not meet the other keywords
 *   there, an `enum` none of whose values does, `allOf` branches with nothing in common, and a
 *   required property that `properties` does not declare beside `additionalProperties: false`.
 *   Refused as invalid: a length or count that is not a whole number, 0 or more. Refused for a
 *   grammar only: lengths or counts above 1000, which llama.cpp's grammar parser does not take,
 *   and lengths beside a `format` it enforces that leave out some of the lengths the format's
 *   grammar writes (`date` is 10 characters, `time` 9, 13, 14 or 18, `date-time` 20, 24, 25 or
 *   29), as it writes the format whole. `enum` values that do not meet the `type` and other
 *   keywords beside them are dropped.
 * - Enforced: `type`, `properties`, `required` (as every property is emitted), `additionalProperties`
 *   of maps, `items`, `prefixItems`, `minItems`/`maxItems`, `minLength`/`maxLength`,
 *   `minProperties`/`maxProperties` of maps, `enum`, `const`, `format` `date-time`, `date`,
 *   `time` and `uuid`, an integer's `minimum`/`maximum`/`exclusiveMinimum`/`exclusiveMaximum`
 *   (`uuid` and ranges as `$defs` of grammars of our own: see patch-grammar-definitions.ts), and
 *   constants meet the keywords beside them (see constant-meets-keywords.ts). A string's
 *   `pattern` is such a grammar too, where one can be written (see pattern-grammar.ts).
 * - Other `pattern`s, other `format`s, a fractional number's `minimum`/`maximum`, `multipleOf` (`const`/`enum`
 *   values are checked against both), `uniqueItems`, `not`,
 *   `if`/`then`, `dependentSchemas` and the like are dropped: the output may not meet them.
 * - `const` and `enum` of objects or arrays become exact object and array schemas.
 *
 * The work is bounded whatever the schema (see schema-conversion-budget.ts): what the conversion writes out
 * (properties, `enum` values, the members of constants), the steps it takes (an `anyOf` branch
 * repeats its siblings, so a schema of a few hundred bytes could take exponentially many) and,
 * for a grammar, the characters it writes (names, constants, descriptions). For a grammar, the
 * converted schema is refused too where llama.cpp would keep more than 2000 alternatives open at
 * once, or where a `$ref` leads back to itself with nothing in between (see check-grammar-stacks.ts).
 */
export function convertJsonSchemaToGbnf(
  schema: unknown,
  options: {
    param: string;
    /**
     * Whether to refuse what is valid JSON Schema but beyond what a llama.cpp grammar can
     * enforce: counts above 1000 and references that are not JSON pointers within the schema (a
     * URL, an anchor). Default `true`; `false` checks validity alone, as for a schema that goes
     * to an upstream server, which enforces it its own way.
     */
    grammarLimits?: boolean;
    /** Spent too, with other conversions (a request's tools, see createToolsBudget). */
    shared?: SharedBudget;
  },
): GbnfJsonSchema {
  const converter = new SchemaConverter(schema, options.param, options.grammarLimits ?? true, options.shared);
  const converted = converter.convert(schema, { depth: 0, pointer: () => "#" });
  const defs = converter.convertedDefinitions();
  if (converter.grammarLimits) converter.keepFinite(converted, defs);
  const result = withDefinitions(converted, defs);
  if (converter.grammarLimits) checkGrammarStacks(result, options.param);
  return result;
}

/** `$defs` sit on the root; a root that is not an object, array or oneOf is wrapped in a oneOf. */
function withDefinitions(converted: GbnfJsonSchema, defs: Record<string, GbnfJsonSchema>): GbnfJsonSchema {
  if (Object.keys(defs).length === 0) return converted;
  if (
    "oneOf" in converted ||
    ("type" in converted && (converted.type === "object" || converted.type === "array"))
  ) {
    return { ...converted, $defs: defs } as GbnfJsonSchema;
  }
  return { oneOf: [converted], $defs: defs };
}

/** Deeper schemas become "any JSON value": the grammar generator stops at 512 nesting levels. */
const maxDepth = 64;

class SchemaConverter implements SchemaConversion {
  readonly #root: unknown;
  readonly #param: string;
  readonly #converted = new Map<string, GbnfJsonSchema>();
  readonly #inProgress = new Set<string>();
  /** The schemas of `#inProgress`, which an `allOf` must not merge (see mergeAllOf). */
  readonly #targetsInProgress = new Set<unknown>();
  readonly #definitionNames = new SchemaDefinitionNames();
  readonly #finiteValues = new FiniteValues();
  readonly #constantChecks: ConstantChecks;
  /** The refusals of a schema that no value meets (see refuseNoValue), with where and why. */
  readonly #noValueProblems = new WeakMap<object, string>();
  /** What each `$ref` string resolved to: a pointer is walked once, however often it is met. */
  readonly #references = new Map<string, unknown>();
  /** The `$defs` name of each grammar the conversion writes itself, by what names it (see defineGrammar). */
  readonly #ownGrammars = new Map<string, string>();
  /** Where in the client's schema an `anyOf` or `oneOf` list that a merge moved sits (see noteAlternatives). */
  readonly #alternativesPlaces = new WeakMap<unknown[], Position>();

  readonly grammarLimits: boolean;
  readonly budget: ConversionBudget;

  constructor(root: unknown, param: string, grammarLimits: boolean, shared: SharedBudget | undefined) {
    this.#root = root;
    this.#param = param;
    this.grammarLimits = grammarLimits;
    this.#constantChecks = new ConstantChecks((reference) => this.#resolve(reference), grammarLimits);
    this.budget = new ConversionBudget({
      grammarLimits,
      shared,
      refuse: (at, problem) => this.refuse(at, problem),
    });
  }

  convertedDefinitions(): Record<string, GbnfJsonSchema> {
    return Object.fromEntries(this.#converted);
  }

  /** Leaves out the optional properties that have no finite value, or refuses the schema (see FiniteValues). */
  keepFinite(converted: GbnfJsonSchema, defs: Record<string, GbnfJsonSchema>): void {
    this.#finiteValues.prune(converted, defs, (at, problem) => this.refuse(at, problem));
  }

  convert(schema: unknown, at: Position): GbnfJsonSchema {
    if (schema === false) return { type: "null" };
    if (schema === true) return anyValue;
    if (!isRecord(schema))
      this.refuse(at, `a schema must be an object or a boolean, not ${describe(schema)}.`);
    this.budget.spend(at, "steps", 1);
    checkKeywords(this, schema, at);
    if (at.depth > maxDepth) return anyValue;
    const description = typeof schema.description === "string" ? { description: schema.description } : {};
    if (description.description !== undefined) this.budget.spendCharacters(at, description.description);

    if (typeof schema.$ref === "string")
      return { ...this.#convertReference(schema.$ref, at), ...description };
    if (Array.isArray(schema.allOf)) {
      const inlined = new Set<unknown>();
      return this.#convertMerged(mergeAllOf(this, schema, at, inlined), inlined, at);
    }
    const keyword = Array.isArray(schema.anyOf) ? "anyOf" : Array.isArray(schema.oneOf) ? "oneOf" : undefined;
    if (keyword !== undefined) return oneOf(this.#convertAlternatives(schema, keyword, at), description);
    // Beside a `type`, only the constants of that type can be met (`nullable`: null too); beside
    // lengths, counts, a format, required names, only those that meet them (see constant-meets-keywords.ts).
    const declaredTypes =
      schema.type === undefined
        ? undefined
        : [...readTypes(schema), ...(schema.nullable === true ? ["null"] : [])];
    if ("const" in schema) {
      if (declaredTypes !== undefined && !declaredTypes.some((type) => hasType(schema.const, type)))
        this.refuseNoValue(
          at,
          `'const' is not of the 'type' (${declaredTypes.join(", ")}) beside it, so no value can match.`,
        );
      if (Array.isArray(schema.enum)) {
        this.budget.spend(at, "steps", schema.enum.length);
        if (!schema.enum.some((value) => sameValue(value, schema.const)))
          this.refuseNoValue(at, "'const' is not one of the 'enum' values beside it, so no value can match.");
      }
      if (!constantMeetsKeywords(schema.const, schema, this.#constantChecks))
        this.refuseNoValue(
          at,
          "'const' does not meet the keywords beside it (lengths, counts, bounds, 'multipleOf', 'format', 'pattern', 'required', ...), so no value can match.",
        );
      return { ...convertConstant(this, schema.const, at), ...description };
    }
    if (Array.isArray(schema.enum)) {
      this.budget.spend(at, "entries", schema.enum.length);
      const typed =
        declaredTypes === undefined
          ? schema.enum
          : schema.enum.filter((value) => declaredTypes.some((type) => hasType(value, type)));
      if (typed.length === 0)
        this.refuseNoValue(
          at,
          `no value of 'enum' is of the 'type' (${declaredTypes?.join(", ")}) beside it, so no value can match.`,
        );
      const values = typed.filter((value) => constantMeetsKeywords(value, schema, this.#constantChecks));
      if (values.length === 0)
        this.refuseNoValue(
          at,
          "no value of 'enum' meets the keywords beside it (lengths, counts, bounds, 'multipleOf', 'format', 'pattern', 'required', ...), so no value can match.",
        );
      return oneOf(
        values.map((value) => convertConstant(this, value, at)),
        description,
      );
    }
    if (schema.nullable === true) {
      const { nullable: _nullable, ...rest } = pick(schema, copiedKeywords);
      return oneOf([this.convert(rest, { ...at, depth: at.depth + 1 }), { type: "null" }], description);
    }

    const types = readTypes(schema);
    if (types.length === 0) return { ...anyValue, ...description };
    // Each type beyond the first is a branch the later checks walk, as an anyOf branch is: seven
    // types at each of 60 levels, in 128 tools, took a second at one step a level.
    this.budget.spend(at, "steps", types.length - 1);
    return oneOf(
      types.map((type) => convertTypedSchema(this, schema, type, at)),
      description,
    );
  }

  /**
   * The branches of `anyOf` (or `oneOf`), each merged with the keywords beside it (`oneOf` too,
   * beside `anyOf`), as both must hold. A branch that no value meets beside them is left out;
   * the schema is refused when every one is.
   */
  #convertAlternatives(
    schema: Record<string, unknown>,
    keyword: "anyOf" | "oneOf",
    at: Position,
  ): GbnfJsonSchema[] {
    // Only the keywords the conversion reads are copied: a branch is made once for every time
    // its schema is converted, and the client's objects may hold any number of other keys.
    const siblings = pick(schema, keyword === "anyOf" ? [...siblingKeywords, "oneOf"] : siblingKeywords);
    const alone = Object.keys(siblings).length === 0;
    const alternatives = schema[keyword] as unknown[];
    this.budget.reserve(at, "steps", alternatives.length);
    // A `oneOf` beside `anyOf` is converted within each `anyOf` branch: named where it sits.
    if (keyword === "anyOf" && Array.isArray(schema.oneOf))
      this.noteAlternatives(schema.oneOf, child(at, "oneOf"));
    const listPlace = this.#alternativesPlaces.get(alternatives);
    const branches: GbnfJsonSchema[] = [];
    const problems: string[] = [];
    for (const [index, branch] of alternatives.entries()) {
      const place =
        listPlace === undefined
          ? child(at, keyword, String(index))
          : { depth: at.depth + 1, pointer: () => `${listPlace.pointer()}/${index}` };
      try {
        // Alone, a branch is converted as it is (a `$ref` stays one).
        if (alone && branch !== false) {
          branches.push(this.convert(branch, place));
          continue;
        }
        const inlined = new Set<unknown>();
        const merged = mergeAnyOfBranch(this, siblings, branch, place, inlined);
        if (typeof merged === "string") problems.push(`${index}: ${merged}`);
        else branches.push(this.#convertMerged(merged, inlined, place));
      } catch (error) {
        const problem = this.#noValueProblems.get(error as object);
        if (problem === undefined) throw error;
        problems.push(`${index}: ${problem}`);
      }
    }
    if (branches.length === 0) {
      const beside = alone ? "" : " beside the keywords next to it";
      this.refuseNoValue(
        at,
        `no branch of '${keyword}' can match${beside} (${cutText(problems.join("; "), 300)}), so no value can match.`,
      );
    }
    return branches;
  }

  /** Converts what `allOf` or an `anyOf` branch merged, the schemas merged in counted as being converted (see mergeAllOf). */
  #convertMerged(merged: Record<string, unknown>, inlined: Set<unknown>, at: Position): GbnfJsonSchema {
    const added = [...inlined].filter((target) => !this.#targetsInProgress.has(target));
    for (const target of added) this.#targetsInProgress.add(target);
    try {
      return this.convert(merged, at);
    } finally {
      for (const target of added) this.#targetsInProgress.delete(target);
    }
  }

  noteAlternatives(list: unknown[], at: Position): void {
    if (!this.#alternativesPlaces.has(list)) this.#alternativesPlaces.set(list, at);
  }

  resolveMergeable(reference: string, at: Position): Record<string, unknown> | boolean | undefined {
    const target = this.#resolve(reference);
    if (typeof target === "boolean") return target;
    if (!isRecord(target) || this.#targetsInProgress.has(target)) return undefined;
    const next = { depth: at.depth + 1, pointer: () => reference };
    this.budget.spend(next, "steps", 1);
    checkKeywords(this, target, next);
    return target;
  }

  noteProperties(
    properties: Record<string, GbnfJsonSchema>,
    required: readonly string[],
    at: Position,
  ): void {
    this.#finiteValues.note(properties, required, at);
  }

  #resolve(reference: string): unknown {
    if (!this.#references.has(reference))
      this.#references.set(reference, resolveLocalReference(this.#root, reference));
    return this.#references.get(reference);
  }

  #convertReference(reference: string, at: Position): GbnfJsonSchema {
    const target = this.#resolve(reference);
    // A reference to another document (or an anchor) is valid JSON Schema that only a grammar
    // cannot follow; one to a place in this schema that is not there is no schema at all.
    if (target === undefined && !this.grammarLimits && !reference.startsWith("#/") && reference !== "#")
      return anyValue;
    if (target === undefined) {
      this.refuse(
        at,
        `'$ref' ${JSON.stringify(reference)} does not resolve: it must be a JSON pointer to a schema within this schema ('#', '#/$defs/NAME', '#/properties/NAME', ...).`,
      );
    }
    const next = { depth: at.depth + 1, pointer: () => reference };
    if (!isRecord(target)) return this.convert(target, next);
    const name = this.#definitionNames.name(target, reference);
    if (!this.#converted.has(name) && !this.#inProgress.has(name)) {
      this.#inProgress.add(name);
      this.#targetsInProgress.add(target);
      // Refused within an `anyOf` branch that is then left out, the conversion goes on.
      try {
        this.#converted.set(name, this.convert(target, next));
      } finally {
        this.#inProgress.delete(name);
        this.#targetsInProgress.delete(target);
      }
    }
    return { $ref: `#/$defs/${name}` } as GbnfJsonSchema;
  }

  defineGrammar(name: string, loose: GbnfJsonSchema, spec: string, at: Position): GbnfJsonSchema {
    let defined = this.#ownGrammars.get(spec);
    if (defined === undefined) {
      // Its text is part of the grammar llama.cpp parses, as names and constants are.
      this.budget.spendCharacters(at, ownGrammarText(spec) ?? spec);
      const definition = ownGrammarDefinition(loose, spec);
      defined = this.#definitionNames.name(definition as Record<string, unknown>, `#/$defs/${name}`);
      this.#converted.set(defined, definition);
      this.#ownGrammars.set(spec, defined);
    }
    return { $ref: `#/$defs/${defined}` } as GbnfJsonSchema;
  }

  refuseNoValue(at: Position, problem: string): never {
    try {
      this.refuse(at, problem);
    } catch (error) {
      this.#noValueProblems.set(error as object, `at '${cut(at.pointer())}': ${problem}`);
      throw error;
    }
  }

  refuse(at: Position, problem: string): never {
    throw new AppError(
      "invalid_value",
      `Invalid JSON Schema in '${this.#param}' at '${cut(at.pointer())}': ${problem}`,
      { param: this.#param },
    );
  }
}

function oneOf(branches: GbnfJsonSchema[], description: { description?: string }): GbnfJsonSchema {
  if (branches.length === 1 && branches[0] !== undefined)
    return { ...branches[0], ...description } as GbnfJsonSchema;
  if (branches.length === 0) return { type: "null", ...description };
  return { oneOf: branches, ...description };
}

/** A pointer for a message, its middle cut when a long name makes it long. */
function cut(pointer: string): string {
  return pointer.length > 200 ? `${cutText(pointer, 100)}...${cutTextKeepingEnd(pointer, 100)}` : pointer;
}
