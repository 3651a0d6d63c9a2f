import { type TSchema, type TUnsafe, Type } from "@sinclair/typebox";

/**
 * A schema that also accepts `null` (clients such as LangChain send `null` for "not set").
 * Written as a JSON Schema type array rather than `anyOf`, so a wrong type gets one clear
 * validation error, and ranges still apply to the non-null value.
 */
export function Nullable<T extends TSchema>(schema: T): TUnsafe<T["static"] | null> {
  const { type, ...rest } = schema as unknown as { type: string } & Record<string, unknown>;
  return Type.Unsafe<T["static"] | null>({ ...rest, type: [type, "null"] });
}

/**
 * A string from a fixed set, as `{type: "string", enum}` rather than a union of literals, so a
 * wrong type (`invalid_type`) and a wrong value (`invalid_value`) give different errors.
 */
export function StringEnum<const T extends readonly string[]>(
  values: T,
  options: { description?: string } = {},
): TUnsafe<T[number]> {
  return Type.Unsafe<T[number]>({ ...options, type: "string", enum: [...values] });
}
