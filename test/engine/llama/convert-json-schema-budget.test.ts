import { describe, expect, it } from "vitest";
import { convertJsonSchemaToGbnf } from "../../../src/engine/llama/convert-json-schema-to-gbnf.ts";
import { AppError } from "../../../src/errors/app-error.ts";

/**
 * The grammar converter's work is bounded by the schema it is given, whatever its shape: each of
 * these schemas is small (or within the edge's bounds) and held the event loop for seconds, some
 * for ever, at the edge (every model) or in a local model's grammar. Where the fix changes only
 * how long a conversion takes, the test's timeout, far above what it takes now, is what fails.
 */
const quadraticTimeout = 10_000;
const param = "response_format.json_schema.schema";

/** The error converting `schema` throws (a local grammar's limits unless `grammarLimits` is false), or `undefined`. */
function refusal(schema: unknown, grammarLimits = true): AppError | undefined {
  try {
    convertJsonSchemaToGbnf(schema, { param, grammarLimits });
    return undefined;
  } catch (error) {
    if (error instanceof AppError) return error;
    throw error;
  }
}

/** `{anyOf: [array, array], items: ...}` `depth` levels deep: each branch converts the shared `items` again. */
function branchingEveryLevel(depth: number): Record<string, unknown> {
  let schema: Record<string, unknown> = { type: "string" };
  for (let level = 0; level < depth; level++) {
    schema = { anyOf: [{ type: "array" }, { type: "array", maxItems: 3 }], items: schema };
  }
  return schema;
}

