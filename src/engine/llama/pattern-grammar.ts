import { charactersGrammar, type Expression, group, sum } from "./gbnf-expression.ts";
import {
  type AnchoredBranch,
  type CodePointRanges,
  parseRegexPattern,
  type RegexNode,
} from "./parse-regex-pattern.ts";

/**
 * What a string's `pattern` (with its `minLength`/`maxLength`) becomes in a local model's output
 * grammar:
 * - `grammar`: a GBNF expression for the JSON string (quotes included) whose value the pattern
 *   matches, within the lengths; `stacks` bounds the parse stacks it keeps open at once (see
 *   check-grammar-stacks.ts) and `repeats` what its repetitions cost (see count-grammar-repeats.ts).
 * - `unsupported`: the pattern uses what a grammar cannot write (see parse-regex-pattern.ts), is
 *   longer than {@link maxPatternCharacters}, or its lengths and the lengths beside it cannot be
 *   written together exactly; the lengths alone are enforced, as before patterns were.
 * - `too-large`: a repetition is larger than a grammar writes (`problem` says how).
 * - `no-value`: no string matches the pattern within the lengths.
 */
export type PatternGrammar =
  | { kind: "grammar"; text: string; stacks: number; repeats: number }
  | { kind: "unsupported" }
  | { kind: "too-large"; problem: string }
  | { kind: "no-value" };

/**
 * The largest count a quantifier may have in the grammar: llama.cpp's parser refuses a repetition
 * much beyond (see check-schema-keywords.ts), and lengths have the same bound.
 */
export const maxPatternRepetitions = 1000;

/**
 * The longest pattern written into a grammar. Real ones are far shorter (an e-mail address's
 * strictest is about 6 KB; most are under 100 characters); a longer one is left to the lengths, as
 * before patterns were enforced, rather than refused: its grammar would pass the schema's character
 * budget, and a tool's documented parameters would carry it.
 */
export const maxPatternCharacters = 4096;

export function patternGrammar(
  pattern: string,
  minLength: number | undefined,
  maxLength: number | undefined,
): PatternGrammar {
  if (pattern.length > maxPatternCharacters) return { kind: "unsupported" };
  const parsed = parseRegexPattern(pattern);
  if (parsed === undefined) return { kind: "unsupported" };
  const branches: AnchoredBranch[] = [];
  for (const branch of parsed) {
    const body = prune(branch.body);
    if (body !== undefined) branches.push({ ...branch, body });
  }
  if (branches.length === 0) return { kind: "no-value" };
  const largest = branches.reduce((most, { body }) => Math.max(most, largestCount(body)), 0);
  if (largest > maxPatternRepetitions)
    return {
      kind: "too-large",
      problem: `a part of it is repeated up to ${largest} times, and the output grammar writes at most ${maxPatternRepetitions} repeats`,
    };
  const within = fitLengths(branches, minLength ?? 0, maxLength ?? Infinity);
  if (within === "unsupported") return { kind: "unsupported" };
  if (within === "no-value") return { kind: "no-value" };
  let body: Expression;
  try {
    body = group(within.map(branchGrammar));
  } catch (error) {
    if (error instanceof TooManyRules)
      return {
        kind: "too-large",
        problem: `a part of it that holds alternatives or repetitions is repeated up to ${error.count} times, more than llama.cpp's grammar parser takes (${maxRepeatedRules} of its rules in one repetition, counting each group and optional repeat)`,
      };
    throw error;
  }
  const text = `"\\"" ${body.text} "\\""`;
  const stacks = within.reduce((sum, branch) => sum + branchStacks(branch), 0);
  const repeats = within.reduce((sum, { body }) => sum + repeatsOf(body), 0);
  return { kind: "grammar", text, stacks, repeats };
}

/**
 * The branches restricted to strings of `minLength` to `maxLength` characters, where that can be
 * written exactly: when every string the pattern matches has such a length, or when the one part
 * of the pattern whose length varies repeats an item of fixed length (`^[a-z]+$`, `^#\d*-x$`),
 * whose count then carries the lengths.
 */
