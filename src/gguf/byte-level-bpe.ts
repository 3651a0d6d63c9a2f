/**
 * Byte-level BPE as GPT-2 defines it: every byte maps to one printable Unicode character, text
 * is split into pre-tokens by a regular expression, and merges join adjacent symbols inside a
 * pre-token. Used to train a small, deterministic merge list for the test models.
 */

/**
 * The 256 byte characters in GPT-2's vocabulary order: printable bytes first (`!` .. `~`,
 * `¡` .. `¬`, `®` .. `ÿ`) as themselves, then the remaining bytes mapped to U+0100 onwards.
 * `byteCharacters[i]` is the character of the i-th byte token; `byteToCharacter[b]` maps a byte.
 */
export const { byteCharacters, byteToCharacter } = createByteCharacters();

function createByteCharacters(): { byteCharacters: readonly string[]; byteToCharacter: readonly string[] } {
  const printable: number[] = [];
  const push = (from: string, to: string): void => {
    for (let code = from.charCodeAt(0); code <= to.charCodeAt(0); code++) printable.push(code);
  };
  push("!", "~");
  push("¡", "¬");
  push("®", "ÿ");
  const bytes = [...printable];
  const characters = printable.map((code) => String.fromCharCode(code));
  let extra = 0;
  for (let byte = 0; byte < 256; byte++) {
    if (!printable.includes(byte)) {
      bytes.push(byte);
      characters.push(String.fromCharCode(256 + extra));
      extra++;
    }
  }
  const byteToCharacter = new Array<string>(256);
  bytes.forEach((byte, index) => {
    byteToCharacter[byte] = characters[index]!;
  });
  return { byteCharacters: characters, byteToCharacter };
}

/** Maps UTF-8 text to its byte-level character form (`" the"` becomes `"Ġthe"`). */
export function toByteLevel(text: string): string {
  let result = "";
  for (const byte of Buffer.from(text, "utf8")) result += byteToCharacter[byte]!;
  return result;
}

const characterToByte = new Map(byteToCharacter.map((character, byte) => [character, byte]));

/** Maps byte-level token text back to its bytes (`"Ġthe"` becomes the bytes of `" the"`). */
export function fromByteLevel(text: string): Uint8Array {
  const bytes = [...text].map((character) => {
    const byte = characterToByte.get(character);
    if (byte === undefined) throw new Error(`not a byte-level character: ${JSON.stringify(character)}`);
    return byte;
  });
  return Uint8Array.from(bytes);
}

/**
 * The pre-tokenizer regular expression llama.cpp uses for `tokenizer.ggml.pre = "qwen2"`
 * (`LLAMA_VOCAB_PRE_TYPE_QWEN2`), so merges trained here match what llama.cpp applies.
 */
export const qwen2PreTokenizerPattern =
  /(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+/gu;

/** Splits text into pre-tokens (plain text, not byte-level). */
export function preTokenize(text: string): string[] {
  return text.match(qwen2PreTokenizerPattern) ?? [];
}

export type TrainBytePairMergesOptions = {
  /** Training text. */
  readonly corpus: string;
  /** Upper bound on the number of merges. */
  readonly maximumMerges: number;
  /** Stop when the most frequent pair occurs fewer times than this. Default 2. */
  readonly minimumPairCount?: number;
};

/**
 * Learns merges greedily: repeatedly joins the most frequent adjacent pair of symbols (ties
 * broken by the pair's text, so the result is deterministic). Returns merges in rank order as
 * `[left, right]` in byte-level form.
 */
export function trainBytePairMerges(options: TrainBytePairMergesOptions): [string, string][] {
  const minimumPairCount = options.minimumPairCount ?? 2;
  const wordCounts = new Map<string, number>();
  for (const piece of preTokenize(options.corpus)) {
    const word = toByteLevel(piece);
    wordCounts.set(word, (wordCounts.get(word) ?? 0) + 1);
  }
  const words = [...wordCounts].map(([word, count]) => ({ symbols: [...word], count }));
  const merges: [string, string][] = [];

  while (merges.length < options.maximumMerges) {
    const pairCounts = new Map<string, number>();
    for (const { symbols, count } of words) {
      for (let index = 0; index + 1 < symbols.length; index++) {
        const key = `${symbols[index]} ${symbols[index + 1]}`;
        pairCounts.set(key, (pairCounts.get(key) ?? 0) + count);
      }
    }
    let bestKey: string | undefined;
    let bestCount = 0;
    for (const [key, count] of pairCounts) {
      if (count > bestCount || (count === bestCount && bestKey !== undefined && key < bestKey)) {
        bestKey = key;
        bestCount = count;
      }
    }
    if (bestKey === undefined || bestCount < minimumPairCount) break;
    const separator = bestKey.indexOf(" ", 1);
    const left = bestKey.slice(0, separator);
    const right = bestKey.slice(separator + 1);
    merges.push([left, right]);
    for (const word of words) word.symbols = mergePair(word.symbols, left, right);
  }
  return merges;
}

function mergePair(symbols: string[], left: string, right: string): string[] {
  const merged: string[] = [];
  for (let index = 0; index < symbols.length; index++) {
    if (index + 1 < symbols.length && symbols[index] === left && symbols[index + 1] === right) {
      merged.push(left + right);
      index++;
    } else {
      merged.push(symbols[index]!);
    }
  }
  return merged;
}
