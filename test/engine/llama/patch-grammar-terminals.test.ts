import type { GbnfJsonSchema } from "node-llama-cpp";
import { describe, expect, it } from "vitest";
import { convertJsonSchemaToGbnf } from "../../../src/engine/llama/convert-json-schema-to-gbnf.ts";
import { getSharedLlama } from "../../../src/engine/llama/get-shared-llama.ts";
import { patchGrammarTerminals } from "../../../src/engine/llama/patch-grammar-terminals.ts";

/** The line of `grammar` that defines `rule`. */
function ruleLine(grammar: string, rule: string): string | undefined {
  return grammar.split("\n").find((line) => line.startsWith(`${rule} ::=`));
}

describe("JSON grammars after patchGrammarTerminals", () => {
  it("write safe integers and finite numbers: at most 15 integer digits, exponents of at most 2 digits", async () => {
    // Fails when a new node-llama-cpp moves or rewrites the rules: then look at the patch again.
    expect(await patchGrammarTerminals()).toBe(true);
    const llama = await getSharedLlama({ gpu: false });
    const grammar = await llama.createGrammarForJsonSchema({
      type: "object",
      properties: { count: { type: "integer" }, ratio: { type: "number" } },
    });
    expect(ruleLine(grammar.grammar, "integer-number-rule")).toBe(
      'integer-number-rule ::= "-"? ("0" | [1-9] [0-9]{0,14})',
    );
    expect(ruleLine(grammar.grammar, "fractional-number-rule")).toBe(
      'fractional-number-rule ::= "-"? ("0" | [1-9] [0-9]{0,15}) ("." [0-9]{1,16})? ([eE] [-+]? ("0" | [1-9] [0-9]?))?',
    );
    // The largest numbers the rules allow.
    expect(Number.isSafeInteger(JSON.parse("-999999999999999"))).toBe(true);
    expect(Number.isFinite(JSON.parse("9999999999999999.9999999999999999e+99"))).toBe(true);
  });

  it("bounds the numbers of the any-JSON-value rule too (json_object, parameters without a schema)", async () => {
    await patchGrammarTerminals();
    const llama = await getSharedLlama({ gpu: false });
    const grammar = await llama.createGrammarForJsonSchema({ type: "object", additionalProperties: true });
    expect(grammar.grammar).not.toContain("{0,15}))?");
    expect(ruleLine(grammar.grammar, "fractional-number-rule")).toContain('("0" | [1-9] [0-9]?))?');
  });
});

describe("date grammars after patchGrammarTerminals", () => {
  /** Every day of `year` and the days that do not exist (the 29th to 31st of every month). */
  function calendar(year: number): { real: string[]; unreal: string[] } {
    const real: string[] = [];
    const unreal: string[] = [];
    for (let month = 1; month <= 12; month++) {
      const days = new Date(Date.UTC(year, month, 0)).getUTCDate();
      for (let day = 1; day <= 31; day++) {
        const text = `${String(year).padStart(4, "0")}-${String(month).padStart(2, "0")}-${String(day).padStart(2, "0")}`;
        (day <= days ? real : unreal).push(text);
      }
    }
    return { real, unreal };
  }

  it("write only days that exist: each month its own, February 29 in leap years only (regression: 2023-02-31)", async () => {
    expect(await patchGrammarTerminals()).toBe(true);
    const llama = await getSharedLlama({ gpu: false });
    const grammar = await llama.createGrammarForJsonSchema({ type: "string", format: "date" });
    // The whole grammar matches a JSON string: test the dates inside quotes (node-llama-cpp's own
    // full-match check, internal to the pinned version).
    const accepts = (date: string) =>
      (grammar as unknown as { _testText(text: string): boolean })._testText(`"${date}"\n\n\n\n`);
    expect(accepts("2023-01-01")).toBe(true);
    for (const year of [1900, 2000, 2023, 2024, 2100, 2400, 1, 4, 96, 9996]) {
      const { real, unreal } = calendar(year);
      expect(real.filter((date) => !accepts(date))).toEqual([]);
      expect(unreal.filter((date) => accepts(date))).toEqual([]);
    }
  });
});

