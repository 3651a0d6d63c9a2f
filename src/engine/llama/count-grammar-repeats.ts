import type { GbnfJsonSchema } from "node-llama-cpp";
import { ownGrammarCosts } from "./patch-grammar-definitions.ts";

/**
 * What the length and count ranges of a converted schema (convert-json-schema-to-gbnf.ts) cost
 * llama.cpp's grammar parser, in repeats: node-llama-cpp writes each range as a GBNF repetition,
 * `x{m,n}`, and llama.cpp rewrites that into `m` copies of `x` and one rule of its own for each
 * of the `n - m` optional ones. Making those rules is what takes long (see maxGrammarRepeats in
 * schema-conversion-budget.ts), so a range counts its maximum: `minLength: 0, maxLength: 1000` is
 * 1000, `minItems: 3` alone (no maximum) is 3, one without bounds nothing. Copies cost a fortieth
 * of a rule, but counting them whole keeps the rule simple to state.
 *
 * - A string's range counts once per schema however many strings share it: node-llama-cpp names
 *   the rule by its bounds and writes it once.
 * - An array's range (its items beyond `prefixItems`) and a map's (`minProperties` to
 *   `maxProperties`) count every time they appear: their rules hold the items' rule and the
 *   nesting's whitespace, and are only shared where those are the same too.
 * - `$defs` are counted once each, where they are defined (a `$ref` is a rule's name); a
 *   pattern's grammar adds its own repetitions (see pattern-grammar.ts).
 */
export function countGrammarRepeats(schema: GbnfJsonSchema): number {
  let repeats = 0;
  const stringRanges = new Set<string>();
  // Each object once: the converter shares some (its "any value" schema), and so do the rules.
  const seen = new Set<object>();
  const pending: unknown[] = [schema];
  while (pending.length > 0) {
    const node = pending.pop();
    if (!isRecord(node) || seen.has(node)) continue;
    seen.add(node);
    if (node.type === "string") {
      const minimum = count(node.minLength) ?? 0;
      const maximum = count(node.maxLength);
      const key = `${minimum}:${maximum ?? ""}`;
      if (!stringRanges.has(key)) {
        stringRanges.add(key);
        repeats += rangeRepeats(minimum, maximum, 0);
      }
      repeats += ownGrammarCosts(node).repeats;
    } else if (node.type === "array") {
      const prefix = Array.isArray(node.prefixItems) ? node.prefixItems : [];
      repeats += rangeRepeats(count(node.minItems) ?? 0, count(node.maxItems), prefix.length);
      pending.push(node.items);
      for (const item of prefix) pending.push(item);
    } else if (node.type === "object") {
      repeats += rangeRepeats(count(node.minProperties) ?? 0, count(node.maxProperties), 0);
      if (isRecord(node.properties)) for (const name in node.properties) pending.push(node.properties[name]);
      pending.push(node.additionalProperties);
    }
    if (Array.isArray(node.oneOf)) for (const branch of node.oneOf) pending.push(branch);
    if (isRecord(node.$defs)) for (const name in node.$defs) pending.push(node.$defs[name]);
  }
  return repeats;
}

/** The repeats of a range of `minimum` to `maximum` (none: unbounded) beyond the `fixed` first ones. */
function rangeRepeats(minimum: number, maximum: number | undefined, fixed: number): number {
  return Math.max(0, (maximum ?? minimum) - fixed);
}

function count(value: unknown): number | undefined {
  return typeof value === "number" && Number.isFinite(value) ? Math.max(0, Math.floor(value)) : undefined;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
