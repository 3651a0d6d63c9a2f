import { charactersGrammar, type Expression, group, sum } from "./gbnf-expression.ts";
import { parseRegexPattern, type RegexNode } from "./parse-regex-pattern.ts";
import { countOpenPositions } from "./pattern-open-positions.ts";
import {
  capRepeats,
  largestCount,
  lengthsOf,
  repeatsEmptyPart,
  repeatsOf,
  wholeStringTree,
} from "./regex-node-shape.ts";

/**
 * What a string's `pattern` (with its `minLength`/`maxLength`) becomes in a local model's output
 * grammar:
 * - `grammar`: a GBNF expression for the JSON string (quotes included) whose value the pattern
 *   matches, within the lengths; `stacks` bounds the parse stacks it keeps open at once (see
 *   pattern-open-positions.ts, and check-grammar-stacks.ts, which counts them in the schema's)
 *   and `repeats` what its repetitions cost (see count-grammar-repeats.ts).
 * - `unsupported`: the pattern uses what a grammar cannot write (see parse-regex-pattern.ts), is
 *   longer than {@link maxPatternCharacters}, its lengths and the lengths beside it cannot be
 *   written together, or its grammar would be more than llama.cpp takes or can follow quickly
 *   (a count above {@link maxPatternRepetitions}, more open stacks than {@link maxPatternStacks},
 *   a repeated part that may match nothing: see regex-node-shape.ts);
 *   the lengths alone are enforced, as before patterns were.
 * - `no-value`: no string matches the pattern within the lengths.
 */
export type PatternGrammar = (
  | { kind: "grammar"; text: string; stacks: number; repeats: number }
  | { kind: "unsupported" }
  | { kind: "no-value" }
) & {
  /**
   * What working it out took: reading the pattern ({@link readingWorkPerCharacter} a character)
   * and the steps of its automaton where it was built (see pattern-open-positions.ts). What a
   * request's patterns may spend together is bounded (schema-conversion-budget.ts's maxPatternWork).
   */
  work: number;
};

/**
 * The largest count a quantifier may have in the grammar: llama.cpp's parser refuses a repetition
 * much beyond (see check-schema-keywords.ts), and lengths have the same bound.
 */
export const maxPatternRepetitions = 1000;

/**
 * The most parse stacks a pattern's grammar may keep open at once after its first character.
 * Unlike an `enum`'s, which part after a character or two, a pattern's may stay open for every
 * character of the string, and llama.cpp walks each for every token of the vocabulary: `(a?){0,600}`
 * written as it was kept about 600 and took 26 s for 3 tokens of the tiny model, 200 took 9 ms per
 * 100 characters of its 569-token vocabulary (real ones are 50 to 250 times larger). Real patterns
 * keep 1 to 8 (the formats here at most 8). At the start, alternatives may open as many as an
 * `enum`'s values: they part at the first character.
 */
export const maxPatternStacks = 64;

/** The most stacks a pattern's alternatives may open at its start: an `enum`'s (check-grammar-stacks.ts's maxGrammarStacks). */
const maxPatternStartStacks = 2000;

/**
 * The longest pattern written into a grammar. Real ones are far shorter (an e-mail address's
 * strictest is about 6 KB; most are under 100 characters); a longer one is left to the lengths, as
 * before patterns were enforced, rather than refused: its grammar would pass the schema's character
 * budget, and a tool's documented parameters would carry it.
 */
export const maxPatternCharacters = 4096;

/**
 * What reading a pattern costs, per character, in the automaton's units of work (see
 * {@link PatternGrammar}'s `work`): parsing it and fitting its lengths (a binary search of caps,
 * each a walk of the tree) took 4 µs a character for a pattern of 4000 beside `maxLength`, where
 * a unit of the automaton's work takes 0.15 to 0.4.
 */
export const readingWorkPerCharacter = 16;

