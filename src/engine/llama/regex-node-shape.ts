import type { AnchoredBranch, RegexNode } from "./parse-regex-pattern.ts";
import { allCharacters } from "./regex-character-sets.ts";

/** What matches the empty string only. */
export const empty: RegexNode = { kind: "sequence", items: [] };

/** Any characters: what an end of a pattern without its anchor (`^`, `$`) takes there. */
const anything: RegexNode = {
  kind: "repeat",
  item: { kind: "chars", ranges: allCharacters },
  min: 0,
  max: undefined,
};

/**
 * The pattern's top-level alternatives as one tree that matches whole strings: an end without its
 * anchor takes any characters there (JSON Schema's patterns match anywhere in the string). Parts
 * that match nothing are left out, and the tree is simplified (see {@link simplify});
 * `undefined` when nothing is left: no string matches.
 */
export function wholeStringTree(branches: readonly AnchoredBranch[]): RegexNode | undefined {
  const options: RegexNode[] = [];
  for (const { body, start, end } of branches) {
    const kept = prune(body);
    if (kept === undefined) continue;
    options.push(
      simplify({ kind: "sequence", items: [...(start ? [] : [anything]), kept, ...(end ? [] : [anything])] }),
    );
  }
  if (options.length === 0) return undefined;
  return options.length === 1 ? (options[0] as RegexNode) : simplify({ kind: "alternatives", options });
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

/**
 * The same strings, in a shape llama.cpp's grammar keeps few stacks for: parts that match only the
 * empty string go (a grammar cannot repeat them: `""*` does not parse), an alternative that
 * matches only it makes the others optional, and a repetition of a part repeated from zero is one
 * repetition: `(a?){0,600}` is `a{0,600}`, which llama.cpp follows with one stack where the former
 * kept hundreds open (26 s for 3 tokens).
 */
export function simplify(node: RegexNode): RegexNode {
  switch (node.kind) {
    case "chars":
      return node;
    case "sequence": {
      const items: RegexNode[] = [];
      for (const item of node.items.map(simplify)) {
        if (isEmpty(item)) continue;
        if (item.kind === "sequence") items.push(...item.items);
        else items.push(item);
      }
      return items.length === 1 ? (items[0] as RegexNode) : { kind: "sequence", items };
    }
    case "alternatives": {
      // Options that may be empty: their non-empty strings, the whole made optional (`a|b?` is
      // `(a|b)?`), where those are plain to write (an empty option, a part repeated from zero).
      let optional = false;
      const options: RegexNode[] = [];
      for (const option of node.options.map(simplify)) {
        if (isEmpty(option)) optional = true;
        else if (option.kind === "repeat" && option.min === 0) {
          optional = true;
          options.push(option.max === 1 ? option.item : { ...option, min: 1 });
        } else options.push(option);
      }
      if (options.length === 0) return empty;
      const chosen: RegexNode =
        options.length === 1 ? (options[0] as RegexNode) : { kind: "alternatives", options };
      return optional ? simplify({ kind: "repeat", item: chosen, min: 0, max: 1 }) : chosen;
    }
    case "repeat": {
      const item = simplify(node.item);
      if (node.max === 0 || isEmpty(item)) return empty;
      if (node.min === 1 && node.max === 1) return item;
      // A part repeated from zero, itself repeated: `(x{0,k}){m,n}` is `x{0,nk}` (any count of
      // x up to nk, the copies that are not needed being empty).
      if (item.kind === "repeat" && item.min === 0) {
        const most = node.max === undefined || item.max === undefined ? undefined : node.max * item.max;
        return { kind: "repeat", item: item.item, min: 0, max: most };
      }
      return { ...node, item };
    }
  }
}

function isEmpty(node: RegexNode): boolean {
  return node.kind === "sequence" && node.items.length === 0;
}

/**
 * Whether a repetition of `node` repeats a part that may match nothing, as `(\\w?\\w?){0,60}`: each
 * copy may be skipped through, and llama.cpp makes stacks for every way, over and over (86 ms
 * for 100 characters, where 200 stacks of a part that may not took 9).
 */
export function repeatsEmptyPart(node: RegexNode): boolean {
  switch (node.kind) {
    case "chars":
      return false;
    case "sequence":
      return node.items.some(repeatsEmptyPart);
    case "alternatives":
      return node.options.some(repeatsEmptyPart);
    case "repeat":
      return (node.max !== 1 && lengthsOf(node.item)[0] === 0) || repeatsEmptyPart(node.item);
  }
}

/** The fewest and most characters `node` matches (`Infinity`: no most). */
export function lengthsOf(node: RegexNode): [number, number] {
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
    case "alternatives":
      return node.options
        .map(lengthsOf)
        .reduce<[number, number]>(
          ([low, high], [optionLow, optionHigh]) => [Math.min(low, optionLow), Math.max(high, optionHigh)],
          [Infinity, 0],
        );
    case "repeat": {
      const [low, high] = lengthsOf(node.item);
      const most = node.max === undefined ? (high === 0 ? 0 : Infinity) : high * node.max;
      return [low * node.min, most];
    }
  }
}

/** `node` with every repetition's most at `cap` (at least its least): fewer strings, shorter ones. */
export function capRepeats(node: RegexNode, cap: number): RegexNode {
  switch (node.kind) {
    case "chars":
      return node;
    case "sequence":
      return { kind: "sequence", items: node.items.map((item) => capRepeats(item, cap)) };
    case "alternatives":
      return { kind: "alternatives", options: node.options.map((option) => capRepeats(option, cap)) };
    case "repeat":
      return {
        ...node,
        item: capRepeats(node.item, cap),
        max: Math.min(node.max ?? Infinity, Math.max(node.min, cap)),
      };
  }
}

/** The largest count any repetition of `node` names (its least where it has no most). */
export function largestCount(node: RegexNode): number {
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

/** What `node`'s repetitions cost llama.cpp's grammar parser: each its largest count (see count-grammar-repeats.ts). */
export function repeatsOf(node: RegexNode): number {
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
