import type { GbnfJsonSchema } from "node-llama-cpp";
import { AppError } from "../../errors/app-error.ts";
import { cutText, cutTextKeepingEnd } from "../../errors/cut-text.ts";

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
 * The subset has no "any value", no `anyOf`/`allOf`, no `pattern`, no numeric ranges, no
 * `nullable`, and an object emits every declared property, in order. So:
 * - `{}`, `true` and schemas without a type become "any JSON value"; `false` becomes `null` (it
 *   cannot say "nothing").
 * - `anyOf` and `oneOf` become `oneOf` (siblings merged into each branch); `allOf` is merged into one
 *   schema; `type: [a, b]` and `nullable` become a `oneOf` of each type.
 * - `$ref` to any JSON pointer within the schema (`#`, `#/$defs/X`, `#/definitions/X`,
 *   `#/properties/a`) becomes a `$defs` reference; other references (URLs, anchors) are refused.
 * - Objects with `properties` emit exactly those (optional ones too, which is valid; no others,
 *   which is a valid subset even where `additionalProperties` allows more), so
 *   `{"type": "object", "properties": {}}` is `{}`. Objects without `properties` are maps: any
 *   keys, values per `additionalProperties` (any value by default, as JSON Schema says). Required
 *   properties that are not declared are added as "any JSON value".
 * - Refused too: a minimum above its maximum (`minLength` over `maxLength`, and the like for
 *   items and properties), a `const` (or every `enum` value) of another type than the `type` beside
 *   it, `allOf` branches with no type in common, and a required property that `properties` does not
 *   declare beside `additionalProperties: false`, which no value meets; a length or count that is
 *   not a whole number, 0 or more; and lengths or counts above 1000, which llama.cpp's grammar
 *   parser does not take. `enum` values of another type than the `type` beside them are dropped.
 * - Enforced: `type`, `properties`, `required` (as every property is emitted), `additionalProperties`
 *   of maps, `items`, `prefixItems`, `minItems`/`maxItems`, `minLength`/`maxLength`,
 *   `minProperties`/`maxProperties` of maps, `enum`, `const`, `format` `date-time`, `date` and `time`.
 * - `pattern`, other `format`s, `minimum`/`maximum`, `multipleOf`, `uniqueItems`, `not`,
 *   `if`/`then`, `dependentSchemas` and the like are dropped: the output may not meet them.
 * - `const` and `enum` of objects or arrays become exact object and array schemas.
 *
 * The work is bounded whatever the schema (see {@link Budget}): what the conversion writes out
 * (properties, `enum` values, the members of constants), the steps it takes (an `anyOf` branch
 * repeats its siblings, so a schema of a few hundred bytes could take exponentially many) and,
 * for a grammar, the characters it writes (names, constants, descriptions).
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
    /** Spent too, with other conversions (a request's tools, see {@link createToolsBudget}). */
    shared?: SharedBudget;
  },
): GbnfJsonSchema {
  const converter = new SchemaConverter(schema, options.param, options.grammarLimits ?? true, options.shared);
  const converted = converter.convert(schema, { depth: 0, pointer: () => "#" });
  const defs = converter.convertedDefinitions();
  if (Object.keys(defs).length === 0) return converted;
  // `$defs` sit on the root; a root that is not an object, array or oneOf is wrapped in a oneOf.
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
const rootDefinitionName = "tollgate_root";
/**
 * The largest length or count enforced. llama.cpp's grammar parser refuses a repetition whose
 * count times the symbols it repeats passes 2000 (`MAX_REPETITION_THRESHOLD`): a string's
 * character repeats two, so `maxLength` 1001 was refused with a parse error (an array's items
 * went to 1001).
 */
const maxGrammarRepetitions = 1000;
/**
 * The most properties and `enum` values a schema may declare in all: OpenAI's structured outputs
 * take 5000 properties. Building a local grammar is synchronous and grows with them (30,000
 * properties held the event loop 2.3 s, 300,000 for half a minute), so a local model takes fewer.
 */
export const maxSchemaEntries = 5000;
const maxGrammarEntries = 1000;
/**
 * The most steps (schemas converted, plus `required` names, `allOf` branches and merged
 * properties read) a conversion may take: an `anyOf` branch is converted with its siblings, so a
 * schema of a kilobyte that nests them took seconds (and exponentially longer with every level)
 * without declaring many properties. Real schemas take a few per property.
 */
const maxSchemaSteps = 30_000;
const maxGrammarSteps = 6000;
/**
 * The most characters of property names, constants and descriptions a conversion for a grammar
 * may write out, repetitions included: the grammar, the key it is cached by and a tool's prompt
 * (rendered and tokenized whole: 900,000 characters of descriptions held the event loop 0.6 s)
 * spell each of them out. The edge bounds what a schema declares (120,000 characters of names
 * and constants); this bounds descriptions, and what repeating all that in branches makes of it.
 */
const maxGrammarCharacters = 500_000;
/**
 * What the schemas of one request's tools may spend together (see {@link createToolsBudget}): four
 * schemas' worth. Each schema within its own budget, 128 tools of 1000 properties each held the
 * event loop 0.9 s before the request was refused for its length.
 */
const toolsBudgetSchemas = 4;

/** A `$defs` name taken from a reference longer than this is cut: it only has to be unique. */
const maxDefinitionNameLength = 64;

const anyValue: GbnfJsonSchema = {
  oneOf: [
    { type: ["string", "number", "boolean", "null"] },
    { type: "array" },
    { type: "object", additionalProperties: true },
  ],
};

const typeNames = new Set(["string", "number", "integer", "boolean", "null", "object", "array"]);
const supportedStringFormats = new Set(["date-time", "time", "date"]);

/** The keywords the conversion reads: all that an `anyOf` branch takes from its siblings and `allOf` merges. */
const convertedKeywords = [
  "type",
  "properties",
  "required",
  "additionalProperties",
  "items",
  "prefixItems",
  "additionalItems",
  "enum",
  "const",
  "nullable",
  "format",
  "pattern",
  "minLength",
  "maxLength",
  "minItems",
  "maxItems",
  "minProperties",
  "maxProperties",
  "minimum",
  "maximum",
  "multipleOf",
  "$ref",
  "allOf",
  "anyOf",
  "oneOf",
];
/** What a schema keeps when it is copied (checked, `description` written) but does not hand to `anyOf` branches. */
const ownKeywords = ["description", "$defs", "definitions"];
const siblingKeywords = convertedKeywords.filter((keyword) => keyword !== "anyOf" && keyword !== "oneOf");
const copiedKeywords = [...convertedKeywords, ...ownKeywords];

/**
 * Where the converter is in the client's schema: nesting for the depth bound, a JSON pointer for
 * messages (built only for one: a property name can be long, and a place can be met many times).
 */
interface Position {
  depth: number;
  pointer(): string;
}

/** What a conversion may spend, see {@link maxSchemaEntries}, {@link maxSchemaSteps}, {@link maxGrammarCharacters}. */
interface Budget {
  entries: number;
  steps: number;
  characters: number;
}

/** What several conversions (a request's tools) spend together, and may. */
export interface SharedBudget {
  readonly limits: Budget;
  readonly spent: Budget;
}

/** The budget a request's tool schemas share, for grammars: {@link toolsBudgetSchemas} schemas' worth. */
export function createToolsBudget(): SharedBudget {
  return {
    limits: {
      entries: maxGrammarEntries * toolsBudgetSchemas,
      steps: maxGrammarSteps * toolsBudgetSchemas,
      characters: maxGrammarCharacters * toolsBudgetSchemas,
    },
    spent: { entries: 0, steps: 0, characters: 0 },
  };
}

class SchemaConverter {
  readonly #root: unknown;
  readonly #param: string;
  readonly #converted = new Map<string, GbnfJsonSchema>();
  readonly #inProgress = new Set<string>();
  /** The `$defs` name of each referenced schema, by identity, so two pointers to it share one. */
  readonly #names = new Map<object, string>();

  /** The `$defs` names given so far. */
  readonly #taken = new Set<string>();
  /** Per wanted `$defs` name, the suffix to try next when it is taken (see #nameDefinition). */
  readonly #nextSuffix = new Map<string, number>();
  /** What each `$ref` string resolved to: a pointer is walked once, however often it is met. */
  readonly #references = new Map<string, unknown>();

  readonly #grammarLimits: boolean;
  readonly #limits: Budget;
  /** What the conversion has spent so far. */
  readonly #spent: Budget = { entries: 0, steps: 0, characters: 0 };
  readonly #shared: SharedBudget | undefined;

  constructor(root: unknown, param: string, grammarLimits: boolean, shared: SharedBudget | undefined) {
    this.#root = root;
    this.#param = param;
    this.#grammarLimits = grammarLimits;
    this.#shared = shared;
    this.#limits = grammarLimits
      ? { entries: maxGrammarEntries, steps: maxGrammarSteps, characters: maxGrammarCharacters }
      : { entries: maxSchemaEntries, steps: maxSchemaSteps, characters: Number.POSITIVE_INFINITY };
  }

  convertedDefinitions(): Record<string, GbnfJsonSchema> {
    return Object.fromEntries(this.#converted);
  }

  convert(schema: unknown, at: Position): GbnfJsonSchema {
    if (schema === false) return { type: "null" };
    if (schema === true) return anyValue;
    if (!isRecord(schema))
      this.#refuse(at, `a schema must be an object or a boolean, not ${describe(schema)}.`);
    this.#spend(at, "steps", 1);
    this.#checkKeywords(schema, at);
    if (at.depth > maxDepth) return anyValue;
    const description = typeof schema.description === "string" ? { description: schema.description } : {};
    if (description.description !== undefined) this.#spendCharacters(at, description.description);

    if (typeof schema.$ref === "string")
      return { ...this.#convertReference(schema.$ref, at), ...description };
    if (Array.isArray(schema.allOf)) return this.convert(this.#mergeAllOf(schema, at), at);
    const keyword = Array.isArray(schema.anyOf) ? "anyOf" : Array.isArray(schema.oneOf) ? "oneOf" : undefined;
    if (keyword !== undefined) {
      // Only the keywords the conversion reads are copied: a branch is made once for every time
      // its schema is converted, and the client's objects may hold any number of other keys.
      const siblings = pick(schema, siblingKeywords);
      const alternatives = schema[keyword] as unknown[];
      this.#reserve(at, "steps", alternatives.length);
      const branches = alternatives.map((branch, index) =>
        this.convert(
          isRecord(branch) ? { ...siblings, ...pick(branch, copiedKeywords) } : branch,
          child(at, keyword, String(index)),
        ),
      );
      return oneOf(branches, description);
    }
    // Beside a `type`, only the constants of that type can be met.
    const declaredTypes = schema.type === undefined ? undefined : readTypes(schema);
    if ("const" in schema) {
      if (declaredTypes !== undefined && !declaredTypes.some((type) => hasType(schema.const, type)))
        this.#refuse(
          at,
          `'const' is not of the 'type' (${declaredTypes.join(", ")}) beside it, so no value can match.`,
        );
      return { ...this.#convertConstant(schema.const, at), ...description };
    }
    if (Array.isArray(schema.enum)) {
      this.#spend(at, "entries", schema.enum.length);
      const values =
        declaredTypes === undefined
          ? schema.enum
          : schema.enum.filter((value) => declaredTypes.some((type) => hasType(value, type)));
      if (values.length === 0)
        this.#refuse(
          at,
          `no value of 'enum' is of the 'type' (${declaredTypes?.join(", ")}) beside it, so no value can match.`,
        );
      return oneOf(
        values.map((value) => this.#convertConstant(value, at)),
        description,
      );
    }
    if (schema.nullable === true) {
      const { nullable: _nullable, ...rest } = pick(schema, copiedKeywords);
      return oneOf([this.convert(rest, { ...at, depth: at.depth + 1 }), { type: "null" }], description);
    }

    const types = readTypes(schema);
    if (types.length === 0) return { ...anyValue, ...description };
    return oneOf(
      types.map((type) => this.#convertTyped(schema, type, at)),
      description,
    );
  }

  /** Refuses the keywords the conversion reads when they cannot mean anything (see the module comment). */
  #checkKeywords(schema: Record<string, unknown>, at: Position): void {
    const { type } = schema;
    if (type !== undefined) {
      const names = Array.isArray(type) ? type : [type];
      const unknown = names.find((name) => typeof name !== "string" || !typeNames.has(name));
      if (names.length === 0 || unknown !== undefined) {
        this.#refuse(
          at,
          `'type' ${names.length === 0 ? "is an empty array" : `has ${describe(unknown)}`}, which is not a JSON Schema type (${[...typeNames].join(", ")}).`,
        );
      }
      if (names.length > typeNames.size) {
        this.#refuse(at, "'type' names a type more than once: its names must be unique.");
      }
    }
    if (Array.isArray(schema.required)) this.#spend(at, "steps", schema.required.length);
    if (
      "required" in schema &&
      (!Array.isArray(schema.required) || !schema.required.every((name) => typeof name === "string"))
    ) {
      this.#refuse(
        at,
        `'required' must be an array of property names (strings), not ${describe(schema.required)}.`,
      );
    }
    for (const keyword of ["properties", "$defs", "definitions"]) {
      if (keyword in schema && !isRecord(schema[keyword])) {
        this.#refuse(
          at,
          `'${keyword}' must be an object of schemas by name, not ${describe(schema[keyword])}.`,
        );
      }
    }
    for (const keyword of ["enum", "anyOf", "oneOf", "allOf"]) {
      const value = schema[keyword];
      if (keyword in schema && (!Array.isArray(value) || value.length === 0)) {
        this.#refuse(at, `'${keyword}' must be a non-empty array, not ${describe(value)}.`);
      }
    }
    // `anyOf` and `oneOf` branches are checked as they are converted; `allOf` ones are merged.
    const allOf: unknown[] = Array.isArray(schema.allOf) ? schema.allOf : [];
    this.#spend(at, "steps", allOf.length);
    const notSchema = allOf.findIndex((branch) => !isSchema(branch));
    if (notSchema !== -1) {
      this.#refuse(
        child(at, "allOf", String(notSchema)),
        `a schema must be an object or a boolean, not ${describe(allOf[notSchema])}.`,
      );
    }
    if ("prefixItems" in schema && !Array.isArray(schema.prefixItems)) {
      this.#refuse(at, `'prefixItems' must be an array of schemas, not ${describe(schema.prefixItems)}.`);
    }
    if ("items" in schema && !isSchema(schema.items) && !Array.isArray(schema.items)) {
      this.#refuse(at, `'items' must be a schema (an object or a boolean), not ${describe(schema.items)}.`);
    }
    if ("additionalProperties" in schema && !isSchema(schema.additionalProperties)) {
      this.#refuse(
        at,
        `'additionalProperties' must be a schema (an object or a boolean), not ${describe(schema.additionalProperties)}.`,
      );
    }
    if ("$ref" in schema && typeof schema.$ref !== "string") {
      this.#refuse(at, `'$ref' must be a string, not ${describe(schema.$ref)}.`);
    }
  }

  #convertReference(reference: string, at: Position): GbnfJsonSchema {
    if (!this.#references.has(reference))
      this.#references.set(reference, resolveLocalReference(this.#root, reference));
    const target = this.#references.get(reference);
    // A reference to another document (or an anchor) is valid JSON Schema that only a grammar
    // cannot follow; one to a place in this schema that is not there is no schema at all.
    if (target === undefined && !this.#grammarLimits && !reference.startsWith("#/") && reference !== "#")
      return anyValue;
    if (target === undefined) {
      this.#refuse(
        at,
        `'$ref' ${JSON.stringify(reference)} does not resolve: it must be a JSON pointer to a schema within this schema ('#', '#/$defs/NAME', '#/properties/NAME', ...).`,
      );
    }
    const next = { depth: at.depth + 1, pointer: () => reference };
    if (!isRecord(target)) return this.convert(target, next);
    const name = this.#nameDefinition(target, reference);
    if (!this.#converted.has(name) && !this.#inProgress.has(name)) {
      this.#inProgress.add(name);
      this.#converted.set(name, this.convert(target, next));
      this.#inProgress.delete(name);
    }
    return { $ref: `#/$defs/${name}` } as GbnfJsonSchema;
  }

  /** The `$defs` name of a referenced schema: its pointer's last segment (cut), made unique. */
  #nameDefinition(target: Record<string, unknown>, reference: string): string {
    const known = this.#names.get(target);
    if (known !== undefined) return known;
    const wanted =
      reference === "#"
        ? rootDefinitionName
        : (decodePointerSegment(reference.slice(reference.lastIndexOf("/") + 1)) ?? "").slice(
            0,
            maxDefinitionNameLength,
          );
    let name = wanted;
    // Counted on from the last suffix this name was given: counting from 2 each time made k
    // schemas wanting one name cost k^2/2 look-ups (15,000 references in one tool: seconds).
    let suffix = this.#nextSuffix.get(wanted) ?? 2;
    while (this.#taken.has(name) || (name === rootDefinitionName && reference !== "#")) {
      name = `${wanted}_${suffix}`;
      suffix++;
    }
    this.#nextSuffix.set(wanted, suffix);
    this.#names.set(target, name);
    this.#taken.add(name);
    return name;
  }

  #convertTyped(schema: Record<string, unknown>, type: string, at: Position): GbnfJsonSchema {
    switch (type) {
      case "object":
        return this.#convertObject(schema, at);
      case "array":
        return this.#convertArray(schema, at);
      case "string": {
        if (typeof schema.format === "string" && supportedStringFormats.has(schema.format)) {
          return { type: "string", format: schema.format as "date-time" | "time" | "date" };
        }
        const minLength = this.#readBound(schema, "minLength", at);
        const maxLength = this.#readBound(schema, "maxLength", at);
        this.#checkRange(at, "minLength", minLength, "maxLength", maxLength);
        return {
          type: "string",
          ...(minLength === undefined ? {} : { minLength }),
          ...(maxLength === undefined ? {} : { maxLength }),
        };
      }
      case "number":
      case "integer":
      case "boolean":
      case "null":
        return { type };
      default:
        return anyValue;
    }
  }

  #convertObject(schema: Record<string, unknown>, at: Position): GbnfJsonSchema {
    const declared = isRecord(schema.properties) ? schema.properties : undefined;
    const required = Array.isArray(schema.required)
      ? schema.required.filter((name): name is string => typeof name === "string")
      : [];
    // Without a prototype: a property named `__proto__`, `constructor` or `toString` is a key
    // like any other (on `{}` the first set the prototype and the others were found inherited).
    const properties: Record<string, GbnfJsonSchema> = Object.create(null);
    const entries = Object.entries(declared ?? {});
    this.#spend(at, "entries", entries.length);
    for (const [name, property] of entries) {
      this.#spendCharacters(at, name);
      properties[name] = this.convert(property, child(at, "properties", name));
    }
    // A required property that is not declared is written too: it counts as one.
    for (const name of required) {
      if (Object.hasOwn(properties, name)) continue;
      if (declared !== undefined && schema.additionalProperties === false) {
        this.#refuse(
          at,
          `'required' names '${name}', which 'properties' does not declare while 'additionalProperties' is false, so no value can match.`,
        );
      }
      this.#spend(at, "entries", 1);
      this.#spendCharacters(at, name);
      properties[name] = anyValue;
    }
    // Declared properties (even none, `properties: {}`) are what the client wants: only those.
    if (declared !== undefined || Object.keys(properties).length > 0) return { type: "object", properties };

    // No `properties` at all: a map whose values follow `additionalProperties` (any value by default).
    const additional = schema.additionalProperties;
    if (additional === false) return { type: "object", properties: {} };
    const minProperties = this.#readBound(schema, "minProperties", at);
    const maxProperties = this.#readBound(schema, "maxProperties", at);
    this.#checkRange(at, "minProperties", minProperties, "maxProperties", maxProperties);
    return {
      type: "object",
      additionalProperties: isRecord(additional)
        ? this.convert(additional, child(at, "additionalProperties"))
        : true,
      ...(minProperties === undefined ? {} : { minProperties }),
      ...(maxProperties === undefined ? {} : { maxProperties }),
    };
  }

  #convertArray(schema: Record<string, unknown>, at: Position): GbnfJsonSchema {
    // Draft 2020-12 tuples use `prefixItems` (+ `items` for the rest); earlier drafts an `items` array.
    const tupleKeyword = Array.isArray(schema.prefixItems)
      ? "prefixItems"
      : Array.isArray(schema.items)
        ? "items"
        : undefined;
    const restKeyword = Array.isArray(schema.items) ? "additionalItems" : "items";
    const rest = schema[restKeyword];
    if (tupleKeyword !== undefined) this.#reserve(at, "steps", (schema[tupleKeyword] as unknown[]).length);
    const prefixItems =
      tupleKeyword === undefined
        ? undefined
        : (schema[tupleKeyword] as unknown[]).map((item, index) =>
            this.convert(item, child(at, tupleKeyword, String(index))),
          );
    const declaredMinItems = this.#readBound(schema, "minItems", at);
    const declaredMaxItems = this.#readBound(schema, "maxItems", at);
    this.#checkRange(at, "minItems", declaredMinItems, "maxItems", declaredMaxItems);
    const minItems = Math.max(declaredMinItems ?? 0, prefixItems?.length ?? 0);
    let maxItems = declaredMaxItems;
    if (rest === false && prefixItems !== undefined) maxItems = prefixItems.length;
    if (maxItems !== undefined) maxItems = Math.max(maxItems, minItems);
    return {
      type: "array",
      ...(prefixItems === undefined || prefixItems.length === 0 ? {} : { prefixItems }),
      ...(rest === undefined || rest === true || rest === false
        ? {}
        : { items: this.convert(rest, child(at, restKeyword)) }),
      ...(minItems === 0 ? {} : { minItems }),
      ...(maxItems === undefined ? {} : { maxItems }),
    };
  }

  /**
   * A count keyword (`minLength`, `maxItems`, ...), or `undefined` without one. Counts above
   * {@link maxGrammarRepetitions} are refused: llama.cpp's grammar parser rejects such repetitions,
   * so the schema could not be enforced.
   */
  #readBound(schema: Record<string, unknown>, keyword: string, at: Position): number | undefined {
    const count = readCount(schema[keyword]);
    if (count === undefined && schema[keyword] !== undefined) {
      this.#refuse(at, `'${keyword}' is ${describe(schema[keyword])}; it must be a whole number, 0 or more.`);
    }
    if (count !== undefined && count > maxGrammarRepetitions && this.#grammarLimits) {
      this.#refuse(
        at,
        `'${keyword}' is ${count}, above ${maxGrammarRepetitions}, the largest length or count the output grammar can enforce. Lower it to ${maxGrammarRepetitions} or less, or remove it.`,
      );
    }
    return count;
  }

  /** Refuses a lower bound above its upper bound: no value meets the schema, and the grammar would emit one that breaks it. */
  #checkRange(
    at: Position,
    minimumKeyword: string,
    minimum: number | undefined,
    maximumKeyword: string,
    maximum: number | undefined,
  ): void {
    if (minimum === undefined || maximum === undefined || minimum <= maximum) return;
    this.#refuse(
      at,
      `'${minimumKeyword}' (${minimum}) is greater than '${maximumKeyword}' (${maximum}), so no value can match. Make the minimum at most the maximum.`,
    );
  }

  /**
   * Merges `allOf` branches (and the schema's own keywords) into one schema, shallowly. Properties
   * and required names of several branches are gathered into one copy, each read counted as a step
   * (copying the growing whole for every branch took 19 s for 5000 branches of one property).
   */
  #mergeAllOf(schema: Record<string, unknown>, at: Position): Record<string, unknown> {
    const { allOf, ...merged } = pick(schema, copiedKeywords);
    const copied = new Set<string>();
    for (const branch of allOf as unknown[]) {
      if (!isRecord(branch)) continue;
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
          this.#spend(at, "steps", (copied.has(key) ? 0 : Object.keys(existing).length) + added.length);
          for (const [name, property] of added) properties[name] = property;
          merged[key] = properties;
          copied.add(key);
        } else if (key === "required" && Array.isArray(existing) && Array.isArray(value)) {
          const required: unknown[] = copied.has(key) ? existing : [...existing];
          this.#spend(at, "steps", (copied.has(key) ? 0 : existing.length) + value.length);
          for (const name of value) required.push(name);
          merged[key] = required;
          copied.add(key);
        } else if (key === "type" && existing !== undefined) {
          merged[key] = this.#intersectTypes(existing, value, at);
        } else if (!(key in merged)) {
          merged[key] = value;
        }
      }
    }
    return merged;
  }

  /** The types both `allOf` branches allow (an integer is a number); refused when there are none. */
  #intersectTypes(first: unknown, second: unknown, at: Position): string[] {
    const [left, right] = [readTypes({ type: first }), readTypes({ type: second })];
    const allows = (types: string[], type: string) =>
      types.includes(type) || (type === "integer" && types.includes("number"));
    const both = [...new Set([...left, ...right])].filter(
      (type) => allows(left, type) && allows(right, type),
    );
    if (both.length === 0)
      this.#refuse(
        at,
        `the 'allOf' branches have no 'type' in common (${left.join(", ")} and ${right.join(", ")}), so no value can match.`,
      );
    return both;
  }

  /** An exact schema for a constant: `const` for primitives, fixed shapes for objects and arrays. */
  #convertConstant(value: unknown, at: Position): GbnfJsonSchema {
    if (value === null || typeof value === "boolean") return { const: value };
    if (typeof value === "string") {
      this.#spendCharacters(at, value);
      return { const: value };
    }
    if (typeof value === "number") return Number.isFinite(value) ? { const: value } : { type: "null" };
    // Each item and member is a property or tuple item of the grammar: they count as entries.
    if (Array.isArray(value)) {
      if (value.length === 0) return { type: "array", maxItems: 0 };
      this.#spend(at, "entries", value.length);
      return {
        type: "array",
        prefixItems: value.map((item) => this.#convertConstant(item, at)),
        minItems: value.length,
        maxItems: value.length,
      };
    }
    if (isRecord(value)) {
      const entries = Object.entries(value);
      if (entries.length === 0) return { type: "object", properties: {} };
      this.#spend(at, "entries", entries.length);
      const properties: Record<string, GbnfJsonSchema> = Object.create(null);
      for (const [key, entry] of entries) {
        this.#spendCharacters(at, key);
        properties[key] = this.#convertConstant(entry, at);
      }
      return { type: "object", properties };
    }
    return { type: "null" };
  }

  #spendCharacters(at: Position, text: string): void {
    this.#spend(at, "characters", text.length);
  }

  /** Spends `amount` more of `kind`, refusing a schema that needs more than its limit (see {@link Budget}). */
  #spend(at: Position, kind: keyof Budget, amount: number): void {
    this.#reserve(at, kind, amount);
    this.#spent[kind] += amount;
    if (this.#shared !== undefined) this.#shared.spent[kind] += amount;
  }

  /** Refuses now a schema that is sure to need more than its limit of `kind` (`amount` more), before working on it. */
  #reserve(at: Position, kind: keyof Budget, amount: number): void {
    const limit = this.#limits[kind];
    if (this.#spent[kind] + amount > limit)
      this.#refuse(at, describeOverspending(kind, limit, this.#grammarLimits));
    const shared = this.#shared;
    if (shared !== undefined && shared.spent[kind] + amount > shared.limits[kind]) {
      this.#refuse(at, describeSharedOverspending(kind, shared.limits[kind]));
    }
  }

  #refuse(at: Position, problem: string): never {
    throw new AppError(
      "invalid_value",
      `Invalid JSON Schema in '${this.#param}' at '${cut(at.pointer())}': ${problem}`,
      { param: this.#param },
    );
  }
}

