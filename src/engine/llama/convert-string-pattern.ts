import type { GbnfJsonSchema } from "node-llama-cpp";
import { maxGrammarStacks } from "./check-grammar-stacks.ts";
import { patternGrammar, patternSpec } from "./pattern-grammar.ts";
import type { SchemaConversion } from "./schema-conversion.ts";
import type { Position } from "./schema-position.ts";

/**
 * A string that matches `pattern` (a string's own, or a format's: see format-patterns.ts) within
 * `minLength`/`maxLength`, as a definition of our own grammar (see pattern-grammar.ts), for a
 * local model's output grammar; `undefined` where the pattern cannot be written (lookarounds, backreferences, lengths that cannot be written with it
 * exactly), and the lengths alone are enforced, or where no grammar is written (an upstream model
 * gets the schema as sent and reads the pattern itself).
 */
export function convertStringPattern(
  conversion: SchemaConversion,
  written: {
    pattern: string;
    /** The keyword it comes from, for messages: `'pattern' "^a+$"`, `'format' 'email'`. */
    what: string;
  },
  minLength: number | undefined,
  maxLength: number | undefined,
  at: Position,
): GbnfJsonSchema | undefined {
  if (!conversion.grammarLimits) return undefined;
  const { pattern, what } = written;
  const grammar = patternGrammar(pattern, minLength, maxLength);
  switch (grammar.kind) {
    case "unsupported":
      return undefined;
    case "no-value": {
      const lengths =
        minLength === undefined && maxLength === undefined
          ? ""
          : ` of ${minLength ?? 0} to ${maxLength ?? "any number of"} characters`;
      return conversion.refuseNoValue(at, `its ${what} matches no string${lengths}, so no value can match.`);
    }
    case "too-large":
      return conversion.refuse(
        at,
        `its ${what} is too large for a local model's output grammar: ${grammar.problem}. Lower the count or simplify the repeated part, or remove the pattern.`,
      );
    case "grammar": {
      if (grammar.stacks > maxGrammarStacks)
        conversion.refuse(
          at,
          `its ${what} is too large for a local model's output grammar: it could keep ${grammar.stacks} ways open at once (alternatives, and repeats of parts whose length varies), more than the ${maxGrammarStacks} the grammar allows. Simplify the pattern, or remove it.`,
        );
      const loose = {
        type: "string",
        ...(minLength === undefined ? {} : { minLength }),
        ...(maxLength === undefined ? {} : { maxLength }),
      } as GbnfJsonSchema;
      return conversion.defineGrammar("pattern", loose, patternSpec(pattern, minLength, maxLength), at);
    }
  }
}
