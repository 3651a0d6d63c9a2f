import type { GbnfJsonSchema } from "node-llama-cpp";
import { AppError } from "../../errors/app-error.ts";
import { cutText, cutTextKeepingEnd } from "../../errors/cut-text.ts";
import { shownValue } from "../../errors/shown-value.ts";
import { checkKeywords, describe } from "./check-schema-keywords.ts";
import { ConstantChecks, constantMeetsKeywords } from "./constant-meets-keywords.ts";
import { convertConstant } from "./convert-schema-constant.ts";
import { convertTypedSchema } from "./convert-typed-schema.ts";
import { mergeAllOf, mergeAnyOfBranch } from "./merge-all-of-branches.ts";
import { ownGrammarDefinition, ownGrammarText } from "./patch-grammar-definitions.ts";
import { copiedKeywords, pick, siblingKeywords } from "./pick-schema-keywords.ts";
import { hasType, isRecord, readTypes } from "./read-schema-types.ts";
import { resolveLocalReference } from "./resolve-json-pointer.ts";
import { anyValue, type PropertyCounts, type SchemaConversion } from "./schema-conversion.ts";
import { ConversionBudget, type SharedBudget } from "./schema-conversion-budget.ts";
import { SchemaDefinitionNames } from "./schema-definition-names.ts";
import { FiniteValues } from "./schema-finite-values.ts";
import { child, type Position } from "./schema-position.ts";

/**
 * The conversion levels (a property, an item, an alternative, a `$ref` followed) a local model's
 * grammar follows; deeper is refused for it (the grammar generator stops at 512 nesting levels,
 * and such a schema was let through as "any JSON value": its output met none of its keywords).
 * Checks for an upstream model stop there instead.
 */
export const MAX_SCHEMA_DEPTH = 64;

/**
 * One conversion of a client's schema (see convert-json-schema-to-gbnf.ts, whose module comment
 * says what it does): the `$defs` it writes, the references it follows, its budget and refusals.
 */
export class SchemaConverter implements SchemaConversion {
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
    this.budget = new ConversionBudget({
      grammarLimits,
      shared,
      refuse: (at, problem) => this.refuse(at, problem),
    });
    this.#constantChecks = new ConstantChecks(
      (reference) => this.#resolve(reference),
      grammarLimits,
      this.budget,
    );
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
    if (at.depth > MAX_SCHEMA_DEPTH) {
      if (this.grammarLimits)
        this.refuse(
          at,
          `the schema nests deeper than ${MAX_SCHEMA_DEPTH} levels (each property, item, alternative and $ref followed is one), more than a local model's grammar follows.`,
        );
      return anyValue;
    }
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
        // Each comparison counts what it looks at (an object's members), as the constant's other checks do.
        if (!schema.enum.some((value) => this.#constantChecks.same(value, schema.const)))
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
    counts?: PropertyCounts,
  ): void {
    this.#finiteValues.note(properties, required, at, counts);
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
        `'$ref' ${shownValue(JSON.stringify(reference))} does not resolve: it must be a JSON pointer to a schema within this schema ('#', '#/$defs/NAME', '#/properties/NAME', ...).`,
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
