import type { GbnfJsonSchema } from "node-llama-cpp";

/**
 * Converts any client JSON Schema to the subset node-llama-cpp turns into a grammar
 * (`GbnfJsonSchema`), so that every schema a client sends works and every output the grammar
 * allows still validates against the client's schema wherever the subset can say so.
 *
 * The subset has no "any value", no `anyOf`/`allOf`, no `pattern`, no numeric ranges, no
 * `nullable`, and an object emits every declared property, in order. So:
 * - `{}`, `true` and unknown shapes become "any JSON value"; `false` becomes `null` (it cannot say
 *   "nothing").
 * - `anyOf` and `oneOf` become `oneOf` (siblings merged into each branch); `allOf` is merged into one
 *   schema; `type: [a, b]` and `nullable` become a `oneOf` of each type.
 * - `$ref` to `#/$defs/X` or `#/definitions/X` (and `#`, the root) become `$defs` references;
 *   any other reference becomes "any JSON value".
 * - Objects with `properties` emit exactly those (optional ones too, which is valid; no others,
 *   which is a valid subset even where `additionalProperties` allows more), so
 *   `{"type": "object", "properties": {}}` is `{}`. Objects without `properties` are maps: any
 *   keys, values per `additionalProperties` (any value by default, as JSON Schema says). Required
 *   properties that are not declared are added as "any JSON value".
 * - `pattern`, unknown `format`s, `minimum`/`maximum`, `multipleOf`, `uniqueItems`, `not`,
 *   `if`/`then`, `dependentSchemas` and the like are dropped: the output may not meet them.
 * - `const` and `enum` of objects or arrays become exact object and array schemas.
 */
