/**
 * Lookup of JSON values by value, as `enum` and `const` compare them: primitives as they are,
 * arrays and objects by their canonical JSON text (members in key order). A sibling's `enum` is
 * read once, whatever the number of branches that meet it.
 */
class ValueSet {
  readonly #primitives = new Set<unknown>();
  readonly #structures = new Set<string>();

  constructor(values: readonly unknown[]) {
    for (const value of values) {
      if (isStructure(value)) this.#structures.add(canonical(value));
      else this.#primitives.add(value);
    }
  }

  has(value: unknown): boolean {
    return isStructure(value) ? this.#structures.has(canonical(value)) : this.#primitives.has(value);
  }
}

const valueSets = new WeakMap<readonly unknown[], ValueSet>();

/** The lookup of `values` (made once per array: schemas are not changed while converted). */
export function valueSet(values: readonly unknown[]): ValueSet {
  let found = valueSets.get(values);
  if (found === undefined) {
    found = new ValueSet(values);
    valueSets.set(values, found);
  }
  return found;
}

function isStructure(value: unknown): value is object {
  return typeof value === "object" && value !== null;
}

const canonicalTexts = new WeakMap<object, string>();

/** JSON text with object members in key order: equal JSON values, equal texts. */
function canonical(value: unknown): string {
  if (!isStructure(value)) return JSON.stringify(value) ?? "null";
  const known = canonicalTexts.get(value);
  if (known !== undefined) return known;
  const text = Array.isArray(value)
    ? `[${value.map(canonical).join(",")}]`
    : `{${Object.keys(value)
        .sort()
        .map((key) => `${JSON.stringify(key)}:${canonical((value as Record<string, unknown>)[key])}`)
        .join(",")}}`;
  canonicalTexts.set(value, text);
  return text;
}