function fitLengths(
  branches: AnchoredBranch[],
  minLength: number,
  maxLength: number,
): AnchoredBranch[] | "unsupported" | "no-value" {
  const ranges = branches.map(branchLengths);
  if (ranges.every(([low, high]) => low >= minLength && high <= maxLength)) return branches;
  if (ranges.every(([low, high]) => low > maxLength || high < minLength)) return "no-value";
  const [branch] = branches;
  if (branches.length !== 1 || branch === undefined || !branch.start || !branch.end) return "unsupported";
  const items = branch.body.kind === "sequence" ? branch.body.items : [branch.body];
  const varying = items.filter((item) => {
    const [low, high] = lengthsOf(item);
    return low !== high;
  });
  const [part] = varying;
  if (varying.length !== 1 || part === undefined || part.kind !== "repeat") return "unsupported";
  const [width, widthHigh] = lengthsOf(part.item);
  if (width !== widthHigh || width === 0) return "unsupported";
  const fixed = items.reduce((sum, item) => (item === part ? sum : sum + lengthsOf(item)[0]), 0);
  const min = Math.max(part.min, Math.ceil((minLength - fixed) / width));
  const max = Math.min(part.max ?? Infinity, Math.floor((maxLength - fixed) / width));
  if (min > max) return "no-value";
  const repeat: RegexNode = { ...part, min, max: max === Infinity ? undefined : max };
  const body: RegexNode = { kind: "sequence", items: items.map((item) => (item === part ? repeat : item)) };
  return [{ ...branch, body }];
}

function branchLengths({ body, start, end }: AnchoredBranch): [number, number] {
  const [low, high] = lengthsOf(body);
  return [low, start && end ? high : Infinity];
}

/** The fewest and most characters `node` matches (`Infinity`: no most). */
function lengthsOf(node: RegexNode): [number, number] {
  switch (node.kind) {
    case "chars":
      return [1, 1];
    case "sequence":
      return node.items.reduce<[number, number]>(
        ([low, high], item) => {
          const [itemLow, itemHigh] = lengthsOf(item);
          return [low + itemLow, high + itemHigh];
        },
        [0, 0],
      );
    case "alternatives": {
      const ranges = node.options.map(lengthsOf);
      return ranges.reduce<[number, number]>(
        ([low, high], [optionLow, optionHigh]) => [Math.min(low, optionLow), Math.max(high, optionHigh)],
        [Infinity, 0],
      );
    }
    case "repeat": {
      const [low, high] = lengthsOf(node.item);
      const most = node.max === undefined ? (high === 0 ? 0 : Infinity) : high * node.max;
      return [low * node.min, most];
    }
  }
}

/** `node` without what matches nothing (an empty class), or `undefined` when nothing is left. */
function prune(node: RegexNode): RegexNode | undefined {
  switch (node.kind) {
    case "chars":
      return node.ranges.length === 0 ? undefined : node;
    case "sequence": {
      const items: RegexNode[] = [];
      for (const item of node.items) {
        const kept = prune(item);
        if (kept === undefined) return undefined;
        items.push(kept);
      }
      return { kind: "sequence", items };
    }
    case "alternatives": {
      const options = node.options.flatMap((option) => prune(option) ?? []);
      if (options.length === 0) return undefined;
      return options.length === 1 ? options[0] : { kind: "alternatives", options };
    }
    case "repeat": {
      const item = prune(node.item);
      if (item === undefined || node.max === 0) return node.min === 0 ? empty : undefined;
      return { ...node, item };
    }
  }
}

const empty: RegexNode = { kind: "sequence", items: [] };

function largestCount(node: RegexNode): number {
  switch (node.kind) {
    case "chars":
      return 0;
    case "sequence":
      return node.items.reduce((most, item) => Math.max(most, largestCount(item)), 0);
    case "alternatives":
      return node.options.reduce((most, option) => Math.max(most, largestCount(option)), 0);
    case "repeat":
      return Math.max(node.max ?? node.min, largestCount(node.item));
  }
}

/** Any character of a JSON string, as written (escapes included): what an unanchored end allows. */
const anyCharacter = '([^"\\\\\\x7F\\x00-\\x1F] | "\\\\" ["\\\\/bfnrt] | "\\\\u" [0-9a-fA-F]{4})';

/**
 * The most rules a repetition may repeat, times its count: llama.cpp's parser refuses a grammar
 * where a repeated group's rules (at least one) times the repetition's largest count passes 2000
 * ("number of rules that are going to be repeated multiplied by the new repetition exceeds sane
 * defaults"), measured: `("a"+ "b"){1,1000}` parses, `{1,1001}` does not.
 */
const maxRepeatedRules = 2000;

