import {
  anyButLineTerminators,
  type CodePointRanges,
  complement,
  controlEscapes,
  normalize,
  setEscapes,
  single,
} from "./regex-character-sets.ts";

/**
 * A JSON Schema `pattern` (an ECMA-262 regular expression, read by code points as with the `u`
 * flag) as a tree the output grammar can be written from (see pattern-grammar.ts), or `undefined`
 * when the pattern uses what a grammar cannot write or is not a regular expression: lookarounds,
 * backreferences, word boundaries, Unicode property escapes, anchors other than a leading `^` and
 * a trailing `$` of the whole pattern (or of one of its top-level alternatives).
 *
 * The tree is never matched by a backtracking engine: the client's pattern runs nowhere (one could
 * take seconds on a string).
 */

export type { CodePointRanges };

export type RegexNode =
  | { kind: "chars"; ranges: CodePointRanges }
  | { kind: "sequence"; items: RegexNode[] }
  | { kind: "alternatives"; options: RegexNode[] }
  | { kind: "repeat"; item: RegexNode; min: number; max: number | undefined };

/** One top-level alternative: its body, and whether `^` and `$` hold it to the string's ends. */
export interface AnchoredBranch {
  body: RegexNode;
  start: boolean;
  end: boolean;
}

/** The largest count a quantifier may name and still be read: beyond it, a pattern is too large for any grammar. */
const largestCount = 1_000_000;

export function parseRegexPattern(pattern: string): AnchoredBranch[] | undefined {
  try {
    const parser = new Parser(pattern);
    const branches = parser.branches();
    return parser.atEnd() ? branches : undefined;
  } catch (error) {
    if (error instanceof Unsupported) return undefined;
    throw error;
  }
}

class Unsupported extends Error {}

function unsupported(): never {
  throw new Unsupported();
}

const start = Symbol("start");
const end = Symbol("end");
type Item = RegexNode | typeof start | typeof end;

class Parser {
  readonly #characters: number[];
  #at = 0;
  #depth = 0;

  constructor(pattern: string) {
    this.#characters = [...pattern].map((character) => character.codePointAt(0) as number);
  }

  atEnd(): boolean {
    return this.#at === this.#characters.length;
  }

