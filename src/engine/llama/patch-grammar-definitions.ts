import type { GbnfJsonSchema } from "node-llama-cpp";
import { decimalRangeGrammar } from "./decimal-range-grammar.ts";
import { integerRangeGrammar } from "./integer-range-grammar.ts";
import { readPatternSpec } from "./pattern-grammar.ts";

/**
 * The key of a `$defs` schema whose grammar the conversion writes itself (see
 * convert-typed-schema.ts): a string's `format: "uuid"` or `pattern`, a number's range.
 * node-llama-cpp's schema subset has no word for these, and its grammar classes see neither the
 * format nor the bounds, except a `$ref`'s, which sees the schema it points at. Its value names
 * the grammar (`uuid`, `integer -50 50`, `pattern 0 20 ^[a-z]+$`): it is part of the schema's JSON,
 * so grammars are cached apart (by that JSON, see create-grammar-cache.ts), and a chat template
 * that writes a tool's parameters as JSON writes these few characters (a pattern whole), not the
 * grammar.
 */
export const ownGrammarKey = "x-tollgate-grammar";

/**
 * A UUID as the strictest readers of JSON Schema's `uuid` format take it: hex digits in groups of
 * 8, 4, 4, 4 and 12, lowercase (RFC 9562's canonical form), a version of 1 to 8 and the RFC's
 * variant (8, 9, a or b). The format itself allows either case and any version, as llama.cpp's
 * grammar writes it; but zod 4's `z.uuid()` (the AI SDK's and the openai SDK's schemas) refuses
 * other versions and variants, and a model writing a digit at random passed it 0 times in 6. What
 * this writes every reader takes (zod 3 and 4, ajv, pydantic).
 */
const uuidGrammar = [
  '"\\""',
  "[0-9a-f]{8}",
  '"-"',
  "[0-9a-f]{4}",
  '"-"',
  "[1-8] [0-9a-f]{3}",
  '"-"',
  "[89ab] [0-9a-f]{3}",
  '"-"',
  "[0-9a-f]{12}",
  '"\\""',
].join(" ");

/** A time of day without a zone, to the millisecond or not; a `date-time`'s adds `Z` (patch-grammar-terminals.ts). */
export const boundedTimeRule = '([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{3} )?';

/**
 * What the grammar spelled `spec` matches (`uuid`, `time`, `integer MIN MAX`, `decimal LOW HIGH DIGITS`,
 * `pattern MIN MAX REGEX`): a GBNF expression, or `undefined`.
 */
export function ownGrammarText(spec: string): string | undefined {
  if (spec === "uuid") return uuidGrammar;
  if (spec === "time") return `"\\"" ${boundedTimeRule} "\\""`;
  if (spec.startsWith("pattern ")) return readPatternSpec(spec)?.text;
  const decimal = /^decimal (-?\d{1,31}) (-?\d{1,31}) (\d{1,2})$/.exec(spec);
  if (decimal !== null) {
    const [low, high, fractionDigits] = [
      BigInt(decimal[1] ?? ""),
      BigInt(decimal[2] ?? ""),
      Number(decimal[3]),
    ];
    return low <= high && fractionDigits <= 14
      ? decimalRangeGrammar({ low, high, fractionDigits })
      : undefined;
  }
  const range = /^integer (-?\d{1,15}) (-?\d{1,15})$/.exec(spec);
  if (range === null) return undefined;
  const [minimum, maximum] = [Number(range[1]), Number(range[2])];
  return minimum <= maximum ? integerRangeGrammar(minimum, maximum) : undefined;
}

/**
 * What the grammar a converted schema node names (a `$defs` schema of {@link ownGrammarDefinition})
 * costs beyond what its loose schema shows: the parse stacks it keeps open at once, at most, and the
 * repeats of its repetitions (see check-grammar-stacks.ts and count-grammar-repeats.ts). A pattern's
 * grammar has its own alternatives and repetitions; the others are counted as the number or string
 * they are.
 */
export function ownGrammarCosts(node: Record<string, unknown>): { stacks: number; repeats: number } {
  const spec = node[ownGrammarKey];
  const pattern = typeof spec === "string" && spec.startsWith("pattern ") ? readPatternSpec(spec) : undefined;
  return pattern === undefined
    ? { stacks: 1, repeats: 0 }
    : { stacks: pattern.stacks, repeats: pattern.repeats };
}

/**
 * A `$defs` schema that node-llama-cpp writes as the grammar `spec` names once patched (see
 * {@link patchGrammarDefinitions}). `loose` beside it is what node-llama-cpp's own checks read (it
 * validates a tool call's arguments against the schema: a `uuid` format it does not know would
 * fail them all), and the grammar where the patch is not applied: a looser one.
 */
export function ownGrammarDefinition(loose: GbnfJsonSchema, spec: string): GbnfJsonSchema {
  const definition: Record<string, unknown> = { ...loose, [ownGrammarKey]: spec };
  return definition as GbnfJsonSchema;
}

interface GbnfRefClass {
  prototype: {
    def: unknown;
    defName: string;
    generateRuleName(generator: unknown): string;
  };
}

interface GrammarGenerator {
  rules: Map<string, string | null>;
  ruleContentToRuleName: Map<string, string>;
  generateRuleNameForDef(defName: string, def: unknown): string;
}

/**
 * Makes node-llama-cpp's `$ref` terminal write the grammar a definition names under
 * {@link ownGrammarKey} as the definition's rule, for every JSON grammar (ours through
 * create-json-grammar.ts, LlamaChat's for function parameters). Answers whether it could.
 */
export async function patchGrammarDefinitions(): Promise<boolean> {
  const { GbnfRef } = (await import(
    new URL("./utils/gbnfJson/terminals/GbnfRef.js", import.meta.resolve("node-llama-cpp")).href
  )) as { GbnfRef: GbnfRefClass };
  const original = GbnfRef.prototype.generateRuleName;
  if (typeof original !== "function") return false;
  if ((original as { ownGrammar?: boolean }).ownGrammar === true) return true;
  const generateRuleName = function generateRuleName(
    this: GbnfRefClass["prototype"],
    generator: GrammarGenerator,
  ): string {
    const spec =
      typeof this.def === "object" && this.def !== null
        ? (this.def as Record<string, unknown>)[ownGrammarKey]
        : undefined;
    const grammar = typeof spec === "string" ? ownGrammarText(spec) : undefined;
    if (grammar === undefined) return original.call(this, generator);
    const name = generator.generateRuleNameForDef(this.defName, this.def);
    if (!generator.rules.has(name)) {
      generator.rules.set(name, grammar);
      generator.ruleContentToRuleName.set(grammar, name);
    }
    return name;
  };
  GbnfRef.prototype.generateRuleName = Object.assign(generateRuleName, { ownGrammar: true });
  return true;
}
