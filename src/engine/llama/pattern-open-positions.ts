import { classifyCharacters } from "./classify-characters.ts";
import type { CodePointRanges, RegexNode } from "./parse-regex-pattern.ts";

/**
 * The most places a pattern's grammar may go on from at once: what llama.cpp keeps a parse stack
 * for while it reads the string, and walks for every token of the vocabulary at every step. The
 * pattern is read as its position automaton (one position per character class once repetitions
 * are written out, as llama.cpp writes them: a repetition's optional copies nest, so the one after
 * a copy is reached only through it), and the automaton is run on every class of input it can
 * tell apart, as a deterministic one: each state is the set of positions a prefix may end on, and
 * the count is of the positions they lead to. Where that takes more work than allowed (the states
 * of `\S+@\S+` are the sets of places an `@` read so far may have split it at: exponentially
 * many), the count of all positions bounds it. `undefined` past the limits: the pattern is too
 * intricate to write. The start has a limit of its own: its alternatives part at the first
 * character (`^(red|green|...)$`), as an `enum`'s do, where those open later may stay open for
 * the rest of the string.
 */
export function countOpenPositions(
  node: RegexNode,
  limits: { start: number; later: number },
): { stacks: number | undefined; work: number } {
  const { automaton, whole: start } = buildAutomaton(node);
  if (start === undefined) return { stacks: undefined, work: automaton.work };
  const counted = (stacks: number | undefined, work: number) => ({ stacks, work: automaton.work + work });
  if (start.first.size > limits.start) return counted(undefined, 0);
  const { most, work } = explore(automaton, start, limits.later);
  if (most === undefined) return counted(undefined, work);
  if (most !== "too-much-work") return counted(Math.max(start.first.size, most), work);
  return counted(automaton.ranges.length <= limits.later ? automaton.ranges.length : undefined, work);
}

/**
 * The most positions a state after the start leads to, `undefined` past `limit`; `too-much-work`
 * past the budget.
 */
function explore(
  automaton: PositionAutomaton,
  start: Fragment,
  limit: number,
): { most: number | undefined | "too-much-work"; work: number } {
  const { follow } = automaton;
  const { classesOf, work: classifying } = classifyCharacters(automaton.ranges);
  const seen = new Set<string>();
  const pending: number[][] = [[...start.first]];
  let most = 0;
  let work = classifying;
  let atStart = true;
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    // `next`: the positions the state leads to. Each class of characters they tell apart leads to
    // the positions among them that take it.
    work++;
    if (!atStart) most = Math.max(most, next.length);
    atStart = false;
    if (most > limit) return { most: undefined, work };
    const takenByClass = new Map<number, number[]>();
    for (const position of next)
      for (const taken of classesOf[position] ?? []) {
        const positions = takenByClass.get(taken);
        if (positions === undefined) takenByClass.set(taken, [position]);
        else positions.push(position);
      }
    for (const taken of takenByClass.values()) {
      work += next.length + taken.length;
      if (work > maxWork) return { most: "too-much-work", work };
      const leads = new Set<number>();
      for (const position of taken) for (const to of follow[position] ?? []) leads.add(to);
      const state = Int32Array.from(leads).sort();
      const key = state.join(",");
      if (seen.has(key)) continue;
      seen.add(key);
      if (seen.size > maxStates) return { most: "too-much-work", work };
      pending.push(Array.from(state));
    }
  }
  return { most, work };
}

/** The most positions (characters once repetitions are written out) a pattern is looked through with. */
const maxPositions = 20_000;
/** The most states of the deterministic automaton looked through. */
const maxStates = 5000;
/**
 * The most work the look may take (classes of input tried on each state, times the positions they
 * touch): 25 to 75 ms here, where 2,000,000 took up to half a second.
 */
const maxWork = 250_000;

/**
 * The most work building the automaton may take (positions made, follows added, members of sets
 * merged): a repeated part whose copies may each match nothing leads from every copy to every
 * later one, `(a?b?c?d?e?f?g?h?i?j?k?l?m?n?o?p?q?r?s?t?){1000}` to 2 * 10^8 follows (a `const`
 * checked against it ran the heap out and ended the process), and 2000 alternatives repeated
 * ten times to 4 * 10^7. Real patterns take a few thousand.
 */
const maxBuildWork = 250_000;

class TooIntricate extends Error {}

/** The position automaton of `node`, and the fragment of the whole; no fragment past the automaton's bounds. */
function buildAutomaton(node: RegexNode): { automaton: PositionAutomaton; whole: Fragment | undefined } {
  const automaton = new PositionAutomaton();
  try {
    return { automaton, whole: automaton.build(node) };
  } catch (error) {
    if (error instanceof TooIntricate) return { automaton, whole: undefined };
    throw error;
  }
}

/** A part of the automaton: the positions it starts with, those it may end on, whether it may be empty. */
interface Fragment {
  first: Set<number>;
  last: Set<number>;
  nullable: boolean;
}

class PositionAutomaton {
  readonly ranges: CodePointRanges[] = [];
  readonly follow: Set<number>[] = [];
  /** What building it took: positions made, follows added and members of sets merged. */
  work = 0;

