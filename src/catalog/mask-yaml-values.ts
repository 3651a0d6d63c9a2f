/** What stands for each character of a value in a quoted line of the config. */
const MASK = "*";

/** Characters that end a plain (unquoted) word in a line of YAML. */
const WORD_END = /[\s,[\]{}"'#]/;

/**
 * `line` of a YAML file with every value's characters replaced by `*`, one for one, so that a
 * caret under the line still points where it did: quoted strings keep their quotes, keys (a word
 * ending in `:` where a key may stand: first on the line, after `- `, `{` or `,`) and the
 * punctuation stay, comments keep their `#`. A value that itself ends in `:` (the very mistake
 * that makes the error) is masked. A line quoted in an error
 * (a syntax error at start, or in a reload's log line) then shows where the problem is without
 * an `api_key`, a header value or a password written there in plain text.
 */
export function maskYamlValues(line: string): string {
  let masked = "";
  let index = 0;
  let keyMayStand = true;
  while (index < line.length) {
    const character = line[index] as string;
    if (character === '"' || character === "'") {
      const end = findClosingQuote(line, index);
      masked += `${character}${MASK.repeat(Math.max(0, end - index - 1))}${end < line.length ? character : ""}`;
      index = end + 1;
      keyMayStand = false;
    } else if (character === "#" && (index === 0 || /\s/.test(line[index - 1] as string))) {
      masked += `#${MASK.repeat(line.length - index - 1)}`;
      index = line.length;
    } else if (WORD_END.test(character) || (character === "-" && /\s|$/.test(line[index + 1] ?? ""))) {
      masked += character;
      index += 1;
      if (character === "{" || character === ",") keyMayStand = true;
      else if (!/\s/.test(character) && character !== "-") keyMayStand = false;
    } else {
      let end = index;
      while (end < line.length && !WORD_END.test(line[end] as string)) end += 1;
      const word = line.slice(index, end);
      masked += keyMayStand && word.endsWith(":") ? word : MASK.repeat(word.length);
      index = end;
      keyMayStand = false;
    }
  }
  return masked;
}

/** The index of the quote that closes the string opened at `start`, or the line's length. */
export function findClosingQuote(line: string, start: number): number {
  const quote = line[start];
  let index = start + 1;
  while (index < line.length) {
    const character = line[index];
    if (quote === '"' && character === "\\") index += 2;
    else if (quote === "'" && character === "'" && line[index + 1] === "'") index += 2;
    else if (character === quote) return index;
    else index += 1;
  }
  return line.length;
}