  /** The top-level alternatives, each with its anchors. */
  branches(): AnchoredBranch[] {
    const branches: AnchoredBranch[] = [];
    for (;;) {
      const items = this.#items();
      const anchoredStart = items[0] === start;
      if (anchoredStart) items.shift();
      const anchoredEnd = items.at(-1) === end;
      if (anchoredEnd) items.pop();
      branches.push({ body: sequence(items.map(plain)), start: anchoredStart, end: anchoredEnd });
      if (this.#peek() !== bar) return branches;
      this.#at += 1;
    }
  }

  #alternatives(): RegexNode {
    const options = [sequence(this.#items().map(plain))];
    while (this.#peek() === bar) {
      this.#at += 1;
      options.push(sequence(this.#items().map(plain)));
    }
    return options.length === 1 ? (options[0] as RegexNode) : { kind: "alternatives", options };
  }

  #items(): Item[] {
    const items: Item[] = [];
    for (;;) {
      const next = this.#peek();
      if (next === undefined || next === bar || next === closeParen) return items;
      const atom = this.#atom();
      if (atom === start || atom === end) {
        items.push(atom);
        continue;
      }
      items.push(this.#quantified(atom));
    }
  }

  #quantified(atom: RegexNode): RegexNode {
    const bounds = this.#quantifier();
    if (bounds === undefined) return atom;
    // A lazy quantifier matches the same strings.
    if (this.#peek() === question) this.#at += 1;
    const next = this.#peek();
    if (next === star || next === plus || next === question || next === openBrace) unsupported();
    return { kind: "repeat", item: atom, min: bounds[0], max: bounds[1] };
  }

  #quantifier(): [number, number | undefined] | undefined {
    const next = this.#peek();
    if (next === star) return this.#take([0, undefined]);
    if (next === plus) return this.#take([1, undefined]);
    if (next === question) return this.#take([0, 1]);
    if (next !== openBrace) return undefined;
    this.#at += 1;
    const min = this.#count();
    let max: number | undefined = min;
    if (this.#peek() === comma) {
      this.#at += 1;
      max = this.#peek() === closeBrace ? undefined : this.#count();
    }
    if (this.#next() !== closeBrace) unsupported();
    if (max !== undefined && max < min) unsupported();
    return [min, max];
  }

  #count(): number {
    let digits = "";
    for (let next = this.#peek(); next !== undefined && next >= 0x30 && next <= 0x39; next = this.#peek()) {
      digits += String.fromCodePoint(next);
      this.#at += 1;
    }
    if (digits === "") unsupported();
    const count = Number(digits);
    return count > largestCount ? unsupported() : count;
  }

  #take<T>(value: T): T {
    this.#at += 1;
    return value;
  }

  #atom(): Item {
    const character = this.#next();
    switch (character) {
      case caret:
        return start;
      case dollar:
        return end;
      case dot:
        return { kind: "chars", ranges: anyButLineTerminators };
      case openParen:
        return this.#group();
      case openBracket:
        return { kind: "chars", ranges: this.#characterClass() };
      case backslash:
        return { kind: "chars", ranges: this.#escape(false) };
      case star:
      case plus:
      case question:
      case openBrace:
        return unsupported();
      default:
        return { kind: "chars", ranges: single(character as number) };
    }
  }

  #group(): RegexNode {
    if (this.#peek() === question) {
      this.#at += 1;
      const kind = this.#next();
      if (kind === lessThan) {
        // A named group; `(?<=` and `(?<!` are lookbehinds.
        const first = this.#peek();
        if (first === equals || first === exclamation) unsupported();
        while (this.#next() !== greaterThan) if (this.atEnd()) unsupported();
      } else if (kind !== colon) {
        unsupported();
      }
    }
    // Deep nesting is refused before the stack runs out (the schema's size bounds the pattern).
    this.#depth += 1;
    if (this.#depth > 100) unsupported();
    const node = this.#alternatives();
    this.#depth -= 1;
    if (this.#next() !== closeParen) unsupported();
    return node;
  }

  #characterClass(): CodePointRanges {
    const negated = this.#peek() === caret;
    if (negated) this.#at += 1;
    const ranges: (readonly [number, number])[] = [];
    while (this.#peek() !== closeBracket) {
      const low = this.#classAtom();
      if (this.#peek() === hyphen && this.#characters[this.#at + 1] !== closeBracket) {
        this.#at += 1;
        const high = this.#classAtom();
        const [first] = low;
        const [last] = high;
        // A set escape (`\d`) cannot bound a range.
        if (low.length !== 1 || high.length !== 1 || first === undefined || last === undefined) unsupported();
        if (first[0] !== first[1] || last[0] !== last[1] || first[0] > last[0]) unsupported();
        ranges.push([first[0], last[0]]);
      } else {
        ranges.push(...low);
      }
    }
    this.#at += 1;
    const set = normalize(ranges);
    return negated ? complement(set) : set;
  }

  #classAtom(): CodePointRanges {
    const character = this.#next();
    if (character === undefined) unsupported();
    if (character === backslash) return this.#escape(true);
    return [[character, character]];
  }

  #escape(inClass: boolean): CodePointRanges {
    const character = this.#next();
    if (character === undefined) unsupported();
    const letter = String.fromCodePoint(character);
    const set = setEscapes[letter];
    if (set !== undefined) return set;
    const control = controlEscapes[letter];
    if (control !== undefined) return single(control);
    if (letter === "b" && inClass) return single(0x08);
    if (letter === "0" && !isDigit(this.#peek())) return single(0);
    if (letter === "x") return single(this.#hex(2));
    if (letter === "u") return single(this.#unicodeEscape());
    if (letter === "c") {
      const next = this.#next();
      if (next === undefined || !/[A-Za-z]/.test(String.fromCodePoint(next))) unsupported();
      return single(next % 32);
    }
    if (letter === "-" && inClass) return single(character);
    // Syntax characters and `/` stand for themselves; other escapes (`\b`, `\1`, `\k`, `\p`) cannot be written.
    if ("^$\\.*+?()[]{}|/".includes(letter)) return single(character);
    return unsupported();
  }

  #unicodeEscape(): number {
    if (this.#peek() === openBrace) {
      this.#at += 1;
      let digits = "";
      while (this.#peek() !== closeBrace) {
        const next = this.#next();
        if (next === undefined || !isHexDigit(next) || digits.length >= 6) unsupported();
        digits += String.fromCodePoint(next);
      }
      this.#at += 1;
      const value = digits === "" ? unsupported() : Number.parseInt(digits, 16);
      return value > 0x10ffff ? unsupported() : value;
    }
    const unit = this.#hex(4);
    // A surrogate pair written as two escapes is one code point.
    if (
      unit >= 0xd800 &&
      unit <= 0xdbff &&
      this.#peek() === backslash &&
      this.#characters[this.#at + 1] === 0x75
    ) {
      const saved = this.#at;
      this.#at += 2;
      const low = this.#hexOrUndefined(4);
      if (low !== undefined && low >= 0xdc00 && low <= 0xdfff)
        return 0x10000 + ((unit - 0xd800) << 10) + (low - 0xdc00);
      this.#at = saved;
    }
    return unit;
  }

  #hex(length: number): number {
    return this.#hexOrUndefined(length) ?? unsupported();
  }

  #hexOrUndefined(length: number): number | undefined {
    const digits = this.#characters.slice(this.#at, this.#at + length);
    if (digits.length !== length || !digits.every(isHexDigit)) return undefined;
    this.#at += length;
    return Number.parseInt(String.fromCodePoint(...digits), 16);
  }

  #peek(): number | undefined {
    return this.#characters[this.#at];
  }

  #next(): number | undefined {
    const character = this.#characters[this.#at];
    if (character !== undefined) this.#at += 1;
    return character;
  }
}

/** An item that is not an anchor: an anchor anywhere but the ends of the pattern cannot be written. */
function plain(item: Item): RegexNode {
  return item === start || item === end ? unsupported() : item;
}

function sequence(items: RegexNode[]): RegexNode {
  return items.length === 1 ? (items[0] as RegexNode) : { kind: "sequence", items };
}

function isDigit(character: number | undefined): boolean {
  return character !== undefined && character >= 0x30 && character <= 0x39;
}

function isHexDigit(character: number): boolean {
  return /^[0-9A-Fa-f]$/.test(String.fromCodePoint(character));
}

const bar = 0x7c;
const caret = 0x5e;
const dollar = 0x24;
const dot = 0x2e;
const star = 0x2a;
const plus = 0x2b;
const question = 0x3f;
const comma = 0x2c;
const colon = 0x3a;
const equals = 0x3d;
const exclamation = 0x21;
const lessThan = 0x3c;
const greaterThan = 0x3e;
const hyphen = 0x2d;
const backslash = 0x5c;
const openParen = 0x28;
const closeParen = 0x29;
const openBracket = 0x5b;
const closeBracket = 0x5d;
const openBrace = 0x7b;
const closeBrace = 0x7d;