export function patternGrammar(
  pattern: string,
  minLength: number | undefined,
  maxLength: number | undefined,
): PatternGrammar {
  if (pattern.length > maxPatternCharacters) return { kind: "unsupported", work: 0 };
  // Reading the pattern and fitting its lengths walk its tree a dozen times or so.
  const reading = pattern.length * readingWorkPerCharacter;
  const unsupported: PatternGrammar = { kind: "unsupported", work: reading };
  const parsed = parseRegexPattern(pattern);
  if (parsed === undefined) return unsupported;
  const tree = wholeStringTree(parsed);
  if (tree === undefined) return { kind: "no-value", work: reading };
  const fitted = fitLengths(tree, minLength ?? 0, maxLength ?? Infinity);
  if (fitted === "no-value") return { kind: "no-value", work: reading };
  if (fitted === "unsupported" || largestCount(fitted) > maxPatternRepetitions || repeatsEmptyPart(fitted))
    return unsupported;
  let body: Expression;
  try {
    body = nodeGrammar(fitted);
  } catch (error) {
    if (error instanceof TooManyRules) return unsupported;
    throw error;
  }
  const { stacks, work } = countOpenPositions(fitted, {
    start: maxPatternStartStacks,
    later: maxPatternStacks,
  });
  if (stacks === undefined) return { kind: "unsupported", work: reading + work };
  return {
    kind: "grammar",
    text: `"\\"" ${body.text} "\\""`,
    stacks,
    repeats: repeatsOf(fitted),
    work: reading + work,
  };
}

/**
 * `tree` restricted to strings of `minLength` to `maxLength` characters, where that can be written:
 * - as it is, when every string it matches has such a length;
 * - exactly, when the one part of it whose length varies repeats an item of fixed length
 *   (`^[a-z]+$`, `^#\d*-x$`), whose count then carries the lengths;
 * - in part, when its shortest strings are long enough: every repetition is held to a count that
 *   keeps its longest strings short enough (`^\S+@\S+$` beside `maxLength: 40` writes
 *   `\S{1,19}@\S{1,19}`), so what is written matches both, though not every such string is written.
 */
function fitLengths(
  tree: RegexNode,
  minLength: number,
  maxLength: number,
): RegexNode | "unsupported" | "no-value" {
  const [low, high] = lengthsOf(tree);
  if (low >= minLength && high <= maxLength) return tree;
  if (low > maxLength || high < minLength) return "no-value";
  const items = tree.kind === "sequence" ? tree.items : [tree];
  const varying = items.filter((item) => {
    const [itemLow, itemHigh] = lengthsOf(item);
    return itemLow !== itemHigh;
  });
  const [part] = varying;
  if (varying.length === 1 && part !== undefined && part.kind === "repeat") {
    const [width, widthHigh] = lengthsOf(part.item);
    if (width === widthHigh && width > 0) {
      const fixed = items.reduce((total, item) => (item === part ? total : total + lengthsOf(item)[0]), 0);
      const min = Math.max(part.min, Math.ceil((minLength - fixed) / width));
      const max = Math.min(part.max ?? Infinity, Math.floor((maxLength - fixed) / width));
      if (min > max) return "no-value";
      const repeat: RegexNode = { ...part, min, max: max === Infinity ? undefined : max };
      return { kind: "sequence", items: items.map((item) => (item === part ? repeat : item)) };
    }
  }
  if (low < minLength || !Number.isFinite(maxLength)) return "unsupported";
  // The largest cap on every repetition's count that keeps the longest strings within maxLength.
  let [fits, tooLong] = [-1, maxLength + 1];
  while (tooLong - fits > 1) {
    const cap = Math.floor((fits + tooLong) / 2);
    if (lengthsOf(capRepeats(tree, cap))[1] <= maxLength) fits = cap;
    else tooLong = cap;
  }
  return fits < 0 ? "unsupported" : capRepeats(tree, fits);
}