describe("convertJsonSchemaToGbnf's bounded work", () => {
  it("refuses anyOf branches that repeat their siblings exponentially (each level doubled the work)", () => {
    // 14 levels, under a kilobyte, took half a second; 20 levels 16 s, 40 for ever.
    const schema = branchingEveryLevel(14);
    expect(JSON.stringify(schema).length).toBeLessThan(1000);
    for (const grammarLimits of [false, true]) {
      const error = refusal(schema, grammarLimits);
      expect(error?.param).toBe(param);
      expect(error?.message).toMatch(
        /takes more than \d+ steps to convert.*anyOf and oneOf branches repeat their siblings/,
      );
    }
    // A few levels of it are fine.
    expect(refusal(branchingEveryLevel(6))).toBeUndefined();
  });

  it("refuses wide anyOf and tuples before converting them", () => {
    const wide = Array.from({ length: 100_000 }, () => ({ type: "string" }));
    expect(refusal({ anyOf: wide }, false)?.message).toMatch(/more than 30000 steps/);
    expect(refusal({ type: "array", prefixItems: wide })?.message).toMatch(/more than 6000 steps/);
  });

  it("merges allOf branches' properties and required names into one copy", () => {
    const branches = Array.from({ length: 4999 }, (_, index) => ({
      properties: { [`p${index}`]: { type: "string" } },
      required: [`p${index}`],
    }));
    const converted = convertJsonSchemaToGbnf(
      { type: "object", allOf: [{ properties: { ["__proto__"]: { type: "number" } } }, ...branches] },
      { param, grammarLimits: false },
    ) as { properties: Record<string, unknown> };
    expect(Object.keys(converted.properties)).toHaveLength(5000);
    expect(Object.hasOwn(converted.properties, "__proto__")).toBe(true);
    expect(converted.properties.p4998).toEqual({ type: "string" });
  });

  it(
    "refuses more allOf branches than it may merge (merging 20,000 of one property each took minutes)",
    () => {
      const branches = Array.from({ length: 20_000 }, (_, index) => ({ properties: { [`p${index}`]: {} } }));
      expect(refusal({ allOf: branches }, false)?.message).toMatch(/more than 30000 steps/);
    },
    quadraticTimeout,
  );

  it("counts what a grammar writes out: undeclared required properties and the members of constants", () => {
    const names = Array.from({ length: 1001 }, (_, index) => `n${index}`);
    expect(refusal({ type: "object", required: names })?.message).toMatch(
      /more than 1000 properties and enum values in all/,
    );
    const items = Array.from({ length: 1001 }, (_, index) => index);
    expect(refusal({ const: items })?.message).toMatch(/more than 1000 properties and enum values/);
    expect(refusal({ enum: [Object.fromEntries(names.map((name) => [name, 1]))] })?.code).toBe(
      "invalid_value",
    );
    expect(refusal({ const: items.slice(0, 1000) })).toBeUndefined();
  });

  it("bounds the characters a local grammar writes out, repetitions and descriptions included", () => {
    const long = "x".repeat(100_000);
    // Within the edge's 120,000 characters once, written out in every branch.
    const repeated = {
      anyOf: Array.from({ length: 6 }, () => ({ type: "object" })),
      properties: { a: { const: long } },
    };
    expect(refusal(repeated)?.message).toMatch(
      /spells out more than 500000 characters of property names, constants and descriptions/,
    );
    expect(refusal(repeated, false)).toBeUndefined();
    expect(refusal({ type: "string", description: "d".repeat(500_001) })?.code).toBe("invalid_value");
    expect(refusal({ type: "string", description: "d".repeat(400_000) })).toBeUndefined();
  });

  it(
    "names and resolves many references in linear time",
    () => {
      // 8000 schemas each referenced once (naming each made a set of all names so far: 14 s).
      const targets = Array.from({ length: 8000 }, () => ({ type: "string" }));
      const many = { anyOf: targets.map((_, index) => ({ $ref: `#/x/${index}` })), x: targets };
      expect(refusal(many, false)).toBeUndefined();
      // One long pointer met in every branch is walked once (each walk took 11 ms).
      const name = "y".repeat(1_000_000);
      const long = {
        anyOf: Array.from({ length: 3000 }, () => ({ type: "array" })),
        items: { $ref: `#/x/${name}` },
        x: { [name]: { type: "string" } },
      };
      const converted = convertJsonSchemaToGbnf(long, { param, grammarLimits: false }) as {
        $defs: Record<string, unknown>;
      };
      // The `$defs` name, spelled out wherever it is referenced, is cut.
      expect(Object.keys(converted.$defs)).toEqual(["y".repeat(64)]);
    },
    quadraticTimeout,
  );

  it("names many references that want one name with work linear in their number", () => {
    // n schemas whose pointers end in the same segment: naming each counted t_2, t_3, ... from
    // the start, n^2/2 look-ups in all (15,000 in one tool: 6 s). Counted, not timed.
    const count = 3000;
    const holders = Array.from({ length: count }, () => ({ t: { type: "string" } }));
    const schema = {
      // Named first, in the way of the counting: the suffixes step over them.
      anyOf: [
        { $ref: "#/y/t_2" },
        { $ref: "#/y/t_5" },
        ...holders.map((_, index) => ({ $ref: `#/x/${index}/t` })),
      ],
      x: holders,
      y: { t_2: { type: "integer" }, t_5: { type: "boolean" } },
    };
    const has = Set.prototype.has;
    let lookups = 0;
    Set.prototype.has = function (this: Set<unknown>, value: unknown) {
      lookups += 1;
      return has.call(this, value);
    };
    let converted: { $defs: Record<string, unknown> };
    try {
      converted = convertJsonSchemaToGbnf(schema, { param, grammarLimits: false }) as typeof converted;
    } finally {
      Set.prototype.has = has;
    }
    const names = Object.keys(converted.$defs);
    expect(new Set(names).size).toBe(count + 2);
    expect(names).toEqual(expect.arrayContaining(["t", "t_2", "t_3", "t_5", "t_6", `t_${count + 2}`]));
    expect(lookups).toBeLessThan(20 * count);
  });

  it("refuses a type list that repeats a name", () => {
    expect(refusal({ type: Array.from({ length: 100_000 }, () => "string") }, false)?.message).toMatch(
      /'type' names a type more than once/,
    );
    expect(refusal({ type: ["string", "null"] }, false)).toBeUndefined();
  });
});

describe("a schema deeper than a local model's grammar follows", () => {
  /** `levels` definitions, each an object whose one required property refers to the next; the last a boolean. */
  function chainOfDefinitions(levels: number): Record<string, unknown> {
    const $defs: Record<string, unknown> = { [`o${levels}`]: { type: "boolean" } };
    for (let level = 0; level < levels; level++)
      $defs[`o${level}`] = {
        type: "object",
        properties: { n: { $ref: `#/$defs/o${level + 1}` } },
        required: ["n"],
        additionalProperties: false,
      };
    return { $defs, $ref: "#/$defs/o0" };
  }

  it("is refused, saying so, rather than let through as any JSON value (regression)", () => {
    // About 2 KB: 33 levels of two conversion steps each (the property and its $ref).
    const error = refusal(chainOfDefinitions(33));
    expect(error?.code).toBe("invalid_value");
    expect(error?.message).toMatch(
      /^Invalid JSON Schema in 'response_format\.json_schema\.schema' at '.*': the schema nests deeper than 64 levels/,
    );
    expect(refusal(chainOfDefinitions(30))).toBeUndefined();
    // An upstream model's checks stop there instead: its server has no such grammar.
    expect(refusal(chainOfDefinitions(33), false)).toBeUndefined();
  });
});
