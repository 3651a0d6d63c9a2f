import type { GbnfJsonSchema } from "node-llama-cpp";
import { cachedPatternGrammar, patternSpec } from "./pattern-grammar.ts";
import type { SchemaConversion } from "./schema-conversion.ts";
import type { Position } from "./schema-position.ts";

/**
 * A string that matches `pattern` (a string's own, or a format's: see format-patterns.ts) within
 * `minLength`/`maxLength`, as a definition of our own grammar (see pattern-grammar.ts), for a
 * local model's output grammar; `undefined` where the pattern cannot be written (lookarounds,
 * backreferences, lengths that cannot be written with it, a grammar more than llama.cpp takes or
 * follows quickly: see pattern-grammar.ts; the schema's patterns took long enough to analyse: see
 * schema-conversion-budget.ts's maxPatternWork) and the lengths alone are enforced, or where no grammar
 * is written (an upstream model gets the schema as sent and reads the pattern itself).
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
  const spec = patternSpec(pattern, minLength, maxLength);
  const grammar = conversion.budget.analysePattern(spec, () =>
    cachedPatternGrammar(pattern, minLength, maxLength),
  );
  switch (grammar?.kind) {
    case undefined:
    case "unsupported":
      return undefined;
    case "no-value": {
      const lengths =
        minLength === undefined && maxLength === undefined
          ? ""
          : ` of ${minLength ?? 0} to ${maxLength ?? "any number of"} characters`;
      return conversion.refuseNoValue(at, `its ${what} matches no string${lengths}, so no value can match.`);
    }
    case "grammar": {
      const loose = {
        type: "string",
        ...(minLength === undefined ? {} : { minLength }),
        ...(maxLength === undefined ? {} : { maxLength }),
      } as GbnfJsonSchema;
      return conversion.defineGrammar("pattern", loose, spec, at);
    }
  }
}
