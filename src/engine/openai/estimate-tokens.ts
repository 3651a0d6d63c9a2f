/**
 * Token estimates for upstream models, used where the upstream reports no usage (and to price the
 * reservation before a request runs). Upstream models use many tokenizers, so no one tokenizer is
 * exact; this estimator follows the way byte-pair tokenizers split text (cl100k, o200k, Llama,
 * Qwen) closely enough for billing estimates without shipping a vocabulary:
 *
 * - a run of letters (with the space before it) is one token up to 6 letters, then one more
 *   per further 6; in scripts written without spaces (Han, kana, Hangul, Thai) every 1.5
 *   characters count as one token, in other alphabets than Latin (Cyrillic, Greek, Arabic,
 *   Hebrew, Devanagari, ...) every 3;
 * - digits are split in groups of three;
 * - punctuation and symbols count one token per three characters (at least one per run);
 * - a single space is free (it joins the next word); line breaks count one token per two, and
 *   runs of spaces (indentation) one per four.
 *
 * Calibrated against OpenAI's o200k tokenizer on English prose, TypeScript, JSON, Russian,
 * Chinese and number-heavy text: from 0.9x (numbers) to 1.25x (code); other alphabets come out
 * 0.85-0.95x of o200k (Greek, Hebrew, Hindi; Russian over by 5 %). It is an estimate, not a bound:
 * crafted text counts several times more upstream, so reservations are priced from bytes instead
 * (estimate-prompt-tokens.ts). Older vocabularies need
 * more tokens for some scripts (cl100k: 2x on Cyrillic, 1.5x on Chinese). A tokenizer package
 * would be exact for OpenAI's own models only, and weighs tens of megabytes.
 */

/** Letters, digits, whitespace, then everything else. */
const PIECES = /(\p{L}[\p{L}\p{M}]*)|(\p{N}+)|(\s+)|([^\p{L}\p{N}\s]+)/gu;
/** Scripts written without spaces between words, where tokens are a character or two each. */
const DENSE_SCRIPT =
  /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}\p{Script=Thai}]/u;

/** A letter of an alphabet other than Latin (Cyrillic, Greek, Arabic, ...): vocabularies hold fewer of their words. */
const NON_LATIN_LETTER = /[^\p{Script=Latin}\p{M}]/u;

/** Any character beyond ASCII. */
const NON_ASCII = /\P{ASCII}/u;

/** Estimated tokens of a text (0 for ""). */
export function estimateTextTokens(text: string): number {
  if (text === "") return 0;
  if (!NON_ASCII.test(text)) return estimateAsciiTokens(text);
  let tokens = 0;
  for (const match of text.matchAll(PIECES)) {
    const [piece, letters, digits, space] = match;
    if (letters !== undefined) {
      tokens += DENSE_SCRIPT.test(letters)
        ? Math.ceil(letters.length / 1.5)
        : NON_LATIN_LETTER.test(letters)
          ? Math.ceil(letters.length / 3)
          : countLetterTokens(letters.length);
    } else if (digits !== undefined) {
      tokens += Math.ceil(digits.length / 3);
    } else if (space !== undefined) {
      let breaks = 0;
      for (let index = 0; index < space.length; index++) if (space.charCodeAt(index) === 10) breaks++;
      tokens += countSpaceTokens(space.length - breaks, breaks);
    } else {
      tokens += Math.ceil(piece.length / 3);
    }
  }
  return tokens;
}

const LETTER = 1;
const DIGIT = 2;
const SPACE = 3;
const OTHER = 4;

/** The same rules as the pattern, by character codes: most prompts are ASCII, and this is faster. */
function estimateAsciiTokens(text: string): number {
  let tokens = 0;
  let kind = 0;
  let length = 0;
  let breaks = 0;
  const close = () => {
    if (kind === LETTER) tokens += countLetterTokens(length);
    else if (kind === DIGIT) tokens += Math.ceil(length / 3);
    else if (kind === SPACE) tokens += countSpaceTokens(length - breaks, breaks);
    else if (kind === OTHER) tokens += Math.ceil(length / 3);
  };
  for (let index = 0; index < text.length; index++) {
    const code = text.charCodeAt(index);
    const next =
      (code >= 65 && code <= 90) || (code >= 97 && code <= 122)
        ? LETTER
        : code >= 48 && code <= 57
          ? DIGIT
          : code === 32 || (code >= 9 && code <= 13)
            ? SPACE
            : OTHER;
    if (next !== kind) {
      close();
      kind = next;
      length = 0;
      breaks = 0;
    }
    length++;
    if (code === 10) breaks++;
  }
  close();
  return tokens;
}

/** One token up to 6 letters, then one more per further 6. */
function countLetterTokens(length: number): number {
  return 1 + Math.max(0, Math.ceil((length - 6) / 6));
}

/** Line breaks cost a token per two; runs of spaces beyond the one a word carries, one per four. */
function countSpaceTokens(spaces: number, breaks: number): number {
  return Math.ceil(breaks / 2) + (spaces > 1 ? Math.ceil((spaces - 1) / 4) : 0);
}
