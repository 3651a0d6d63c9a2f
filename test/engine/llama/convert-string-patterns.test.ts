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
import { createRandom } from "../../support/create-random.ts";
import { schemaGrammarMatcher, schemaRefusal } from "./schema-grammar-matcher.ts";

/** A string as the grammar writes it: JSON, with DEL escaped too (as node-llama-cpp's strings write it). */
function encode(value: string): string {
  return JSON.stringify(value).replaceAll("\u007f", "\\u007f");
}

const refusal = schemaRefusal;

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
      `^${"a".repeat(5000)}$`,
    ];
    for (const pattern of unwritable) {
      const accepts = await schemaGrammarMatcher({ type: "string", pattern, maxLength: 3 });
      expect(accepts('"zz"'), pattern).toBe(true);
      expect(accepts('"zzzz"'), pattern).toBe(false);
    }
  });

  it("refuses a pattern that is no regular expression, for every model, saying what is wrong (regression: let through unenforced)", () => {
    const malformed: [string, string][] = [
      ["^[z-a]$", "Range out of order in character class"],
      ["^a{2,1}$", "numbers out of order in {} quantifier"],
      ["(unclosed", "Unterminated group"],
      ["*a", "Nothing to repeat"],
    ];
    for (const [pattern, problem] of malformed)
      for (const grammarLimits of [true, false])
        expect(refusal({ type: "string", pattern }, grammarLimits), pattern).toBe(
          `Invalid JSON Schema in 'schema' at '#': 'pattern' is not a regular expression (ECMA-262): ${problem}.`,
        );
    // Escapes the u flag refuses and browsers take (pydantic writes "\\-") are patterns.
    expect(refusal({ type: "string", pattern: "^\\d{3}\\-\\d{4}$" })).toBeUndefined();
    expect(refusal({ type: "string", pattern: 5 })).toBe(
      "Invalid JSON Schema in 'schema' at '#': 'pattern' must be a string, not 5.",
    );
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
    // Two parts whose lengths vary: each repetition held to a count that keeps the longest
    // strings within maxLength (regression: the lengths alone, any string of 3).
    const apart = await schemaGrammarMatcher({ type: "string", pattern: "^a+b+$", maxLength: 3 });
    expect(apart('"ab"')).toBe(true);
    expect(apart('"zzz"')).toBe(false);
    expect(apart('"aabb"')).toBe(false);
    const address = await schemaGrammarMatcher({ type: "string", pattern: "^\\S+@\\S+$", maxLength: 40 });
    expect(address('"a@b"')).toBe(true);
    expect(address('"zz"')).toBe(false);
    expect(address(JSON.stringify(`${"a".repeat(20)}@${"b".repeat(20)}`))).toBe(false);
    // zod's .email().max(100): the format, within the length.
    const email = await schemaGrammarMatcher({ type: "string", format: "email", maxLength: 100 });
    expect(email('"a@b.co"')).toBe(true);
    expect(email('"zz"')).toBe(false);
    // A count beyond what a grammar writes, brought within it by the length.
    const long = await schemaGrammarMatcher({ type: "string", pattern: "^[a-z]{0,5000}$", maxLength: 100 });
    expect(long('"abc"')).toBe(true);
    expect(long(JSON.stringify("a".repeat(101)))).toBe(false);
    // Shortest strings shorter than minLength, and more than one varying part: the lengths alone.
    const short = await schemaGrammarMatcher({
      type: "string",
      pattern: "^a+b+$",
      minLength: 5,
      maxLength: 6,
    });
    expect(short('"zzzzz"')).toBe(true);
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

  it("leaves unenforced a pattern whose grammar llama.cpp would not take or would follow slowly", async () => {
    const tooLarge = [
      "^a{1001}$",
      "^(ab){0,1001}$",
      "^(\\w+\\s?){1,1000}$",
      "^((a|b)?c){1000}$",
      "^(.{1,1000}){1,1000}$",
      "^((a|b){1000}){1000}$",
      // Hundreds of stacks open at every character (regression: 15 s for 4 tokens of the tiny model).
      "^(?:[a-z]{0,40}){0,40}$",
      "^(?:\\w?\\w?\\w?\\w?){0,90}$",
      "^(a{1,2}b?){0,666}$",
      // A repeated part that may match nothing: 86 ms per 100 characters at 120 stacks, 10 times
      // what 200 stacks of a part that may not took.
      "^(?:\\w?\\w?){0,60}$",
      "^(?:a?a?){0,300}$",
    ];
    for (const pattern of tooLarge) {
      expect(patternGrammar(pattern, undefined, undefined).kind, pattern).toBe("unsupported");
      expect(refusal({ type: "string", pattern }), pattern).toBeUndefined();
      const accepts = await schemaGrammarMatcher({ type: "string", pattern });
      expect(accepts('"zz"'), pattern).toBe(true);
    }
    // What is taken, llama.cpp parses: at the bounds of its rules times the count.
    const llama = await getSharedLlama({ gpu: false });
    // A code no prefix of which is another's (abc, de) is followed with a stack or two, however long.
    const taken = [
      "^a{1000}$",
      "^(a+b){1,1000}$",
      "^((a)){1,1000}$",
      "^(a(b|c)?){666}$",
      "^(ab?){0,666}$",
      "^(abc|de){1000}$",
    ];
    for (const pattern of taken) {
      const grammar = patternGrammar(pattern, undefined, undefined);
      expect(grammar.kind, pattern).toBe("grammar");
      if (grammar.kind === "grammar") await llama.createGrammar({ grammar: `root ::= ${grammar.text}` });
    }
    for (const pattern of ["^(a+b?){1,1000}$", "^(a(b|c)?){667}$", "^(ab?){0,1001}$"])
      expect(patternGrammar(pattern, undefined, undefined).kind, pattern).toBe("unsupported");
  });

  it("writes a repeated part that may match nothing as one repetition, and parts that match only nothing not at all", async () => {
    // (a?){0,600} kept about 600 stacks open (26 s for 3 tokens); a{0,600} keeps one.
    const grammar = patternGrammar("^(?:a?){0,600}$", undefined, undefined);
    expect(grammar.kind === "grammar" && grammar.stacks).toBeLessThan(4);
    const accepts = await schemaGrammarMatcher({ type: "string", pattern: "^(?:a?){0,600}$" });
    expect(accepts('"aaa"')).toBe(true);
    expect(accepts('"b"')).toBe(false);
    // Regression: ""* and the like did not parse (400 "cannot be turned into a grammar").
    for (const pattern of [
      "^(?:a|)+$",
      "^(a|)*b$",
      "^x(?:)*$",
      "^(?:){3}$",
      "^(?:)?x$",
      "^(a{0})*$",
      "^(?:[]?)*$",
      "^(?:|)+$",
    ]) {
      const matcher = await schemaGrammarMatcher({ type: "string", pattern });
      const expression = new RegExp(pattern, "u");
      for (const value of ["", "a", "aa", "b", "ab", "x", "xx"])
        expect(matcher(JSON.stringify(value)), `${pattern} on ${value}`).toBe(expression.test(value));
    }
  });

  it("writes only the const and enum values its pattern matches (regression: 'blue' beside ^r)", async () => {
    const colours = await schemaGrammarMatcher({
      type: "string",
      enum: ["red", "rose", "blue"],
      pattern: "^r",
    });
    expect(colours('"red"')).toBe(true);
    expect(colours('"rose"')).toBe(true);
    expect(colours('"blue"')).toBe(false);
    expect(refusal({ type: "string", enum: ["blue", "green"], pattern: "^r" })).toMatch(
      /no value|none of|cannot/i,
    );
    expect(refusal({ type: "string", const: "blue", pattern: "^r" })).toMatch(/no value|none of|cannot/i);
    // Beside a pattern the grammar cannot write, and for an upstream model, values stay as listed.
    const unwritable = await schemaGrammarMatcher({
      type: "string",
      enum: ["red", "blue"],
      pattern: "^(?=r)",
    });
    expect(unwritable('"blue"')).toBe(true);
    expect(refusal({ type: "string", const: "blue", pattern: "^r" }, false)).toBeUndefined();
    // Run without backtracking: a value built to make a backtracking engine take seconds (or hang).
    const evil = { type: "string", enum: [`${"a".repeat(5000)}!`, "aa"], pattern: "^(a+)+$" };
    const evilMatcher = await schemaGrammarMatcher(evil);
    expect(evilMatcher('"aa"')).toBe(true);
    expect(evilMatcher(JSON.stringify(`${"a".repeat(5000)}!`))).toBe(false);
  });

  it("counts a pattern's alternatives and repeats in the schema's grammar limits", () => {
    // Each alone is within the limits (200 stacks at its start, which part at the first
    // character); eleven side by side keep more than 2000 open at once.
    const words = (letter: string) => ({
      type: "string",
      pattern: `^(${Array.from({ length: 200 }, (_, index) => `\\u{${(0x100 + index).toString(16)}}${letter}`).join("|")})$`,
    });
    const grammar = patternGrammar(words("a").pattern, undefined, undefined);
    expect(grammar.kind === "grammar" && grammar.stacks).toBe(200);
    const letters = [..."abcdefghijk"];
    expect(refusal({ anyOf: letters.slice(0, 9).map(words) })).toBeUndefined();
    expect(refusal({ anyOf: letters.map(words) })).toMatch(/more than 2000 alternatives open at once/);
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