export function convertJsonSchemaToGbnf(schema: unknown): GbnfJsonSchema {
  const root = isRecord(schema) ? schema : {};
  const definitions: Record<string, unknown> = {
    ...(isRecord(root.definitions) ? root.definitions : {}),
    ...(isRecord(root.$defs) ? root.$defs : {}),
  };
  const converter = new SchemaConverter(definitions, root);
  const converted = converter.convert(schema, 0);
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

const anyValue: GbnfJsonSchema = {
  oneOf: [
    { type: ["string", "number", "boolean", "null"] },
    { type: "array" },
    { type: "object", additionalProperties: true },
  ],
};

const supportedStringFormats = new Set(["date-time", "time", "date"]);

class SchemaConverter {
  readonly #definitions: Record<string, unknown>;
  readonly #root: Record<string, unknown>;
  readonly #converted = new Map<string, GbnfJsonSchema>();
  readonly #inProgress = new Set<string>();

  constructor(definitions: Record<string, unknown>, root: Record<string, unknown>) {
    this.#definitions = definitions;
    this.#root = root;
  }

  convertedDefinitions(): Record<string, GbnfJsonSchema> {
    return Object.fromEntries(this.#converted);
  }

  convert(schema: unknown, depth: number): GbnfJsonSchema {
    if (schema === false) return { type: "null" };
    if (!isRecord(schema) || depth > maxDepth) return anyValue;
    const description = typeof schema.description === "string" ? { description: schema.description } : {};

    if (typeof schema.$ref === "string")
      return { ...this.#convertReference(schema.$ref, depth), ...description };
    if (Array.isArray(schema.allOf)) return this.convert(mergeAllOf(schema), depth);
    const alternatives = Array.isArray(schema.anyOf)
      ? schema.anyOf
      : Array.isArray(schema.oneOf)
        ? schema.oneOf
        : undefined;
    if (alternatives !== undefined) {
      const { anyOf: _anyOf, oneOf: _oneOf, ...siblings } = schema;
      const branches = alternatives.map((branch) =>
        this.convert(isRecord(branch) ? { ...withoutAnnotations(siblings), ...branch } : branch, depth + 1),
      );
      return oneOf(branches, description);
    }
    if ("const" in schema) return { ...convertConstant(schema.const), ...description };
    if (Array.isArray(schema.enum)) {
      return oneOf(
        schema.enum.map((value) => convertConstant(value)),
        description,
      );
    }
    if (schema.nullable === true) {
      const { nullable: _nullable, ...rest } = schema;
      return oneOf([this.convert(rest, depth + 1), { type: "null" }], description);
    }

    const types = readTypes(schema);
    if (types.length === 0) return { ...anyValue, ...description };
    return oneOf(
      types.map((type) => this.#convertTyped(schema, type, depth)),
      description,
    );
  }

  #convertReference(reference: string, depth: number): GbnfJsonSchema {
    if (reference === "#") return this.#referenceDefinition(rootDefinitionName, this.#root, depth);
    const match = /^#\/(?:\$defs|definitions)\/([^/]+)$/.exec(reference);
    const name = match?.[1] === undefined ? undefined : decodePointerSegment(match[1]);
    if (name === undefined || !(name in this.#definitions)) return anyValue;
    return this.#referenceDefinition(name, this.#definitions[name], depth);
  }

  #referenceDefinition(name: string, definition: unknown, depth: number): GbnfJsonSchema {
    if (!this.#converted.has(name) && !this.#inProgress.has(name)) {
      this.#inProgress.add(name);
      this.#converted.set(name, this.convert(definition, depth + 1));
      this.#inProgress.delete(name);
    }
    return { $ref: `#/$defs/${name}` } as GbnfJsonSchema;
  }

  #convertTyped(schema: Record<string, unknown>, type: string, depth: number): GbnfJsonSchema {
    switch (type) {
      case "object":
        return this.#convertObject(schema, depth);
      case "array":
        return this.#convertArray(schema, depth);
      case "string": {
        if (typeof schema.format === "string" && supportedStringFormats.has(schema.format)) {
          return { type: "string", format: schema.format as "date-time" | "time" | "date" };
        }
        const minLength = readCount(schema.minLength);
        const maxLength = readCount(schema.maxLength);
        return {
          type: "string",
          ...(minLength === undefined ? {} : { minLength }),
          ...(maxLength === undefined ? {} : { maxLength: Math.max(maxLength, minLength ?? 0) }),
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

  #convertObject(schema: Record<string, unknown>, depth: number): GbnfJsonSchema {
    const declared = isRecord(schema.properties) ? schema.properties : undefined;
    const required = Array.isArray(schema.required)
      ? schema.required.filter((name): name is string => typeof name === "string")
      : [];
    const properties: Record<string, GbnfJsonSchema> = {};
    for (const [name, property] of Object.entries(declared ?? {})) {
      properties[name] = this.convert(property, depth + 1);
    }
    for (const name of required) {
      if (!(name in properties)) properties[name] = anyValue;
    }
    // Declared properties (even none, `properties: {}`) are what the client wants: only those.
    if (declared !== undefined || Object.keys(properties).length > 0) return { type: "object", properties };

    // No `properties` at all: a map whose values follow `additionalProperties` (any value by default).
    const additional = schema.additionalProperties;
    if (additional === false) return { type: "object", properties: {} };
    const minProperties = readCount(schema.minProperties);
    const maxProperties = readCount(schema.maxProperties);
    return {
      type: "object",
      additionalProperties: isRecord(additional) ? this.convert(additional, depth + 1) : true,
      ...(minProperties === undefined ? {} : { minProperties }),
      ...(maxProperties === undefined ? {} : { maxProperties: Math.max(maxProperties, minProperties ?? 0) }),
    };
  }

  #convertArray(schema: Record<string, unknown>, depth: number): GbnfJsonSchema {
    // Draft 2020-12 tuples use `prefixItems` (+ `items` for the rest); earlier drafts an `items` array.
    const tuple = Array.isArray(schema.prefixItems)
      ? schema.prefixItems
      : Array.isArray(schema.items)
        ? schema.items
        : undefined;
    const rest = Array.isArray(schema.items) ? schema.additionalItems : schema.items;
    const prefixItems = tuple?.map((item) => this.convert(item, depth + 1));
    const minItems = Math.max(readCount(schema.minItems) ?? 0, prefixItems?.length ?? 0);
    let maxItems = readCount(schema.maxItems);
    if (rest === false && prefixItems !== undefined) maxItems = prefixItems.length;
    if (maxItems !== undefined) maxItems = Math.max(maxItems, minItems);
    return {
      type: "array",
      ...(prefixItems === undefined || prefixItems.length === 0 ? {} : { prefixItems }),
      ...(rest === undefined || rest === true || rest === false
        ? {}
        : { items: this.convert(rest, depth + 1) }),
      ...(minItems === 0 ? {} : { minItems }),
      ...(maxItems === undefined ? {} : { maxItems }),
    };
  }
}

function oneOf(branches: GbnfJsonSchema[], description: { description?: string }): GbnfJsonSchema {
  if (branches.length === 1 && branches[0] !== undefined)
    return { ...branches[0], ...description } as GbnfJsonSchema;
  if (branches.length === 0) return { type: "null", ...description };
  return { oneOf: branches, ...description };
}

/** An exact schema for a constant: `const` for primitives, fixed shapes for objects and arrays. */
function convertConstant(value: unknown): GbnfJsonSchema {
  if (value === null || typeof value === "string" || typeof value === "boolean") return { const: value };
  if (typeof value === "number") return Number.isFinite(value) ? { const: value } : { type: "null" };
  if (Array.isArray(value)) {
    if (value.length === 0) return { type: "array", maxItems: 0 };
    return {
      type: "array",
      prefixItems: value.map(convertConstant),
      minItems: value.length,
      maxItems: value.length,
    };
  }
  if (isRecord(value)) {
    const entries = Object.entries(value);
    if (entries.length === 0) return { type: "object", properties: {} };
    return {
      type: "object",
      properties: Object.fromEntries(entries.map(([key, entry]) => [key, convertConstant(entry)])),
    };
  }
  return { type: "null" };
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

/** Merges `allOf` branches (and the schema's own keywords) into one schema, shallowly. */
function mergeAllOf(schema: Record<string, unknown>): Record<string, unknown> {
  const { allOf, ...own } = schema;
  const merged: Record<string, unknown> = { ...own };
  for (const branch of Array.isArray(allOf) ? allOf : []) {
    if (!isRecord(branch)) continue;
    for (const [key, value] of Object.entries(branch)) {
      const existing = merged[key];
      if (key === "properties" && isRecord(existing) && isRecord(value)) {
        merged[key] = { ...existing, ...value };
      } else if (key === "required" && Array.isArray(existing) && Array.isArray(value)) {
        merged[key] = [...existing, ...value];
      } else if (!(key in merged)) {
        merged[key] = value;
      }
    }
  }
  return merged;
}

function withoutAnnotations(schema: Record<string, unknown>): Record<string, unknown> {
  const {
    description: _description,
    title: _title,
    $defs: _defs,
    definitions: _definitions,
    ...rest
  } = schema;
  return rest;
}

function readCount(value: unknown): number | undefined {
  return typeof value === "number" && Number.isFinite(value) && value >= 0 ? Math.floor(value) : undefined;
}

function decodePointerSegment(segment: string): string {
  return decodeURIComponent(segment).replaceAll("~1", "/").replaceAll("~0", "~");
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