  build(node: RegexNode): Fragment {
    switch (node.kind) {
      case "chars": {
        if (this.ranges.length >= maxPositions) throw new TooIntricate();
        const position = this.ranges.length;
        this.#spend(1);
        this.ranges.push(node.ranges);
        this.follow.push(new Set());
        return { first: new Set([position]), last: new Set([position]), nullable: false };
      }
      case "sequence":
        return node.items.reduce<Fragment>((before, item) => this.#then(before, this.build(item)), {
          first: new Set(),
          last: new Set(),
          nullable: true,
        });
      case "alternatives": {
        const fragments = node.options.map((option) => this.build(option));
        return {
          first: this.#union(fragments.map(({ first }) => first)),
          last: this.#union(fragments.map(({ last }) => last)),
          nullable: fragments.some(({ nullable }) => nullable),
        };
      }
      case "repeat": {
        let whole: Fragment = { first: new Set(), last: new Set(), nullable: true };
        for (let copy = 0; copy < node.min; copy++) whole = this.#then(whole, this.build(node.item));
        if (node.max === undefined) return this.#then(whole, this.#star(this.build(node.item)));
        // The optional copies nest: (x (x (x)?)?)?, built from the innermost out. Each copy's last
        // positions end the whole: gathered in one set, where a new set for each copy took
        // quadratic time (30 to 40 ms for `[a-z]{0,1000}`).
        let first = new Set<number>();
        const last = new Set<number>();
        for (let copy = node.min; copy < node.max; copy++) {
          const item = this.build(node.item);
          this.#spend(item.last.size * (first.size + 1));
          for (const position of item.last) {
            for (const to of first) this.follow[position]?.add(to);
            last.add(position);
          }
          first = item.nullable ? this.#union([item.first, first]) : item.first;
        }
        return this.#then(whole, { first, last, nullable: true });
      }
    }
  }

  /** `before` then `after`. */
  #then(before: Fragment, after: Fragment): Fragment {
    this.#spend(before.last.size * after.first.size);
    for (const position of before.last) for (const to of after.first) this.follow[position]?.add(to);
    return {
      first: before.nullable ? this.#union([before.first, after.first]) : before.first,
      last: after.nullable ? this.#union([before.last, after.last]) : after.last,
      nullable: before.nullable && after.nullable,
    };
  }

  /** `item` any number of times. */
  #star(item: Fragment): Fragment {
    this.#spend(item.last.size * item.first.size);
    for (const position of item.last) for (const to of item.first) this.follow[position]?.add(to);
    return { ...item, nullable: true };
  }

  /** Counts `amount` more work, refusing (TooIntricate) to go past {@link maxBuildWork}, before it is done. */
  #spend(amount: number): void {
    if (this.work + amount > maxBuildWork) throw new TooIntricate();
    this.work += amount;
  }

  #union(sets: readonly Set<number>[]): Set<number> {
    for (const set of sets) this.#spend(set.size);
    return union(sets);
  }
}

function union(sets: readonly Set<number>[]): Set<number> {
  const all = new Set<number>();
  for (const set of sets) for (const value of set) all.add(value);
  return all;
}

/**
 * Whether `character` is in `ranges`, sorted and apart: a binary search (a class of 4000 single
 * characters looked through one by one, for every character of a constant checked against it in
 * each of 200 `anyOf` branches, held the event loop 11 s).
 */
function contains(ranges: CodePointRanges, character: number): boolean {
  let [low, high] = [0, ranges.length - 1];
  while (low <= high) {
    const middle = (low + high) >>> 1;
    const [first, last] = ranges[middle] as readonly [number, number];
    if (character < first) high = middle - 1;
    else if (character > last) low = middle + 1;
    else return true;
  }
  return false;
}

/**
 * Whether a string matches (`undefined` past `budget` work), and the work it took: for each
 * character, the follows merged and the positions tried.
 */
export type PatternMatcher = (
  value: string,
  budget: number,
) => { matched: boolean | undefined; work: number };

/**
 * A matcher of the pattern `node` stands for (a whole-string tree: see regex-node-shape.ts), run on
 * its position automaton a character at a time: linear in the string, never backtracking (a
 * client's regular expression run by a backtracking engine could take seconds on a crafted
 * string), and the work building it took; no matcher when the automaton is too large to build.
 */
export function createPatternMatcher(node: RegexNode): { match: PatternMatcher | undefined; work: number } {
  const { automaton, whole } = buildAutomaton(node);
  if (whole === undefined) return { match: undefined, work: automaton.work };
  const { ranges, follow } = automaton;
  const match: PatternMatcher = (value, budget) => {
    let current: number[] | undefined;
    let work = 0;
    for (const character of value) {
      const codePoint = character.codePointAt(0) as number;
      const followed = current?.map((position) => follow[position] ?? new Set<number>());
      for (const set of followed ?? []) work += set.size;
      const candidates = followed === undefined ? whole.first : union(followed);
      work += candidates.size;
      if (work > budget) return { matched: undefined, work };
      current = [...candidates].filter((position) => contains(ranges[position] ?? [], codePoint));
      if (current.length === 0) return { matched: false, work };
    }
    const matched =
      current === undefined ? whole.nullable : current.some((position) => whole.last.has(position));
    return { matched, work };
  };
  return { match, work: automaton.work };
}
