/**
 * What a schema's patterns may take to analyse together (schema-conversion-budget.ts's
 * maxPatternWork): each pattern's analysis was bounded, but a schema of a thousand distinct
 * patterns held the event loop two minutes, for a request refused (for its balance) only after.
 */
import { describe, expect, it } from "vitest";
import { convertJsonSchemaToGbnf } from "../../../src/engine/llama/convert-json-schema-to-gbnf.ts";
import { parseRegexPattern } from "../../../src/engine/llama/parse-regex-pattern.ts";
import { ownGrammarKey } from "../../../src/engine/llama/patch-grammar-definitions.ts";
import { type PatternGrammar, patternGrammar } from "../../../src/engine/llama/pattern-grammar.ts";
import { createPatternMatcher } from "../../../src/engine/llama/pattern-open-positions.ts";
import { wholeStringTree } from "../../../src/engine/llama/regex-node-shape.ts";
import {
  ConversionBudget,
  createToolsBudget,
  maxPatternWork,
  type SharedBudget,
} from "../../../src/engine/llama/schema-conversion-budget.ts";
import { createConstantComparisons } from "./schema-bombs.ts";

/** A pattern whose analysis takes long (every `@` read may be the one), distinct for each `index`. */
function intricate(index: number): { type: string; pattern: string; maxLength: number } {
  return { type: "string", pattern: `^\\S+@\\S+${index}$`, maxLength: 40 };
}

type Converted = {
  properties: Record<string, Record<string, unknown>>;
  $defs?: Record<string, Record<string, unknown>>;
};

/** `properties` converted as a response format's schema, or as a tool's sharing `shared`. */
function convert(properties: Record<string, unknown>, shared?: SharedBudget): Converted {
  return convertJsonSchemaToGbnf({ type: "object", properties }, { param: "schema", shared }) as Converted;
}

/** The pattern grammar each property of `converted` is written with, `undefined` for one left to its lengths. */
function grammarsOf(converted: Converted): Record<string, string | undefined> {
  return Object.fromEntries(
    Object.entries(converted.properties).map(([name, property]) => {
      const reference = property.$ref;
      const definition =
        typeof reference === "string" ? converted.$defs?.[reference.replace("#/$defs/", "")] : undefined;
      return [name, definition?.[ownGrammarKey] as string | undefined];
    }),
  );
}

describe("the work of a schema's patterns", () => {
  it("is bounded: once the patterns analysed took maxPatternWork, the rest are left to their lengths (regression)", () => {
    const properties = Object.fromEntries(
      Array.from({ length: 200 }, (_, index) => [`p${index}`, intricate(index)]),
    );
    const converted = convert(properties);
    const grammars = grammarsOf(converted);
    const written = Object.entries(grammars).filter(([, spec]) => spec !== undefined);
    // The first ones, in order, as far as the budget went; before, all 200 were analysed.
    expect(written.length).toBeGreaterThan(0);
    expect(written.length).toBeLessThan(10);
    expect(written.map(([name]) => name)).toEqual(
      Array.from({ length: written.length }, (_, index) => `p${index}`),
    );
    // What they took: within the budget and the one pattern that crossed it.
    const work = written.reduce((total, [name]) => {
      const { pattern, maxLength } = properties[name] as ReturnType<typeof intricate>;
      return total + patternGrammar(pattern, undefined, maxLength).work;
    }, 0);
    expect(work).toBeGreaterThanOrEqual(maxPatternWork / 2);
    expect(work).toBeLessThan(maxPatternWork * 2);
    // The others keep their lengths, as a pattern too intricate to write does.
    expect(converted.properties.p199).toEqual({ type: "string", maxLength: 40 });
  });

  it("counts a pattern the schema repeats once: every place keeps its grammar", () => {
    const properties: Record<string, unknown> = { first: intricate(0) };
    for (let index = 1; index < 40; index++) {
      properties[`other${index}`] = intricate(index);
      properties[`again${index}`] = intricate(0);
    }
    const grammars = grammarsOf(convert(properties));
    const first = grammars.first;
    expect(first).toMatch(/^pattern 0 40 /);
    for (let index = 1; index < 40; index++) expect(grammars[`again${index}`]).toBe(first);
    expect(grammars.other39).toBeUndefined();
  });

  it("is shared by a request's tools", () => {
    const shared = createToolsBudget();
    const tools = Array.from({ length: 20 }, (_, tool) =>
      grammarsOf(convert({ [`p${tool}`]: intricate(1000 + tool) }, shared)),
    );
    expect(tools[0]?.p0).toMatch(/^pattern /);
    expect(tools[19]?.p19).toBeUndefined();
    // Each alone, with a budget of its own, is written.
    expect(grammarsOf(convert({ p19: intricate(1019) })).p19).toMatch(/^pattern /);
  });

  it("analyses a pattern met again once, whatever came between (regression: a cache that let it go)", () => {
    const budget = new ConversionBudget({
      grammarLimits: true,
      shared: undefined,
      refuse: () => {
        throw new Error("refused");
      },
    });
    const analyses: string[] = [];
    const analyse = (key: string) => (): PatternGrammar => {
      analyses.push(key);
      return { kind: "unsupported", work: 10 };
    };
    budget.analysePattern("intricate", analyse("intricate"));
    for (let index = 0; index < 300; index++)
      budget.analysePattern(`cheap ${index}`, analyse(`cheap ${index}`));
    expect(budget.analysePattern("intricate", analyse("intricate"))).toEqual({
      kind: "unsupported",
      work: 10,
    });
    expect(analyses.filter((key) => key === "intricate")).toHaveLength(1);
  });
});

