import type { CodePointRanges } from "./regex-character-sets.ts";

/**
 * GBNF text for pattern grammars (see pattern-grammar.ts): expressions with the count of rules
 * llama.cpp's parser makes for them, and one character of a set as a JSON string writes it.
 */

/**
 * A GBNF expression, and how many rules llama.cpp's grammar parser makes for it: one for each group
 * (`(...)`), one for each optional repeat of a repetition (`x?`, `x*`, `x+`: one; `x{2,5}`: three).
 */
export interface Expression {
  text: string;
  rules: number;
}

/** `options` as one GBNF expression: grouped (a rule) unless it is one already (a class, a literal, a group). */
export function group(options: Expression[]): Expression {
  const [only] = options;
  if (options.length === 1 && only !== undefined && isOneTerm(only.text)) return only;
  return {
    text: `(${options.map(({ text }) => text).join(" | ")})`,
    rules: 1 + sum(options.map(({ rules }) => rules)),
  };
}

/**
 * Whether `text` is one term: a class, a literal or a group. The grammars written here hold no
 * parenthesis inside a class or a literal (a class writes every character as an escape), so a
 * group is one whose first parenthesis closes at its end.
 */
function isOneTerm(text: string): boolean {
  if (/^(\[(?:[^\]\\]|\\.)*\]|"(?:[^"\\]|\\.)*")$/.test(text)) return true;
  if (!text.startsWith("(")) return false;
  let depth = 0;
  for (let index = 0; index < text.length; index++) {
    if (text[index] === "(") depth += 1;
    else if (text[index] === ")") depth -= 1;
    if (depth === 0) return index === text.length - 1;
  }
  return false;
}

export function sum(values: number[]): number {
  return values.reduce((total, value) => total + value, 0);
}

/** The characters JSON writes as escapes: quote, backslash, controls and DEL (as node-llama-cpp's strings do). */
const escaped: CodePointRanges = [
  [0x00, 0x1f],
  [0x22, 0x22],
  [0x5c, 0x5c],
  [0x7f, 0x7f],
];

const shortEscapes: Record<number, string | undefined> = {
  34: '"',
  92: "\\\\",
  8: "b",
  12: "f",
  10: "n",
  13: "r",
  9: "t",
};

/**
 * One character of `ranges`, as a JSON string writes it: plain characters as themselves, the
 * others as their escape (`\"`, `\\`, `\n`, ..., `\u001b`), one way each.
 */
export function charactersGrammar(ranges: CodePointRanges): Expression {
  const options: Expression[] = [];
  const plain: string[] = [];
  const short: string[] = [];
  const unicode: number[] = [];
  for (const [first, last] of ranges) {
    let from = first;
    for (const [escapeFirst, escapeLast] of escaped) {
      if (escapeLast < from || escapeFirst > last) continue;
      if (escapeFirst > from) plain.push(classRange(from, escapeFirst - 1));
      for (
        let character = Math.max(from, escapeFirst);
        character <= Math.min(last, escapeLast);
        character++
      ) {
        const letter = shortEscapes[character];
        if (letter === undefined) unicode.push(character);
        else short.push(letter);
      }
      from = escapeLast + 1;
    }
    if (from <= last) plain.push(classRange(from, last));
  }
  if (plain.length > 0) options.push({ text: `[${plain.join("")}]`, rules: 0 });
  if (short.length > 0) {
    const letters = short.map((letter) => (letter === '"' ? '\\"' : letter)).join("");
    options.push({ text: `"\\\\" [${letters}]`, rules: 0 });
  }
  if (unicode.length > 0) {
    // `\u00XX`: grouped by the first hex digit of XX (0, 1 or 7).
    const byHigh = Map.groupBy(unicode, (character) => character >> 4);
    const tails = [...byHigh].map(([high, characters]) => ({
      text: `"${high.toString(16)}" [${characters.map((c) => (c & 15).toString(16)).join("")}]`,
      rules: 0,
    }));
    const tail = group(tails);
    options.push({ text: `"\\\\u00" ${tail.text}`, rules: tail.rules });
  }
  return group(options);
}

function classRange(first: number, last: number): string {
  return first === last ? classCharacter(first) : `${classCharacter(first)}-${classCharacter(last)}`;
}

/** A code point inside a GBNF character class, escaped whatever it is. */
function classCharacter(character: number): string {
  if (character < 0x100) return `\\x${character.toString(16).padStart(2, "0")}`;
  if (character < 0x10000) return `\\u${character.toString(16).padStart(4, "0")}`;
  return `\\U${character.toString(16).padStart(8, "0")}`;
}