/** Why a schema that needs more than `limit` of `kind` is refused, and what to change. */
function describeOverspending(kind: keyof Budget, limit: number, grammarLimits: boolean): string {
  const local = grammarLimits ? " (what a local model's output grammar takes)" : "";
  switch (kind) {
    case "entries":
      return `the schema declares more than ${limit} properties and enum values in all${local}; undeclared required properties, the members of constants, and what anyOf or oneOf branches repeat of their siblings count too. Split it, or describe fewer of them.`;
    case "steps":
      return `the schema takes more than ${limit} steps to convert${local}: anyOf and oneOf branches repeat their siblings (properties, items, ...) once each, and required names and allOf branches count too. Move what the branches share into them, or simplify the schema.`;
    case "characters":
      return `the schema spells out more than ${limit} characters of property names, constants and descriptions${local}, counted again each time anyOf or oneOf branches repeat them. Shorten them, or simplify the schema.`;
    default: {
      const unreachable: never = kind;
      throw new Error(`unknown budget ${String(unreachable)}`);
    }
  }
}

/** Why a request's tools that together need more than `limit` of `kind` are refused. */
function describeSharedOverspending(kind: keyof Budget, limit: number): string {
  const what =
    kind === "entries"
      ? `declare more than ${limit} properties and enum values`
      : kind === "steps"
        ? `take more than ${limit} steps to convert`
        : `spell out more than ${limit} characters of property names, constants and descriptions`;
  return `the request's tools together ${what} (what a local model's output grammars take for one request). Offer fewer tools, or smaller ones.`;
}