/**
 * The most rules a repetition may repeat, times its count: llama.cpp's parser refuses a grammar
 * where a repeated group's rules (at least one) times the repetition's largest count passes 2000
 * ("number of rules that are going to be repeated multiplied by the new repetition exceeds sane
 * defaults"), measured: `("a"+ "b"){1,1000}` parses, `{1,1001}` does not.
 */
const maxRepeatedRules = 2000;

/** Where a repetition writes more rules than llama.cpp's parser takes. */
class TooManyRules extends Error {}

function nodeGrammar(node: RegexNode): Expression {
  switch (node.kind) {
    case "chars":
      return charactersGrammar(node.ranges);
    case "sequence": {
      // Parts a cap left empty (`x{0,0}`) write nothing.
      const items = node.items.map(nodeGrammar).filter(({ text }) => text !== '""');
      if (items.length === 0) return { text: '""', rules: 0 };
      return { text: items.map(({ text }) => text).join(" "), rules: sum(items.map(({ rules }) => rules)) };
    }
    case "alternatives":
      return group(node.options.map(nodeGrammar));
    case "repeat": {
      // Simplified (regex-node-shape.ts): the item matches something other than the empty string.
      const { min, max } = node;
      if (max === 0) return { text: '""', rules: 0 };
      const item = group([nodeGrammar(node.item)]);
      const largest = max ?? (min === 0 ? 1 : min);
      if (Math.max(1, item.rules) * largest > maxRepeatedRules) throw new TooManyRules();
      const repeated = (text: string, optional: number) => ({ text, rules: item.rules + optional });
      if (min === 1 && max === 1) return item;
      if (min === 0 && max === 1) return repeated(`${item.text}?`, 1);
      if (min === 0 && max === undefined) return repeated(`${item.text}*`, 1);
      if (min === 1 && max === undefined) return repeated(`${item.text}+`, 1);
      if (max === undefined) return repeated(`${item.text}{${min},}`, 1);
      return min === max
        ? repeated(`${item.text}{${min}}`, 0)
        : repeated(`${item.text}{${min},${max}}`, max - min);
    }
  }
}

/** How a pattern's grammar is named in a schema (see patch-grammar-definitions.ts): its lengths, then the pattern. */
export function patternSpec(
  pattern: string,
  minLength: number | undefined,
  maxLength: number | undefined,
): string {
  return `pattern ${minLength ?? 0} ${maxLength ?? "*"} ${pattern}`;
}

/**
 * {@link patternGrammar}, kept for the last few patterns: a schema is converted for every request
 * that sends it, and looking through a pattern's automaton may take a few milliseconds.
 */
export function cachedPatternGrammar(
  pattern: string,
  minLength: number | undefined,
  maxLength: number | undefined,
): PatternGrammar {
  const spec = patternSpec(pattern, minLength, maxLength);
  let grammar = cache.get(spec);
  if (grammar === undefined) grammar = patternGrammar(pattern, minLength, maxLength);
  else cache.delete(spec);
  // The most recently used last: a schema's grammar reads its patterns' again once it is converted.
  cache.set(spec, grammar);
  if (cache.size > maxCachedPatterns) cache.delete(cache.keys().next().value as string);
  return grammar;
}
const cache = new Map<string, PatternGrammar>();
/**
 * As many patterns as a schema is likely to have: with the last 64 kept and cleared at once, a
 * schema of more read each three times (converted, counted, written).
 */
const maxCachedPatterns = 256;

/** The grammar a {@link patternSpec} names, or `undefined` when it is none. */
export function readPatternSpec(spec: string): Extract<PatternGrammar, { kind: "grammar" }> | undefined {
  const parts = /^pattern (\d+) (\d+|\*) ([\s\S]*)$/.exec(spec);
  if (parts === null) return undefined;
  const [, minLength, maxLength, pattern] = parts as unknown as [string, string, string, string];
  const grammar = cachedPatternGrammar(
    pattern,
    Number(minLength),
    maxLength === "*" ? undefined : Number(maxLength),
  );
  return grammar.kind === "grammar" ? grammar : undefined;
}
