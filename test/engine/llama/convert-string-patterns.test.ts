/**
 * A string's `pattern` in a local model's output grammar (pattern-grammar.ts): the grammar llama.cpp
 * builds takes a JSON string exactly when the pattern matches its value, checked against the
 * regular expression itself (JavaScript's, with the `u` flag) on hand-picked and random strings.
 */
import { describe, expect, it } from "vitest";
import { convertJsonSchemaToGbnf } from "../../../src/engine/llama/convert-json-schema-to-gbnf.ts";
import { countGrammarRepeats } from "../../../src/engine/llama/count-grammar-repeats.ts";
import { getSharedLlama } from "../../../src/engine/llama/get-shared-llama.ts";
import { patternGrammar } from "../../../src/engine/llama/pattern-grammar.ts";
import { spendGrammarRepeats } from "../../../src/engine/llama/schema-conversion-budget.ts";
import { AppError } from "../../../src/errors/app-error.ts";
import { createRandom } from "../../support/create-random.ts";
import { schemaGrammarMatcher } from "./schema-grammar-matcher.ts";

/** A string as the grammar writes it: JSON, with DEL escaped too (as node-llama-cpp's strings write it). */
function encode(value: string): string {
  return JSON.stringify(value).replaceAll("\u007f", "\\u007f");
}

function refusal(schema: unknown, grammarLimits = true): string | undefined {
  try {
    convertJsonSchemaToGbnf(schema, { param: "schema", grammarLimits });
    return undefined;
  } catch (error) {
    expect(error).toBeInstanceOf(AppError);
    return (error as AppError).message;
  }
}

/** Each pattern, with strings it matches (random ones seldom do). */
const patterns: [string, string[]][] = [
  ["^\\d{3}-\\d{4}$", ["555-1234", "000-0000"]],
  ["^[a-z]+$", ["a", "zebra"]],
  ["ab", ["ab", "xxaby", 'q"ab\n']],
  ["^(red|green|blue)$", ["red", "green", "blue"]],
  ["^[^a]*$", ["", "bcd", 'q"\\\n\u0001\u007f😀']],
  ["^.$", ["x", "é", "😀", '"']],
  ["^a?b*c{2,3}$", ["cc", "abbccc", "bccc"]],
  ["^\\S+@\\S+\\.\\w{2,}$", ["a@b.cd", "x.y@example.org"]],
  ['^[\\u0000-\\u001f"\\\\]+$', ['\u0000\u001f"\\', "\n\t\b\f\r"]],
  ["^(?:ab|a)(?:bc|c)$", ["abc", "abbc", "ac"]],
  ["^$", [""]],
  ["^[]$|^x$", ["x"]],
  ["^\\u{1F600}\\x41\\cJ$", ["😀A\n"]],
  ["^[A-Z][a-z]*(?: [A-Z][a-z]*)*$", ["Ada", "Ada Lovelace", "A B"]],
  ["x$", ["x", "abx"]],
  ["^x", ["x", "xab"]],
  ["^a|b$", ["a", "abc", "cb", "b"]],
  ["[\\d\\s-]", ["1", " ", "a-b"]],
  ["^\\w+(?<ext>\\.\\w+)?$", ["file", "file.txt"]],
  ["^a+?b{1,}?$", ["ab", "aabb"]],
  ["^\\.\\*\\+\\?\\(\\)\\[\\]\\{\\}\\|\\/\\^\\$$", [".*+?()[]{}|/^$"]],
  ["^[\\w.+-]+$", ["a.b+c-d_e"]],
  ["^[^\\d\\s]{2}$", ["ab", "é😀", '"\\']],
  ["^(\\d{1,3}\\.){3}\\d{1,3}$", ["192.168.0.1", "1.2.3.4"]],
];

/** Letters random strings are made of: those of the patterns, and the ones JSON escapes. */
const alphabet = [...'abcxyzAZé😀0159-_.@ "\\\n\t\u0001\u007f+*()[]{}|/^$'];