/** Where a repetition writes more rules than llama.cpp's parser takes: its count. */
class TooManyRules {
  readonly count: number;

  constructor(count: number) {
    this.count = count;
  }
}

function branchGrammar({ body, start, end }: AnchoredBranch): Expression {
  const { text, rules } = nodeGrammar(body);
  const parts = [start ? "" : `${anyCharacter}*`, text, end ? "" : `${anyCharacter}*`];
  const joined = parts.filter((part) => part !== "" && part !== '""').join(" ");
  return { text: joined === "" ? '""' : joined, rules: rules + (start ? 0 : 2) + (end ? 0 : 2) };
}

function nodeGrammar(node: RegexNode): Expression {
  switch (node.kind) {
    case "chars":
      return charactersGrammar(node.ranges);
    case "sequence": {
      if (node.items.length === 0) return { text: '""', rules: 0 };
      const items = node.items.map(nodeGrammar);
      return { text: items.map(({ text }) => text).join(" "), rules: sum(items.map(({ rules }) => rules)) };
    }
    case "alternatives":
      return group(node.options.map(nodeGrammar));
    case "repeat": {
      const { min, max } = node;
      if (max === 0) return { text: '""', rules: 0 };
      const item = group([nodeGrammar(node.item)]);
      const largest = max ?? (min === 0 ? 1 : min);
      if (Math.max(1, item.rules) * largest > maxRepeatedRules) throw new TooManyRules(largest);
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

/** How many alternatives a character's grammar opens: its class, its short escapes, its `\u` ones. */
function charactersStacks(ranges: CodePointRanges): number {
  const { text } = charactersGrammar(ranges);
  return 1 + (text.match(/ \| /g)?.length ?? 0);
}

function branchStacks({ body, start, end }: AnchoredBranch): number {
  // An unanchored end's "any character" opens three alternatives and the way out.
  return stacksOf(body) + (start ? 0 : 4) + (end ? 0 : 4);
}

/**
 * An upper bound on the parse stacks `node` keeps open at once. Alternatives and the items of a
 * sequence (each may be reached at once, through items that match nothing) add up. A repetition of
 * an item of fixed length stands in one copy of it, or just past it, whatever it has read; one of
 * varying length may stand in any of its copies (unbounded ones reuse one rule: two).
 */
function stacksOf(node: RegexNode): number {
  switch (node.kind) {
    case "chars":
      return charactersStacks(node.ranges);
    case "sequence":
      return node.items.reduce((sum, item) => sum + stacksOf(item), 0);
    case "alternatives":
      return node.options.reduce((sum, option) => sum + stacksOf(option), 0);
    case "repeat": {
      const [low, high] = lengthsOf(node.item);
      const copies = low === high ? 2 : node.max === undefined ? node.min + 2 : node.max + 1;
      return copies * stacksOf(node.item) + 1;
    }
  }
}

/** What `node`'s repetitions cost llama.cpp's grammar parser: each its largest count (see count-grammar-repeats.ts). */
function repeatsOf(node: RegexNode): number {
  switch (node.kind) {
    case "chars":
      return 0;
    case "sequence":
      return node.items.reduce((sum, item) => sum + repeatsOf(item), 0);
    case "alternatives":
      return node.options.reduce((sum, option) => sum + repeatsOf(option), 0);
    case "repeat":
      return (node.max ?? node.min) + repeatsOf(node.item);
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

/** The grammar a {@link patternSpec} names, or `undefined` when it is none. Read once for each spec (a few kept). */
export function readPatternSpec(spec: string): Extract<PatternGrammar, { kind: "grammar" }> | undefined {
  if (readSpecs.has(spec)) return readSpecs.get(spec);
  const parts = /^pattern (\d+) (\d+|\*) ([\s\S]*)$/.exec(spec);
  let read: Extract<PatternGrammar, { kind: "grammar" }> | undefined;
  if (parts !== null) {
    const [, minLength, maxLength, pattern] = parts as unknown as [string, string, string, string];
    const grammar = patternGrammar(
      pattern,
      Number(minLength),
      maxLength === "*" ? undefined : Number(maxLength),
    );
    read = grammar.kind === "grammar" ? grammar : undefined;
  }
  if (readSpecs.size >= 64) readSpecs.clear();
  readSpecs.set(spec, read);
  return read;
}
const readSpecs = new Map<string, Extract<PatternGrammar, { kind: "grammar" }> | undefined>();