describe("time grammars after patchGrammarTerminals", () => {
  /** The grammar of a converted schema with a `date-time` and a `time`, and what it takes whole. */
  async function timesGrammar() {
    expect(await patchGrammarTerminals()).toBe(true);
    const llama = await getSharedLlama({ gpu: false });
    const converted = convertJsonSchemaToGbnf(
      {
        type: "object",
        properties: { when: { type: "string", format: "date-time" }, at: { type: "string", format: "time" } },
        required: ["when", "at"],
        additionalProperties: false,
      },
      { param: "schema" },
    );
    const grammar = await llama.createGrammarForJsonSchema<GbnfJsonSchema>(converted);
    const accepts = (when: string, at: string) =>
      (grammar as unknown as { _testText(text: string): boolean })._testText(
        `${JSON.stringify({ when, at })}\n\n\n\n`,
      );
    return { grammar, accepts };
  }

  it("write a date-time in UTC with Z and a time without a zone, as zod reads them (regression: offsets it refuses)", async () => {
    const { accepts } = await timesGrammar();
    expect(accepts("2025-12-31T18:00:00Z", "18:00:00")).toBe(true);
    expect(accepts("2025-12-31T18:00:00.123Z", "23:59:59.999")).toBe(true);
    expect(accepts("2025-12-31T18:00:00+02:00", "18:00:00")).toBe(false);
    expect(accepts("2025-12-31T18:00:00", "18:00:00")).toBe(false);
    expect(accepts("2025-02-30T18:00:00Z", "18:00:00")).toBe(false);
    expect(accepts("2025-12-31T18:00:00Z", "18:00:00Z")).toBe(false);
    expect(accepts("2025-12-31T18:00:00Z", "18:00:00-05:00")).toBe(false);
    expect(accepts("2025-12-31T18:00:00Z", "24:00:00")).toBe(false);
  });

  it("pass node-llama-cpp's own check of a value (which LlamaChat runs on tool-call arguments)", async () => {
    // Regression: a `time` without a zone failed it ("Expected a valid time string").
    const { grammar } = await timesGrammar();
    const value = { when: "2025-12-31T18:00:00Z", at: "18:00:00" };
    expect(grammar.parse(JSON.stringify(value))).toEqual(value);
  });
});

describe("literal string grammars after patchGrammarTerminals", () => {
  const values = ["\u0001", "\b\f", "tab\there", '"\\', "\u001f\r\n", "lone \ud800", "\u007f\u2028"];
  const schema: GbnfJsonSchema = {
    type: "object",
    properties: { sep: { enum: values }, "key\u0002": { const: "\u0003" } },
    required: ["sep", "key\u0002"],
    additionalProperties: false,
  };

  /** Whether the grammar takes `text` as a whole (node-llama-cpp's check, with its four newlines). */
  function accepts(grammar: unknown, text: string): boolean {
    return (grammar as { _testText(text: string): boolean })._testText(`${text}\n\n\n\n`);
  }

  // Regression: "\u0001", "\b" and "\f" came out raw inside the JSON string, which JSON.parse refuses.
  it("write enum and const values and property names as their JSON text, control characters escaped", async () => {
    expect(await patchGrammarTerminals()).toBe(true);
    const llama = await getSharedLlama({ gpu: false });
    const grammar = await llama.createGrammarForJsonSchema(schema);
    // Lines are the only control characters left in the grammar text.
    expect([...grammar.grammar].filter((character) => character < " " && character !== "\n")).toEqual([]);
    for (const value of values) {
      const json = JSON.stringify({ sep: value, "key\u0002": "\u0003" });
      expect(accepts(grammar, json), json).toBe(true);
      expect(JSON.parse(json)).toEqual({ sep: value, "key\u0002": "\u0003" });
    }
    // The raw control characters, as the shipped grammar let them out, are not JSON and not allowed.
    expect(accepts(grammar, '{"sep":"\u0001","key\\u0002":"\\u0003"}')).toBe(false);
    expect(accepts(grammar, '{"sep":"\\u0001","key\u0002":"\\u0003"}')).toBe(false);
    expect(accepts(grammar, '{"sep":"\b\f","key\\u0002":"\\u0003"}')).toBe(false);
    // Other writings of the same value are not either: exactly one text per value.
    expect(accepts(grammar, '{"sep":"\\u0008\\f","key\\u0002":"\\u0003"}')).toBe(false);
  });

  // Regression: llama.cpp reads the grammar text as a C string, so a NUL cut it short and the
  // schema was refused with a message about `$ref` cycles.
  it("write a NUL as \\u0000, never into the grammar text", async () => {
    expect(await patchGrammarTerminals()).toBe(true);
    const llama = await getSharedLlama({ gpu: false });
    const grammar = await llama.createGrammarForJsonSchema({ enum: ["a\u0000b", "\u0000"] });
    expect(grammar.grammar).not.toContain("\u0000");
    expect(accepts(grammar, '"a\\u0000b"')).toBe(true);
    expect(accepts(grammar, '"\\u0000"')).toBe(true);
  });
});
