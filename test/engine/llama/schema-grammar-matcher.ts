import { expect } from "vitest";
import { convertJsonSchemaToGbnf } from "../../../src/engine/llama/convert-json-schema-to-gbnf.ts";
import { createJsonGrammar } from "../../../src/engine/llama/create-json-grammar.ts";
import { getSharedLlama } from "../../../src/engine/llama/get-shared-llama.ts";
import { patchGrammarTerminals } from "../../../src/engine/llama/patch-grammar-terminals.ts";
import { AppError } from "../../../src/errors/app-error.ts";

/** Whether the grammar llama.cpp parses for `schema` (converted as for a request) takes `text` whole. */
export async function schemaGrammarMatcher(schema: unknown): Promise<(text: string) => boolean> {
  expect(await patchGrammarTerminals()).toBe(true);
  const llama = await getSharedLlama({ gpu: false });
  const grammar = await createJsonGrammar(llama, convertJsonSchemaToGbnf(schema, { param: "schema" }));
  return (text) => (grammar as unknown as { _testText(text: string): boolean })._testText(text);
}

/** The integers of -`bound` to `bound` that the grammar of `schema` takes and `inRange` does not, or the reverse. */
export async function wrongIntegers(
  schema: unknown,
  inRange: (value: number) => boolean,
  bound: number,
): Promise<number[]> {
  const accepts = await schemaGrammarMatcher(schema);
  const wrong: number[] = [];
  for (let value = -bound; value <= bound; value++)
    if (accepts(String(value)) !== inRange(value)) wrong.push(value);
  return wrong;
}

/** The message of the 400 that refuses `schema` (converted as for a request), or `undefined` if it is taken. */
export function schemaRefusal(schema: unknown, grammarLimits = true): string | undefined {
  try {
    convertJsonSchemaToGbnf(schema, { param: "schema", grammarLimits });
    return undefined;
  } catch (error) {
    expect(error).toBeInstanceOf(AppError);
    return (error as AppError).message;
  }
}