describe("a string's pattern in the output grammar", () => {
  it.each(patterns)(
    "takes exactly the strings %s matches (regression: any string)",
    async (pattern, matching) => {
      const accepts = await schemaGrammarMatcher({ type: "string", pattern });
      const expression = new RegExp(pattern, "u");
      const random = createRandom(pattern.length);
      const strings = [...matching];
      for (let index = 0; index < 400; index++) {
        let text = "";
        for (let length = random(9); length > 0; length--) text += alphabet[random(alphabet.length)];
        strings.push(text);
      }
      for (const value of matching) expect(expression.test(value), value).toBe(true);
      const wrong = strings.filter((value) => accepts(encode(value)) !== expression.test(value));
      expect(wrong).toEqual([]);
      // A string the pattern matches is written one way: an escape where JSON has a plain character is not.
      if (matching.includes("a")) expect(accepts('"\\u0061"')).toBe(false);
    },
  );

  it("holds inside objects, arrays and alternatives, and shares one rule between equal patterns", async () => {
    const code = { type: "string", pattern: "^[A-Z]{2}\\d{3}$" };
    const accepts = await schemaGrammarMatcher({
      type: "object",
      properties: {
        code,
        codes: { type: "array", items: code },
        either: { anyOf: [code, { type: "null" }] },
      },
      required: ["code", "codes", "either"],
    });
    expect(accepts('{"code": "AB123", "codes": ["CD456"], "either": null}')).toBe(true);
    expect(accepts('{"code": "AB123", "codes": [], "either": "EF789"}')).toBe(true);
    expect(accepts('{"code": "ab123", "codes": [], "either": null}')).toBe(false);
    expect(accepts('{"code": "AB123", "codes": ["CD45"], "either": null}')).toBe(false);
    expect(accepts('{"code": "AB123", "codes": [], "either": "E"}')).toBe(false);
    const converted = JSON.stringify(
      convertJsonSchemaToGbnf({ type: "object", properties: { a: code, b: code } }, { param: "schema" }),
    );
    expect(converted.match(/x-tollgate-grammar/g)).toHaveLength(1);
  });

  it("leaves a pattern it cannot write unenforced, its lengths enforced", async () => {
    const unwritable = [
      "^(?=a)\\w+$",
      "^(?!a)\\w+$",
      "(?<=a)b",
      "^(a)\\1$",
      "\\bword\\b",
      "^\\p{L}+$",
      "a^b",
      "^(a$)",
      "^[z-a]$",
      "^a{2,1}$",
      "(unclosed",
      `^${"a".repeat(5000)}$`,
    ];
    for (const pattern of unwritable) {
      const accepts = await schemaGrammarMatcher({ type: "string", pattern, maxLength: 3 });
      expect(accepts('"zz"'), pattern).toBe(true);
      expect(accepts('"zzzz"'), pattern).toBe(false);
    }
  });

  it("writes the lengths beside a pattern into it where they can be written exactly", async () => {
    const letters = await schemaGrammarMatcher({
      type: "string",
      pattern: "^[a-z]+$",
      minLength: 2,
      maxLength: 5,
    });
    for (const [value, taken] of [
      ["ab", true],
      ["abcde", true],
      ["a", false],
      ["abcdef", false],
      ["aB", false],
    ] as const)
      expect(letters(encode(value)), value).toBe(taken);
    // The one part whose length varies repeats two characters at a time: 4 + 2k characters.
    const pairs = await schemaGrammarMatcher({
      type: "string",
      pattern: "^#(ab)*-x$",
      minLength: 5,
      maxLength: 8,
    });
    for (const [value, taken] of [
      ["#ab-x", true],
      ["#abab-x", true],
      ["#-x", false],
      ["#ababab-x", false],
    ] as const)
      expect(pairs(encode(value)), value).toBe(taken);
    // Every string the pattern matches is within them: the pattern alone.
    const digits = await schemaGrammarMatcher({
      type: "string",
      pattern: "^\\d{3}$",
      minLength: 1,
      maxLength: 10,
    });
    expect(digits('"123"')).toBe(true);
    expect(digits('"12"')).toBe(false);
    // Two parts whose lengths vary: not written together, so the lengths alone (as before).
    const apart = await schemaGrammarMatcher({ type: "string", pattern: "^a+b+$", maxLength: 3 });
    expect(apart('"zzz"')).toBe(true);
    expect(apart('"aabb"')).toBe(false);
  });

  it("refuses a pattern no string matches, and leaves such an anyOf branch out", () => {
    expect(refusal({ type: "string", pattern: "^\\d{3}$", maxLength: 2 })).toBe(
      `Invalid JSON Schema in 'schema' at '#': its 'pattern' "^\\\\d{3}$" matches no string of 0 to 2 characters, so no value can match.`,
    );
    expect(refusal({ type: "string", pattern: "^[a-z]+$", minLength: 3, maxLength: 2 })).toMatch(
      /'minLength' 3 is above 'maxLength' 2|minLength/,
    );
    expect(refusal({ type: "string", pattern: "[]" })).toMatch(
      /its 'pattern' "\[\]" matches no string, so no value/,
    );
    expect(
      convertJsonSchemaToGbnf(
        { anyOf: [{ type: "string", pattern: "^[]$" }, { type: "integer" }] },
        { param: "schema" },
      ),
    ).toEqual({ type: "integer" });
  });

  it("refuses a pattern larger than llama.cpp's grammar parser takes, only for a local model", async () => {
    const tooLarge = [
      "^a{1001}$",
      "^(ab){0,1001}$",
      "^(\\w+\\s?){1,1000}$",
      "^((a|b)?c){1000}$",
      "^(.{1,1000}){1,1000}$",
      "^(abc|de){1000}$",
    ];
    for (const pattern of tooLarge) {
      expect(refusal({ type: "string", pattern }), pattern).toMatch(
        /^Invalid JSON Schema in 'schema' at '#': its 'pattern' ".*" is too large for a local model's output grammar: /,
      );
      expect(refusal({ type: "string", pattern }, false), pattern).toBeUndefined();
    }
    // What is taken, llama.cpp parses: at the bounds of its rules times the count.
    const llama = await getSharedLlama({ gpu: false });
    const taken = [
      "^a{1000}$",
      "^(a+b){1,1000}$",
      "^((a)){1,1000}$",
      "^(a(b|c)?){666}$",
      "^(a{1,2}b?){0,666}$",
      "^((a|b){1000}){1000}$",
    ];
    for (const pattern of taken) {
      const grammar = patternGrammar(pattern, undefined, undefined);
      expect(grammar.kind, pattern).toBe("grammar");
      if (grammar.kind === "grammar") await llama.createGrammar({ grammar: `root ::= ${grammar.text}` });
    }
    for (const pattern of ["^(a+b?){1,1000}$", "^(a(b|c)?){667}$", "^(a{1,2}b?){0,667}$"])
      expect(patternGrammar(pattern, undefined, undefined).kind, pattern).toBe("too-large");
  });

  it("counts a pattern's alternatives and repeats in the schema's grammar limits", () => {
    // Each alone is within the limits; three side by side keep more than 2000 stacks open at once.
    const wide = (letter: string) => ({ type: "string", pattern: `^(${letter}bc|${letter}e){150}$` });
    const grammar = patternGrammar("^(abc|ae){150}$", undefined, undefined);
    expect(grammar.kind === "grammar" && grammar.stacks).toBeGreaterThan(700);
    expect(refusal(wide("a"))).toBeUndefined();
    expect(refusal({ anyOf: [wide("a"), wide("b"), wide("c")] })).toMatch(
      /more than 2000 alternatives open at once/,
    );
    // 51 strings whose patterns repeat 1000 times each: past the 50,000 repeats of one schema.
    const properties = Object.fromEntries(
      Array.from({ length: 51 }, (_, index) => [
        `s${index}`,
        { type: "string", pattern: `^${index}x{0,1000}$` },
      ]),
    );
    const converted = convertJsonSchemaToGbnf({ type: "object", properties }, { param: "schema" });
    expect(countGrammarRepeats(converted)).toBe(51_000);
    expect(() => spendGrammarRepeats(converted, "schema")).toThrow(/add up to more than 50000 repeats/);
  });
});
