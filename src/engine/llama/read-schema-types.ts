/** The types a schema declares, or, without `type`, the one its keywords imply (none: any value). */
export function readTypes(schema: Record<string, unknown>): string[] {
  if (typeof schema.type === "string") return [schema.type];
  if (Array.isArray(schema.type)) {
    return [...new Set(schema.type.filter((type): type is string => typeof type === "string"))];
  }
  if ("properties" in schema || "additionalProperties" in schema || "required" in schema) return ["object"];
  if ("items" in schema || "prefixItems" in schema) return ["array"];
  // Counts too (regression: `{"minItems": 2}` was any value, an array of one item among them).
  if ("minItems" in schema || "maxItems" in schema) return ["array"];
  if ("minProperties" in schema || "maxProperties" in schema) return ["object"];
  if ("minLength" in schema || "maxLength" in schema || "pattern" in schema || "format" in schema)
    return ["string"];
  if ("minimum" in schema || "maximum" in schema || "multipleOf" in schema) return ["number"];
  // Draft 6's exclusive bounds are numbers of their own (draft 4's booleans come with a bound above).
  if (typeof schema.exclusiveMinimum === "number" || typeof schema.exclusiveMaximum === "number")
    return ["number"];
  return [];
}

/** Whether a JSON value is of a JSON Schema type (an integral number is an integer, and a number). */
export function hasType(value: unknown, type: string): boolean {
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

export function isSchema(value: unknown): boolean {
  return typeof value === "boolean" || isRecord(value);
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * Whether `schema` has `patternProperties` that name any pattern: then `additionalProperties`
 * governs only the names no pattern matches, which the conversion cannot tell (it does not run
 * the client's patterns: one could take seconds on a name), so an undeclared name is taken to be
 * allowed, with any value, rather than refused.
 */
export function hasPatternProperties(schema: Record<string, unknown>): boolean {
  const patterns = schema.patternProperties;
  if (!isRecord(patterns)) return false;
  for (const _ in patterns) return true;
  return false;
}