/** The position of a subschema of `at` under these pointer segments (not yet encoded). */
function child(at: Position, ...segments: string[]): Position {
  return {
    depth: at.depth + 1,
    pointer: () => `${at.pointer()}/${segments.map(encodePointerSegment).join("/")}`,
  };
}

/** The `keywords` `schema` has: a copy whose size does not depend on the client's object. */
function pick(schema: Record<string, unknown>, keywords: readonly string[]): Record<string, unknown> {
  const picked: Record<string, unknown> = {};
  for (const keyword of keywords) {
    if (Object.hasOwn(schema, keyword)) picked[keyword] = schema[keyword];
  }
  return picked;
}

/**
 * The value a `$ref` within the document points at (`#` or `#/a/b` with JSON pointer and URI
 * escapes), or `undefined` for one that does not resolve or is not local (a URL, an anchor).
 */
function resolveLocalReference(root: unknown, reference: string): unknown {
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

function oneOf(branches: GbnfJsonSchema[], description: { description?: string }): GbnfJsonSchema {
  if (branches.length === 1 && branches[0] !== undefined)
    return { ...branches[0], ...description } as GbnfJsonSchema;
  if (branches.length === 0) return { type: "null", ...description };
  return { oneOf: branches, ...description };
}

function readTypes(schema: Record<string, unknown>): string[] {
  if (typeof schema.type === "string") return [schema.type];
  if (Array.isArray(schema.type)) {
    return [...new Set(schema.type.filter((type): type is string => typeof type === "string"))];
  }
  if ("properties" in schema || "additionalProperties" in schema || "required" in schema) return ["object"];
  if ("items" in schema || "prefixItems" in schema) return ["array"];
  if ("minLength" in schema || "maxLength" in schema || "pattern" in schema || "format" in schema)
    return ["string"];
  if ("minimum" in schema || "maximum" in schema || "multipleOf" in schema) return ["number"];
  return [];
}

/** Whether a JSON value is of a JSON Schema type (an integral number is an integer, and a number). */
function hasType(value: unknown, type: string): boolean {
  switch (type) {
    case "null":
      return value === null;
    case "array":
      return Array.isArray(value);
    case "object":
      return isRecord(value);
    case "integer":
      return Number.isInteger(value);
    default:
      return typeof value === type;
  }
}

function readCount(value: unknown): number | undefined {
  return Number.isInteger(value) && (value as number) >= 0 ? (value as number) : undefined;
}

/** A JSON pointer segment of a URI fragment, unescaped; `undefined` for a malformed `%` escape. */
function decodePointerSegment(segment: string): string | undefined {
  try {
    return decodeURIComponent(segment).replaceAll("~1", "/").replaceAll("~0", "~");
  } catch {
    return undefined;
  }
}

function encodePointerSegment(segment: string): string {
  return segment.replaceAll("~", "~0").replaceAll("/", "~1");
}

function isSchema(value: unknown): boolean {
  return typeof value === "boolean" || isRecord(value);
}

/** A short description of a value for a message: its JSON, cut, or its kind. */
function describe(value: unknown): string {
  const text = JSON.stringify(value);
  if (text === undefined) return typeof value;
  return text.length > 40 ? `${cutText(text, 40)}...` : text;
}

/** A pointer for a message, its middle cut when a long name makes it long. */
function cut(pointer: string): string {
  return pointer.length > 200 ? `${cutText(pointer, 100)}...${cutTextKeepingEnd(pointer, 100)}` : pointer;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