describe("a pattern's automaton", () => {
  /** Its copies may each match nothing: every copy leads to every later one. */
  const everyCopyEmpty = `^(${[..."abcdefghijklmnopqrst"].map((letter) => `${letter}?`).join("")}){1000}$`;
  /** 2000 alternatives repeated: each copy's 2000 ends lead to the next copy's 2000 starts. */
  const wideRepeated = `^(${Array.from({ length: 2000 }, () => "a").join("|")}){10}$`;

  it("is not built past its bound, for a constant's check (regression: 2 * 10^8 follows ran the heap out)", () => {
    const tree = wholeStringTree(parseRegexPattern(everyCopyEmpty) ?? []);
    expect(tree).toBeDefined();
    if (tree === undefined) return;
    const built = createPatternMatcher(tree);
    expect(built.match).toBeUndefined();
    expect(built.work).toBeLessThanOrEqual(250_000);
    // The schema converts: the constant is taken to meet a pattern too intricate to check.
    const converted = convertJsonSchemaToGbnf(
      { type: "string", pattern: everyCopyEmpty, enum: ["abc", "tsr"] },
      { param: "schema" },
    );
    expect(JSON.stringify(converted)).toContain("tsr");
  });

  it("is not built past its bound for a grammar either, and the work counted is what was done", () => {
    const grammar = patternGrammar(wideRepeated, undefined, undefined);
    expect(grammar.kind).toBe("unsupported");
    // Reading the pattern (16 a character) and the automaton, cut off within its bound.
    expect(grammar.work).toBeLessThanOrEqual(16 * wideRepeated.length + 250_000);
    // A matcher of it is refused the same way.
    const tree = wholeStringTree(parseRegexPattern(wideRepeated) ?? []);
    expect(tree === undefined ? undefined : createPatternMatcher(tree).match).toBeUndefined();
  });
});

describe("the matchers of constants' patterns", () => {
  /** Two alternations of 400 words one after the other: every end of the first leads to every start of the second. */
  const twoAlternations = (tool: number) => {
    const words = Array.from({ length: 400 }, (_, index) => `w${index}`).join("|");
    return `^(${words})(${words})t${tool}$`;
  };

  it("are built within the patterns' work a request's tools share (regression: each tool had a budget of its own)", () => {
    const shared = createToolsBudget();
    const kept = Array.from({ length: 30 }, (_, tool) => {
      const converted = convertJsonSchemaToGbnf(
        {
          type: "object",
          properties: {
            s: { type: "string", pattern: twoAlternations(tool), enum: [`w1w2t${tool}`, "zzz"] },
          },
        },
        { param: `tools[${tool}].function.parameters`, shared },
      );
      // "zzz" does not match: a checked enum leaves it out, an unchecked one keeps it.
      return JSON.stringify(converted).includes("zzz");
    });
    expect(kept[0]).toBe(false);
    expect(kept.at(-1)).toBe(true);
    expect(kept.filter((keeps) => !keeps).length).toBeLessThan(10);
  });
});

describe("the checks of constants", () => {
  it("are shared by a request's tools (regression: each tool had 200,000 of its own)", () => {
    const shared = createToolsBudget();
    // 200 values of 200 characters each, read by the pattern's matcher: some 100,000 checks a tool.
    const values = Array.from(
      { length: 200 },
      (_, index) => `${"a".repeat(199)}${String.fromCharCode(98 + (index % 20))}`,
    );
    const kept = Array.from({ length: 10 }, (_, tool) => {
      const converted = convertJsonSchemaToGbnf(
        { type: "string", pattern: "^a+[b-u]$", enum: [...values, "zzz"] },
        { param: `tools[${tool}].function.parameters`, shared },
      );
      return JSON.stringify(converted).includes("zzz");
    });
    // Checked, "zzz" is left out; unchecked (the checks spent), it is kept as it is.
    expect(kept[0]).toBe(false);
    expect(kept.at(-1)).toBe(true);
    // Each tool alone checks it.
    expect(
      JSON.stringify(
        convertJsonSchemaToGbnf(
          { type: "string", pattern: "^a+[b-u]$", enum: [...values, "zzz"] },
          { param: "p" },
        ),
      ),
    ).not.toContain("zzz");
  });
});

describe("comparing constants", () => {
  it("counts the values and member names it looks at (regression: an enum's values compared uncounted)", () => {
    // 400 * 100 comparisons of 100 names each, counted as two checks a reference before.
    const schema = createConstantComparisons();
    // Checked to the end, the array branch meets no value and is left out; its checks spent
    // (200,000), its constant is taken to meet the rest, and written.
    for (const grammarLimits of [false, true]) {
      expect(JSON.stringify(convertJsonSchemaToGbnf(schema, { param: "schema", grammarLimits }))).toContain(
        "k99",
      );
    }
  });
});

describe("a const beside an enum", () => {
  it("is compared with its values within the constant checks (regression: each comparison counted one step)", () => {
    const member = Object.fromEntries(Array.from({ length: 2000 }, (_, index) => [`k${index}`, 0]));
    // A const of 2000 members against 2000 empty objects: 4,000,000 looks, past the 200,000
    // checks; past them the const is taken to be one of the values, and the schema converts.
    const heavy = { const: member, enum: Array.from({ length: 2000 }, () => ({})) };
    expect(() => convertJsonSchemaToGbnf(heavy, { param: "schema", grammarLimits: false })).not.toThrow();
    // Within them, a const that is none of the values is refused, as before.
    expect(() =>
      convertJsonSchemaToGbnf(
        { const: { a: 1 }, enum: [{}, { a: 2 }] },
        { param: "schema", grammarLimits: false },
      ),
    ).toThrow(/'const' is not one of the 'enum' values beside it/);
  });
});
